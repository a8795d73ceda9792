"""The cluster softmax experiment (bench/cluster_kernels.py, docs/speed.md) compiles for sm_90 on any machine: Triton
3.9 compiles a reduction across a thread-block cluster, and the PTX holds the blocks' exchange through distributed
shared memory.  No GPU is needed; the kernels' speed is the device's (bench/cluster_sweep.py)."""

import sys

import pytest
import triton

from tests.subruns import run

HAS_CLUSTER_LAYOUTS = tuple(int(part) for part in triton.__version__.split(".")[:2]) >= (3, 9)


@pytest.mark.skipif(not HAS_CLUSTER_LAYOUTS, reason=f"Triton {triton.__version__} has no cluster layouts (3.9 and later)")
def test_the_cluster_kernels_compile_for_sm_90_with_the_exchange_between_blocks():
    result = run([sys.executable, "bench/cluster_sweep.py", "--compile-only"], TRITON_INTERPRET="0")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("compiled for sm_90") == 8, result.stdout
