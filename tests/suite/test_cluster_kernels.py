"""full_softmax's cluster path and the designs tried before it (kernels/full_softmax/cluster_code.py,
bench/cluster_kernels.py, docs/speed.md) compile for sm_90 on any machine: Triton 3.9 compiles the blocks' exchange
through distributed shared memory, and each plan of the path on a Hopper card leaves room for the blocks that must
share an SM.  No GPU is needed for those; the kernels' speed is the device's (bench/cluster_sweep.py).  On a Hopper
card with Triton 3.9 (skipped elsewhere): a row over blocks of the grid gives the same bits whether its blocks wait
for each other's pairs or read each other's spans."""

import sys

import pytest
import torch
import triton

from kernels.full_softmax.arithmetic import arithmetic
from kernels.full_softmax.host import CLUSTER_MAJORS
from kernels.launch import HAS_CLUSTER_LAYOUTS
from tests.subruns import python, run


@pytest.mark.skipif(not HAS_CLUSTER_LAYOUTS, reason=f"Triton {triton.__version__} has no cluster layouts (3.9 and later)")
def test_the_cluster_kernels_compile_for_sm_90_with_the_exchange_between_blocks():
    result = run([sys.executable, "bench/cluster_sweep.py", "--compile-only"], TRITON_INTERPRET="0")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("compiled for sm_90") == 10, result.stdout


@pytest.mark.skipif(not HAS_CLUSTER_LAYOUTS, reason=f"Triton {triton.__version__} has no cluster layouts (3.9 and later)")
def test_every_hopper_plan_of_the_cluster_path_compiles_and_leaves_room_for_three_blocks_an_sm():
    result = run(python("tests.scenarios.cluster_plans"), TRITON_INTERPRET="0")
    assert result.returncode == 0, result.stdout + result.stderr
    # fp32 rows of 2^16 to 2^18; half rows of 2^16 to 2^19 to half and to fp32 outputs; two for sm_100.
    assert result.stdout.count(": compiled, ") == 13, result.stdout


def _hopper() -> bool:
    return (HAS_CLUSTER_LAYOUTS and torch.cuda.is_available() and not torch.version.hip
            and torch.cuda.get_device_capability()[0] in CLUSTER_MAJORS)


def _rows_with_seams(n: int, span: int, dtype: torch.dtype) -> torch.Tensor:
    """Rows of n at a span's seams: plain logits; a first span of -inf; -inf but for the last value; a NaN in the
    last span; a +inf in the middle; logits 80 apart across a span's end."""
    x = torch.randn(6, n, device="cuda", generator=torch.Generator(device="cuda").manual_seed(5)) * 4
    x[1, :span] = -float("inf")
    x[2, :-1] = -float("inf")
    x[3, -1] = float("nan")
    x[4, n // 2] = float("inf")
    x[5, span:] -= 80
    return x.to(dtype)


@pytest.mark.skipif(not _hopper(), reason="needs an NVIDIA sm_90 or sm_100 card and Triton 3.9 (the grid exchange)")
@pytest.mark.parametrize("n", [1 << 19, (1 << 19) - 5], ids=["aligned rows staged by cp.async", "rows staged by loads"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_a_row_over_the_grid_gives_the_same_bits_when_its_blocks_read_each_others_spans_rather_than_wait(n, dtype):
    """A block of a row over the grid that finds another's (maximum, sum) pair not yet posted reads that span
    itself: with no wait at all, most do; the result must be the bits of blocks that waited."""
    from kernels.full_softmax.cluster_code import GRID_WAIT_NS, launch_cluster  # Triton 3.9 and later

    groups, warps = 32, 4 if dtype == torch.float32 else 8
    span = (1 << 19) // groups
    x = _rows_with_seams(n, span, dtype)
    arith = arithmetic(x.device, False, dtype)
    outputs = []
    for wait_ns in (GRID_WAIT_NS, 0, GRID_WAIT_NS):
        y = torch.empty_like(x)
        launch_cluster(y, x, x.shape[0], n, (x.shape[0], 1, 1), (x.stride(0), 0, 0), (y.stride(0), 0, 0), 1, 1,
                       ctas=1, groups=groups, span=span, tile=warps * 32 * 16 // x.element_size(), num_warps=warps,
                       arith=arith, aligned=n % 16 == 0, wait_ns=wait_ns)
        outputs.append(y)
    waited, read, again = (y.view(torch.int16 if dtype == torch.bfloat16 else torch.int32) for y in outputs)
    assert torch.equal(waited, again), "two runs of the same rows differ"
    assert torch.equal(waited, read), [int((waited[r] != read[r]).sum()) for r in range(x.shape[0])]
    expected = torch.softmax(x.double(), -1)
    assert torch.equal(outputs[0].isnan(), expected.isnan()), "NaN where torch has none, or none where it has"
