"""full_softmax's cluster path and the designs tried before it (kernels/full_softmax/cluster_code.py,
bench/cluster_kernels.py, docs/speed.md) compile for sm_90 on any machine: Triton 3.9 compiles the blocks' exchange
through distributed shared memory, and each plan of the path on a Hopper card leaves room for the blocks that must
share an SM.  No GPU is needed; the kernels' speed is the device's (bench/cluster_sweep.py)."""

import sys

import pytest
import triton

from kernels.launch import HAS_CLUSTER_LAYOUTS
from tests.subruns import python, run


@pytest.mark.skipif(not HAS_CLUSTER_LAYOUTS, reason=f"Triton {triton.__version__} has no cluster layouts (3.9 and later)")
def test_the_cluster_kernels_compile_for_sm_90_with_the_exchange_between_blocks():
    result = run([sys.executable, "bench/cluster_sweep.py", "--compile-only"], TRITON_INTERPRET="0")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("compiled for sm_90") == 8, result.stdout


@pytest.mark.skipif(not HAS_CLUSTER_LAYOUTS, reason=f"Triton {triton.__version__} has no cluster layouts (3.9 and later)")
def test_every_hopper_plan_of_the_cluster_path_compiles_and_leaves_room_for_three_blocks_an_sm():
    result = run(python("tests.scenarios.cluster_plans"), TRITON_INTERPRET="0")
    assert result.returncode == 0, result.stdout + result.stderr
    # fp32 rows of 2^16 to 2^18; half rows of 2^16 to 2^19 to half and to fp32 outputs; two for sm_100.
    assert result.stdout.count(": compiled, ") == 13, result.stdout
