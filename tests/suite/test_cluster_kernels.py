"""full_softmax's cluster path and the designs tried before it (kernels/full_softmax/cluster_code.py,
bench/cluster_kernels.py, docs/speed.md) compile for sm_90 on any machine: Triton 3.9 compiles the blocks' exchange
through distributed shared memory, and each plan of the path on a Hopper card leaves room for the blocks that must
share an SM; asked to drop the masks of rows shorter than their cluster, the kernel refuses.  No GPU is needed for
those; the kernels' speed is the device's (bench/cluster_sweep.py).  On a card
of sm_90 or later with Triton 3.9 (skipped elsewhere): the grid kernel tried beside the cluster path gives the same
bits whether its blocks wait for each other's pairs or read each other's spans."""

import sys

import pytest
import torch
import triton

from kernels.launch import HAS_CLUSTER_LAYOUTS
from tests.subruns import python, run


@pytest.mark.skipif(not HAS_CLUSTER_LAYOUTS, reason=f"Triton {triton.__version__} has no cluster layouts (3.9 and later)")
def test_the_cluster_kernels_compile_for_sm_90_with_the_exchange_between_blocks():
    result = run([sys.executable, "bench/cluster_sweep.py", "--compile-only"], TRITON_INTERPRET="0")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("compiled for sm_90") == 14, result.stdout


@pytest.mark.skipif(not HAS_CLUSTER_LAYOUTS, reason=f"Triton {triton.__version__} has no cluster layouts (3.9 and later)")
def test_every_hopper_plan_of_the_cluster_path_compiles_and_leaves_room_for_the_blocks_that_share_an_sm():
    result = run(python("tests.scenarios.cluster_plans"), TRITON_INTERPRET="0")
    assert result.returncode == 0, result.stdout + result.stderr
    # fp32 rows of 2^16 to 2^19; half rows of 2^16 to 2^19 to half and to fp32 outputs, of 2^20 to half outputs;
    # each of its class's length (no masks) and shorter; two for sm_100.
    assert result.stdout.count(": compiled, ") == 28, result.stdout


@pytest.mark.skipif(not HAS_CLUSTER_LAYOUTS, reason=f"Triton {triton.__version__} has no cluster layouts (3.9 and later)")
def test_the_cluster_kernel_refuses_to_drop_the_masks_of_rows_shorter_than_their_cluster():
    from kernels.full_softmax.arithmetic import PRECISE
    from kernels.full_softmax.cluster_code import launch_cluster

    x = torch.zeros(2, 65536 - 16)
    with pytest.raises(ValueError, match="even: rows of 65520 columns need their masks"):
        launch_cluster(torch.empty_like(x), x, 2, 65520, (2, 1, 1), (65520, 0, 0), (65520, 0, 0), 1, 1, ctas=4,
                       span=16384, tile=1024, num_warps=4, arith=PRECISE.value, aligned=True, even=True)


def _hopper() -> bool:
    return (HAS_CLUSTER_LAYOUTS and torch.cuda.is_available() and not torch.version.hip
            and torch.cuda.get_device_capability()[0] >= 9)


@pytest.mark.skipif(not _hopper(), reason="needs an NVIDIA card of sm_90 or later and Triton 3.9 (the grid exchange)")
def test_a_row_over_the_grid_gives_the_same_bits_when_its_blocks_read_each_others_spans_rather_than_wait():
    """bench/cluster_kernels.py's grid_kernel: a block that finds another's (maximum, sum) pair not yet posted reads
    that span itself; with no wait at all, most do, and the rows (at a span's seams) must keep their bits."""
    result = run([sys.executable, "bench/cluster_sweep.py", "--check-grid"])
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("same bits") == 4, result.stdout
