"""NPU and multi-GPU code paths on fake devices: detection, worker pinning, launch settings.

No NPU and no GPU are needed.  In this process the fakes are small stand-ins
(monkeypatched); the pinning tests run the suite under ``pytest -n`` in a
fresh interpreter with ``tests/fakes/devices.py``, whose runtimes read their
visible-device variable when they start, as CUDA and Ascend's ACL do.
"""

import json
import re
import sys
import types
from dataclasses import replace
from typing import NamedTuple

import pytest
import torch
import triton

from harness.device import backend as backend_module
from harness.device import pinning
from harness.device.backend import resolve_name
from kernels import full_softmax, launch
from kernels.full_softmax import buffer_plan, host, launch_cache
from kernels.full_softmax.cuda_plan import HOPPER_CLUSTERS, gpu_plan
from oracles.call import Call
from specs import full_softmax as full_softmax_record
from specs.operations import MASKED_SOFTMAX, SOFTMAX

PINNED = "tests/scenarios/pinned_worker.py"


class FakeDevice(NamedTuple):
    """What the launch settings read of a torch.device, for device types this torch cannot name."""

    type: str
    index: int | None


# ---------------------------------------------------------------------------- detection


@pytest.mark.parametrize("available", [True, False])
def test_auto_picks_the_npu_when_torch_npu_imports_and_sees_a_device(monkeypatch, available):
    monkeypatch.setitem(sys.modules, "torch_npu", types.ModuleType("torch_npu"))
    monkeypatch.setattr(torch, "npu", types.SimpleNamespace(is_available=lambda: available), raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_name("auto") == ("npu" if available else "cpu")


def test_without_torch_npu_the_npu_is_refused_clearly(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch_npu", None)  # import torch_npu raises ImportError
    assert not backend_module.npu_available()
    with pytest.raises(backend_module.BackendError, match="torch_npu is not installed"):
        backend_module.runtime("npu")


# ---------------------------------------------------------------------------- pinning, in process


@pytest.mark.parametrize("value,read", [("4,6,7", [4, 6, 7]), ("4,6, 7", [4, 6]), ("6,2,5", [6, 2, 5]),
                                        ("3,,5", [3]), ("2;3", [2]), ("", []), ("0", [0])])
def test_the_visible_list_is_read_as_torch_npu_reads_it(value, read):
    """Up to the first character that is neither a digit nor a comma, and the first empty entry
    (torch_npu/npu/__init__.py, _parse_visible_devices)."""
    assert pinning.torch_npu_reads(value) == read


@pytest.mark.parametrize("value,said", [
    ("6,2,5", "is not in ascending order, and torch_npu then sees no NPU at all (its runtime needs the list ascending): "
              "write it 2,5,6"),
    ("4,6, 7", "torch_npu reads a list only up to its first character that is neither a digit nor a comma, so it sees "
               "[4, 6] of the ['4', '6', '7'] named: write it 4,6,7"),
    ("2,5,6", None), ("7", None)])
def test_a_list_torch_npu_would_read_otherwise_is_named_with_how_to_write_it(value, said):
    problem = pinning.npu_list_problem({"ASCEND_RT_VISIBLE_DEVICES": value})
    assert problem == (None if said is None else f"ASCEND_RT_VISIBLE_DEVICES={value!r} {said}"
                       if said.startswith("is") else f"ASCEND_RT_VISIBLE_DEVICES={value!r}: {said}")


def test_a_worker_indexes_into_the_users_list_without_renumbering():
    env = {"ASCEND_RT_VISIBLE_DEVICES": "4,6,7", "CUDA_VISIBLE_DEVICES": "3,1"}
    pins = pinning.narrow("gw4", env)
    assert env == {"ASCEND_RT_VISIBLE_DEVICES": "6", "CUDA_VISIBLE_DEVICES": "3"}  # 4 % 3 = 1, 4 % 2 = 0
    assert pins == [pinning.Pin("cuda", "3", narrowed=True), pinning.Pin("npu", "6", narrowed=True)]


def test_outside_xdist_nothing_is_narrowed():
    env = {"ASCEND_RT_VISIBLE_DEVICES": "4,6"}
    assert pinning.narrow(None, env) == [] and env == {"ASCEND_RT_VISIBLE_DEVICES": "4,6"}
    assert pinning.select("npu", None, lambda: 8, pytest.fail, []) is None


def test_without_a_list_the_worker_selects_its_device_by_number():
    chosen = []
    pin = pinning.select("npu", "gw10", lambda: 8, chosen.append, [])
    assert chosen == [2] and pin == pinning.Pin("npu", "2", narrowed=False, index=2)


def test_a_narrowed_worker_does_not_select_again():
    narrowed = pinning.narrow("gw1", {"ASCEND_RT_VISIBLE_DEVICES": "5,7"})
    assert pinning.select("npu", "gw1", lambda: 1, pytest.fail, narrowed) == pinning.Pin("npu", "7", True)


@pytest.mark.parametrize(("devices", "per_device", "cpus", "expected"),
                         [(8, None, 64, 64), (8, 2, 64, 16), (3, None, 2, 3), (0, None, 16, 16)])
def test_auto_worker_count(devices, per_device, cpus, expected):
    assert pinning.workers(devices, per_device, cpus) == expected


# ---------------------------------------------------------------------------- pinning, under xdist


def run_pinned(run_pytest, tmp_path, workers: str, device: str, *options: str, **env: str) -> list[dict]:
    # --dist each: every worker runs the scenario, so every worker reports its device.
    result = run_pytest("-n", workers, "--dist", "each", "-p", "tests.fakes.devices", "--device", device, *options,
                        PINNED, FAKE_DEVICES_LOG=str(tmp_path), **env)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    views = {path.stem: json.loads(path.read_text()) for path in tmp_path.glob("gw*.json")}
    assert views, result.stdout[-3000:]
    return [views[f"gw{k}"] for k in range(len(views))]


def test_npu_workers_index_into_a_narrowed_visible_list(run_pytest, tmp_path):
    views = run_pinned(run_pytest, tmp_path, "4", "npu", FAKE_NPUS="8", ASCEND_RT_VISIBLE_DEVICES="2,5,6")
    assert [v["physical"] for v in views] == [2, 5, 6, 2]
    # Narrowed before the runtime started: each worker's runtime saw only its own device, as npu:0.
    assert [v["started_with"] for v in views] == ["2", "5", "6", "2"]
    assert {v["device"] for v in views} == {"npu:0"}


@pytest.mark.parametrize("device", ["npu", "auto"])
def test_a_visible_list_torch_npu_would_read_otherwise_is_refused_before_any_test(run_pytest, device):
    """torch_npu sees no NPU with "6,2,5" (and only 4 and 6 of "4,6, 7"): the controller saw none, and --device auto
    fell back to the CPU, whose TRITON_INTERPRET the workers inherited and refused."""
    refused = run_pytest("-n", "2", "-p", "tests.fakes.devices", "--device", device, PINNED, FAKE_NPUS="8",
                         ASCEND_RT_VISIBLE_DEVICES="6,2,5")
    assert refused.returncode == pytest.ExitCode.USAGE_ERROR, refused.stdout[-2000:] + refused.stderr[-2000:]
    assert "is not in ascending order, and torch_npu then sees no NPU at all" in refused.stderr, refused.stderr


def test_npu_workers_without_a_list_take_device_worker_mod_count(run_pytest, tmp_path):
    views = run_pinned(run_pytest, tmp_path, "3", "npu", FAKE_NPUS="2")
    assert [v["physical"] for v in views] == [0, 1, 0]
    assert [v["device"] for v in views] == ["npu:0", "npu:1", "npu:0"]
    assert {v["started_with"] for v in views} == {None}


def test_cuda_workers_index_into_cuda_visible_devices(run_pytest, tmp_path):
    views = run_pinned(run_pytest, tmp_path, "2", "cuda", FAKE_CUDA="4", CUDA_VISIBLE_DEVICES="3,1")
    assert [v["physical"] for v in views] == [3, 1]
    assert [v["started_with"] for v in views] == ["3", "1"]


def test_auto_detection_and_auto_worker_count_on_fake_npus(run_pytest, tmp_path):
    views = run_pinned(run_pytest, tmp_path, "auto", "auto", "--workers-per-device", "2", FAKE_NPUS="3")
    assert len(views) == 6 and {v["backend"] for v in views} == {"npu"}
    assert sorted(v["physical"] for v in views) == [0, 0, 1, 1, 2, 2]


def test_the_header_names_the_fake_npu(run_pytest, tmp_path):
    result = run_pytest("-p", "tests.fakes.devices", "--collect-only", "--device", "npu", PINNED, FAKE_NPUS="1")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "softmax suite backend: npu (compiled Triton) on fake npu (physical 0) [npu:0]" in result.stdout


# ---------------------------------------------------------------------------- launch settings


@pytest.fixture
def fresh_launch_caches(monkeypatch):
    """Plans made afresh, on a card without the cluster path unless a test gives it one."""
    caches = (launch.compute_units, launch.cache_bytes, host.plan)
    for cache in caches:
        cache.cache_clear()
    monkeypatch.setattr(host, "cluster_card", lambda device: None)
    yield
    for cache in caches:
        cache.cache_clear()


def fake_ascend_driver(monkeypatch, properties: dict[int, dict]):
    utils = types.SimpleNamespace(get_device_properties=lambda index: properties[index])
    monkeypatch.setattr(triton.runtime, "driver", types.SimpleNamespace(active=types.SimpleNamespace(utils=utils)))


def test_npu_program_count_is_the_devices_vector_core_count(monkeypatch, fresh_launch_caches):
    fake_ascend_driver(monkeypatch, {0: {"num_vectorcore": 48, "num_aicore": 24}, 1: {"num_vectorcore": 40}})
    assert launch.compute_units(FakeDevice("npu", 0)) == 48
    assert launch.compute_units(FakeDevice("npu", 1)) == 40


def test_npu_program_count_falls_back_without_the_property(monkeypatch, fresh_launch_caches):
    fake_ascend_driver(monkeypatch, {0: {"num_aicore": 24}})  # an older driver without the key
    assert launch.compute_units(FakeDevice("npu", 0)) == launch.NPU_FALLBACK_PROGRAMS


def test_each_gpu_has_its_own_sm_count(monkeypatch, fresh_launch_caches):
    properties = {0: types.SimpleNamespace(multi_processor_count=132, L2_cache_size=50 << 20),
                  1: types.SimpleNamespace(multi_processor_count=78, L2_cache_size=40 << 20)}
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: properties[device.index])
    assert [launch.compute_units(FakeDevice("cuda", i)) for i in (0, 1)] == [132, 78]
    assert [launch.cache_bytes(FakeDevice("cuda", i)) for i in (0, 1)] == [50 << 20, 40 << 20]


NPU_SHAPES = [(1, 1), (1_000_000, 64), (200_000, 781), (70_000, 16384), (3, 16385), (4096, 65536),
              (70_000, 1 << 20), (2, 1 << 24)]


@pytest.mark.parametrize("shape", NPU_SHAPES, ids=str)
@pytest.mark.parametrize("element_size", [4, 2])
def test_npu_launches_fit_the_grid_limit_and_the_unified_buffer(monkeypatch, fresh_launch_caches, shape,
                                                                 element_size):
    fake_ascend_driver(monkeypatch, {0: {"num_vectorcore": 48}})
    monkeypatch.setattr(host, "interpreted", lambda: False)  # plan as for a compiled NPU kernel
    plan = host.plan(shape, 1, FakeDevice("npu", 0), element_size)
    assert 1 <= plan.programs <= buffer_plan.NPU_GRID_LIMIT
    # fp32 working copies of a tile: the values, their exponentials and the output.
    assert 3 * plan.rows * plan.block * 4 <= buffer_plan.NPU_UB_BYTES
    assert plan.block * plan.splits * plan.chunks(shape[1]) >= shape[1]  # the tiles cover the row
    if plan.path == "single":
        assert plan.programs <= 4 * 48


CUDA_LENGTHS = [1, 300, 2048, 8192, 16384, 16385, 32768, 32769, 65536, 65537, 1 << 18, (1 << 18) + 1, 1 << 20]


@pytest.mark.parametrize("clusters", [None, HOPPER_CLUSTERS], ids=["no clusters", "Hopper's clusters"])
@pytest.mark.parametrize("masked", [False, True], ids=["unmasked", "masked"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_the_cuda_profile_bounds_the_plan_of_the_call(monkeypatch, fresh_launch_caches, dtype, masked, clusters):
    """On CUDA masked rows take their own plan, and long rows a cluster's where the card and Triton run it: the
    profile of a call must sum at least as deep, with at least as many rescales, as the plan that call takes."""
    monkeypatch.setattr(host, "cluster_card", lambda device: clusters)
    monkeypatch.setattr(host, "interpreted", lambda: False)  # plan as for a compiled CUDA kernel
    monkeypatch.setattr(host, "compute_units", lambda device: 132)
    monkeypatch.setattr(host, "card_plans", lambda device: {})  # a card without a tuned table
    for n in CUDA_LENGTHS:
        x = types.SimpleNamespace(shape=(4, n), device=torch.device("cuda", 0), dtype=dtype,
                                  element_size=lambda: torch.finfo(dtype).bits // 8)
        keep = types.SimpleNamespace(shape=(4, n)) if masked else None  # the model reads only whether there is one
        profile = full_softmax_record.precision(Call(x, -1, MASKED_SOFTMAX if masked else SOFTMAX, "cuda", keep))
        tree = full_softmax_record.reduction(host.plan((4, n), 1, x.device, x.element_size(), masked), n,
                                             profile.reduction.kind)
        assert profile.reduction.depth(n) >= tree.depth(n) and profile.reduction.rescales(n) >= tree.rescales(n), n


@pytest.mark.parametrize("n, element_size", [((1 << 18) + 1, 4), (1 << 19, 4), (1 << 20, 2)], ids=str)
def test_the_precision_model_sums_a_span_partly_held_in_registers_at_least_as_deep_as_the_cluster_kernel(
        n, element_size):
    """cluster_kernel sums a block's staged tiles elementwise (tiles - 1 additions), then a thread's values of the
    sum in sequence and a tree over the block's threads; its held columns likewise, a thread's values then the tree;
    then adds the two: the model's tree (the block's part, before its blocks meet) must be at least as deep."""
    plan = gpu_plan(n, 4, 132, element_size, clusters=HOPPER_CLUSTERS)
    assert plan.path == "cluster" and plan.held > 0
    threads = 32 * plan.num_warps
    tree = (threads - 1).bit_length()
    tiles = (plan.span(n) - plan.held) // plan.block
    staged = tiles - 1 + plan.block // threads - 1 + tree
    held = plan.held // threads - 1 + tree
    model = full_softmax_record.reduction(plan, n, "triton-block")
    assert replace(model, spans=1).depth(n) >= max(staged, held) + 1


@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("n", [1, 256, 1024, 4096, 16384])
def test_a_one_pass_cuda_row_is_a_tile_a_program_however_many_rows(monkeypatch, fresh_launch_caches, n, masked):
    """On CUDA each tile of one-pass rows gets its own program, past 32 an SM too: persistent
    programs looping over tiles ran slower on many rows (README, "Speed")."""
    monkeypatch.setattr(host, "interpreted", lambda: False)
    monkeypatch.setattr(host, "compute_units", lambda device: 132)
    monkeypatch.setattr(host, "card_plans", lambda device: {})  # a card without a tuned table
    for n_rows in (1, 4096, 65536, 1 << 22):
        plan = host.plan((n_rows, n), 1, torch.device("cuda", 0), 4, masked)
        assert plan.path == "single", (n_rows, n, masked)
        assert (plan.programs - 1) * plan.rows < n_rows <= plan.programs * plan.rows <= plan.rows * (2**31 - 1)


SPLIT_LENGTHS = [(1 << 17) + 1, 140_000, (1 << 18) - 1, 1 << 18, (1 << 18) + 1, 1 << 20, (1 << 20) + 4097, 1 << 24]


@pytest.mark.parametrize("device_type", ["cuda", "npu"])
@pytest.mark.parametrize("n", SPLIT_LENGTHS)
def test_a_split_row_is_cut_into_whole_tiles_and_each_span_holds_columns(monkeypatch, fresh_launch_caches,
                                                                         device_type, n):
    """Spans of whole tiles, every one holding columns, one task each: a span cut short of its
    tile, or a task with nothing to read, costs the bandwidth of a full one."""
    fake_ascend_driver(monkeypatch, {0: {"num_vectorcore": 48}})
    monkeypatch.setattr(host, "interpreted", lambda: False)
    monkeypatch.setattr(host, "compute_units", lambda device: 132)
    monkeypatch.setattr(host, "card_plans", lambda device: {})  # a card without a tuned table
    plan = host.plan((8, n), 1, FakeDevice(device_type, 0), 4)
    if plan.path != "split":
        pytest.skip(f"{n} is not split on {device_type}")
    span, spans = plan.span(n), plan.spans(n)
    assert span % plan.block == 0 and (spans - 1) * span < n <= spans * span <= plan.splits * span
    assert plan.splits == triton.next_power_of_2(plan.splits)  # the width of the tree over the spans' sums
    assert plan.programs == 8 * spans if device_type == "cuda" else plan.programs % spans == 0


def test_a_remembered_launch_serves_only_calls_of_its_layout_and_operation(backend):
    """full_softmax remembers how it launched a contiguous call; a later call of the same shape with
    other strides, or log_softmax, must be planned afresh, not served that launch."""
    x = torch.randn(6, 40, generator=torch.Generator().manual_seed(0)).to(backend.device)
    first = full_softmax.softmax(x)
    assert launch_cache.call_key(x, -1, False, None) in launch_cache.CONTIGUOUS_CALLS, "the call was not remembered"
    assert torch.equal(full_softmax.softmax(x), first)
    columns = torch.randn(40, 6, generator=torch.Generator().manual_seed(1)).to(backend.device).t()  # (6, 40), column stride 6
    assert torch.equal(full_softmax.softmax(columns), full_softmax.softmax(columns.contiguous()))
    assert (full_softmax.log_softmax(x) <= 0).all()  # softmax's launch would give values in (0, 1]
    # Same shape and strides, but starting one element into its storage: Triton compiles such a
    # pointer apart (no 16-byte alignment), so the aligned call's launcher must not serve it.
    shifted = torch.randn(6 * 40 + 1, generator=torch.Generator().manual_seed(2)).to(backend.device)[1:].view(6, 40)
    assert torch.equal(full_softmax.softmax(shifted), full_softmax.softmax(shifted.clone()))


def test_a_run_under_inf_nan_saturation_is_refused_with_the_reason(run_pytest):
    """INF_NAN_MODE_FORCE_DISABLE=1 saturates infinities and NaN on an Ascend NPU: every special-value verdict would
    blame the kernel."""
    refused = run_pytest("-p", "tests.fakes.devices", "--device", "npu", PINNED, FAKE_NPUS="2",
                         INF_NAN_MODE_FORCE_DISABLE="1")
    assert refused.returncode == pytest.ExitCode.USAGE_ERROR and "INF_NAN_MODE_FORCE_DISABLE=1 makes the NPU " \
        "saturate infinities and NaN" in refused.stderr, refused.stderr


def test_the_header_names_the_devices_stack_and_its_settings(run_pytest):
    said = run_pytest("--collect-only", "-p", "tests.fakes.devices", "--device", "npu", PINNED, FAKE_NPUS="2",
                      TRITON_ALL_BLOCKS_PARALLEL="1")
    assert said.returncode == 0, said.stdout[-2000:]
    assert re.search(r"npu stack: torch_npu \S+, CANN \S+.*TRITON_ALL_BLOCKS_PARALLEL=1", said.stdout), said.stdout[:2000]
