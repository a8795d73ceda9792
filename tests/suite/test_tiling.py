"""A tiled kernel that declares one tile is warned (harness/device/tiling.py); this project's kernels and
the README's example, each of which declares what it does, are not."""

import math
import warnings

import pytest
import torch

from harness.device import tiling
from harness.guard import calls
from harness.judging.judge import judge_softmax
from oracles.call import Call
from specs.operations import OPERATIONS
from specs.registry import declares, resolve

TILED = "tests/scenarios/tiled_one_tile.py"
# Every kernel of this project's, registered or declared as a user's file declares one, and the README's example.
DECLARED = ("full_softmax", "fused_softmax", "rowwise", "torch", "specs.online:softmax",
            "examples/my_kernels.py:softmax")


@pytest.fixture
def interpreted(backend):
    if not backend.interpreted:
        pytest.skip(f"the suite sees a kernel's sums under Triton's interpreter; this run's backend is {backend.name}")
    return backend


def guarded(selector: str):
    """The kernel ``selector`` names, each call through the guard, as a run's are."""
    nowhere = calls.Breadcrumbs(None, "")
    return calls.guarded(resolve(selector), calls.Guard(calls.Watchdog(None, math.inf, nowhere), nowhere,
                                                        calls.Outputs()))


def call_of(operation, n: int, backend: str) -> Call:
    """Rows of ``n`` fp32 elements for ``operation`` (a causal softmax's rows as many as it has columns, to 64)."""
    x = torch.randn(min(n, 64) if operation.causal else 3, n)
    values = {"mask": torch.rand(x.shape) > 0.3 if operation.masked else None,
              "grad": torch.randn(x.shape) if operation.backward else None,
              "scale": 0.125 if operation.scaled else None,
              "bias": torch.randn(x.shape) if operation.biased else None}
    if operation.backward:
        x = torch.softmax(x, -1)
    if operation.out_dtype is not None:
        x = x.half()
    return Call(x, -1, operation, backend, **values)


def warnings_of(kernel, call: Call) -> list[str]:
    """What judging ``kernel``'s result for ``call`` warns of a one-tile declaration, in a process that warned of
    none before."""
    tiling._warned.discard(kernel.name)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        judge_softmax(kernel, call, kernel.run(call), replay="here")
    return [str(w.message) for w in caught if issubclass(w.category, tiling.OneTileDeclared)]


def test_a_tiled_kernel_declaring_one_tile_is_told_what_to_declare(interpreted):
    """Rows of 1000 in tiles of 256, declared as one tl.sum over the padded row: the warning names the tile it saw,
    the fields to add and where they are shown; rows of one tile say nothing."""
    kernel = guarded(f"{TILED}:softmax")
    assert not warnings_of(kernel, call_of(OPERATIONS["softmax"], 200, interpreted.name))
    said = warnings_of(kernel, call_of(OPERATIONS["softmax"], 1000, interpreted.name))
    assert len(said) == 1, said
    assert "summed rows of 1000 in pieces" in said[0] and "was 256 wide" in said[0], said[0]
    for field in ("path_boundaries={'cpu': (TILE,)}", "Reduction(..., block=TILE, chunks=tiles)", "specs/online.py",
                  "Declare what your kernel handles"):
        assert field in said[0], field


def test_the_same_kernel_declaring_its_tiles_is_not_warned(interpreted):
    kernel = guarded(f"{TILED}:softmax_declared")
    assert not warnings_of(kernel, call_of(OPERATIONS["softmax"], 1000, interpreted.name))


def test_a_judge_reads_only_the_sums_of_the_rows_it_judges(interpreted):
    """A result judged after the kernel ran on other rows (another shape here) is no evidence of how it summed."""
    kernel = guarded(f"{TILED}:softmax")
    tiling._warned.discard(kernel.name)
    kernel.run(call_of(OPERATIONS["softmax"], 1000, interpreted.name))
    other = Call(torch.randn(5, 1000), -1, OPERATIONS["softmax"], interpreted.name)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        judge_softmax(kernel, other, torch.softmax(other.x, -1), replay="here")
    assert not [w for w in caught if issubclass(w.category, tiling.OneTileDeclared)]


@pytest.mark.parametrize("sent", [None, "256", (["softmax", [2, 300], 1], 1.5), (["softmax", [2, "300"], 1], 256),
                                  ("softmax", 256), (["softmax", [2, 300], 1], 256, 0)])
def test_what_a_kernel_process_sends_in_place_of_its_sums_tells_nothing(sent):
    tiling.note("k", (["softmax", [2, 300], 1], 256))
    tiling.note("k", sent)
    assert tiling.last("k") is None


@pytest.mark.parametrize("selector", DECLARED)
def test_no_kernel_of_this_project_is_warned_on_any_operation_it_declares(interpreted, selector):
    """Rows of one block and of several, beside full_softmax's paths (1024, 2048) and online's tile (256), to the
    CPU's row cap."""
    kernel = guarded(selector)
    for operation in (op for op in OPERATIONS.values() if declares(kernel.capabilities, op)):
        for n in (7, 300, 1025, 2049, 4096):
            assert not warnings_of(kernel, call_of(operation, n, interpreted.name)), (operation.name, n)


def test_a_kernel_process_sends_how_wide_its_sums_were(interpreted, run_pytest):
    """A kernel named by its path runs in a process of its own: the warning comes from there, in the run's warnings
    summary, naming the kernel."""
    result = run_pytest("tests/kernel/test_accuracy.py", "-k", "test_output_within and -softmax- and float32",
                        "--kernel", f"{TILED}:softmax", "--hypothesis-profile", "mutation")
    assert "OneTileDeclared" in result.stdout and f"{TILED}:softmax summed rows of" in result.stdout, \
        result.stdout[-3000:]
