"""full_softmax's launch plans on CUDA from a card's tuned table (kernels/full_softmax/tuned/), and its cluster
path's from the card's shared memory and compute capability, on fake cards.

The card is faked through the properties torch reports (its name, SMs, L2, shared memory and capability), as
``kernels/launch.py`` and ``host.cluster_card`` read them; no GPU is needed.
"""

import json
import types

import pytest
import torch

from kernels import launch
from kernels.full_softmax import host, tuned_plans
from kernels.full_softmax.cuda_plan import HOPPER_CLUSTERS, ClusterCard, gpu_plan, longest_cluster_row
from kernels.full_softmax.plan import Plan
from oracles.call import Call
from specs import full_softmax as full_softmax_record
from specs.operations import MASKED_SOFTMAX, SOFTMAX

CARD = "Fake Card 80GB HBM9"
OTHER_CARD = "Fake Card 40GB"
CUDA = torch.device("cuda", 0)

# The plans of 4096 rows on 132 SMs as the constants gave them before the tables existed (1189e0c):
# (n, element size, masked) -> path, block, rows, num_warps, splits, write_warps.
DERIVED_PLANS = {
    (1, 4, False): ("single", 1, 1024, 4, 1, None), (100, 4, False): ("single", 128, 8, 4, 1, None),
    (256, 4, False): ("single", 256, 2, 1, 1, None), (300, 4, False): ("single", 512, 1, 1, 1, None),
    (1024, 4, False): ("single", 1024, 1, 1, 1, None), (4096, 4, False): ("single", 4096, 1, 8, 1, None),
    (8192, 4, False): ("single", 8192, 1, 16, 1, None), (16384, 4, False): ("single", 16384, 1, 8, 1, None),
    (32768, 4, False): ("single", 32768, 1, 16, 1, None), (65536, 4, False): ("chunked", 32768, 1, 16, 1, None),
    (140000, 4, False): ("split", 4096, 1, 4, 64, 8), (1 << 20, 4, False): ("split", 4096, 1, 4, 256, 8),
    (128, 2, False): ("single", 128, 16, 4, 1, None), (512, 2, False): ("single", 512, 2, 1, 1, None),
    (2048, 2, False): ("single", 2048, 1, 2, 1, None), (32768, 2, False): ("single", 32768, 1, 32, 1, None),
    (1 << 18, 2, False): ("chunked", 32768, 1, 32, 1, None), ((1 << 18) + 1, 2, False): ("split", 4096, 1, 4, 128, 8),
    (1024, 4, True): ("single", 1024, 1, 2, 1, None), (16384, 4, True): ("single", 16384, 1, 32, 1, None),
    (16385, 4, True): ("chunked", 16384, 1, 32, 1, None), (32769, 2, True): ("chunked", 16384, 1, 16, 1, None),
    (1 << 20, 2, True): ("split", 4096, 1, 4, 256, 8),
}


@pytest.fixture
def fake_cards(monkeypatch, tmp_path):
    """CUDA device 0 is the card CARD, compiled kernels (no interpreter), tables read from tmp_path; returns a
    function that names the card device 0 is."""
    card = {"name": CARD, "capability": (8, 0), "shared": 164 * 1024}  # an sm_80 card: no clusters

    def properties(device):
        return types.SimpleNamespace(name=card["name"], multi_processor_count=132, L2_cache_size=50 << 20,
                                     shared_memory_per_multiprocessor=card["shared"])

    caches = (launch.card_name, launch.compute_units, launch.cache_bytes, host.plan, host.cluster_card)
    for cache in caches:
        cache.cache_clear()
    monkeypatch.setattr(torch.cuda, "get_device_properties", properties)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device: card["capability"])
    monkeypatch.setattr(host, "interpreted", lambda: False)
    monkeypatch.setattr(tuned_plans, "TABLES_DIR", tmp_path)
    monkeypatch.setattr(tuned_plans, "TABLES", {})

    def name(new: str, capability: tuple[int, int] = (8, 0), shared: int | None = 164 * 1024) -> None:
        card.update(name=new, capability=capability, shared=shared)
        for cache in caches:
            cache.cache_clear()

    yield name
    for cache in caches:  # no fake card's plan may outlive the test
        cache.cache_clear()


def table(*classes: dict, card: str = CARD) -> dict:
    return {"card": card, "date": "2026-11-26", "torch": "2.11.0+cu130", "triton": "3.6.0", "classes": list(classes)}


def entry(row_bucket: int, element_size: int, masked: bool, path: str, settings: dict) -> dict:
    return {"row_bucket": row_bucket, "element_size": element_size, "masked": masked, "path": path,
            "settings": settings, "candidates": [{"settings": settings, "gbps": 2901.5, "rounds": [2900, 2901.5, 2903],
                                                  "check": "derived"}]}


TUNED = table(entry(8192, 4, False, "single", {"rows": 1, "num_warps": 8}),
              entry(256, 2, True, "single", {"rows": 16, "num_warps": 8}),
              entry(1 << 20, 4, False, "split", {"span": 8192, "num_warps": 8, "write_warps": 4}))


def write(document: dict, card: str = CARD):
    path = tuned_plans.table_path(card)
    path.write_text(json.dumps(document))
    return path


@pytest.mark.parametrize("key", sorted(DERIVED_PLANS), ids=str)
def test_without_a_table_the_plans_are_the_constants(fake_cards, key):
    n, element_size, masked = key
    path, block, rows, warps, splits, write_warps = DERIVED_PLANS[key]
    plan = host.plan((4096, n), 1, CUDA, element_size, masked)
    assert plan == gpu_plan(n, 4096, 132, element_size, masked)
    assert (plan.path, plan.block, plan.rows, plan.num_warps, plan.splits, plan.write_warps) == DERIVED_PLANS[key]


def test_the_table_of_the_card_is_read_and_another_cards_ignored(fake_cards):
    write(TUNED)
    assert host.plan((4096, 8192), 1, CUDA, 4).num_warps == 8  # the constants: 16
    assert host.plan((4096, 200), 1, CUDA, 2, True) == Plan("single", 256, 16, 8, programs=256)
    split = host.plan((64, 1 << 20), 1, CUDA, 4)
    assert (split.block, split.splits, split.num_warps, split.write_warps) == (8192, 128, 8, 4)
    assert host.plan((4096, 4096), 1, CUDA, 4) == gpu_plan(4096, 4096, 132, 4)  # a class the table lacks
    fake_cards(OTHER_CARD)
    assert host.plan((4096, 8192), 1, CUDA, 4) == gpu_plan(8192, 4096, 132, 4)


def test_a_tuned_plan_depends_on_the_row_length_not_the_row_count(fake_cards):
    """Batch invariance: a row's tile, warps and spans are the same whatever the rows around it; only
    the program count follows the rows."""
    write(TUNED)
    for n, element_size, masked in [(8192, 4, False), (8000, 4, False), (129, 2, True), (1 << 20, 4, False),
                                    ((1 << 19) + 3, 4, False)]:
        plans = {host.plan((n_rows, n), 1, CUDA, element_size, masked) for n_rows in (1, 3, 4096, 1 << 20)}
        assert len({(p.path, p.block, p.rows, p.num_warps, p.splits, p.write_warps) for p in plans}) == 1, plans


@pytest.mark.parametrize("operation", [SOFTMAX, MASKED_SOFTMAX], ids=lambda op: op.name)
def test_the_precision_model_follows_the_tuned_plan(fake_cards, operation):
    write(TUNED)
    x = types.SimpleNamespace(shape=(4, 200), device=CUDA, dtype=torch.bfloat16, element_size=lambda: 2)
    call = Call(x, -1, operation, "cuda", types.SimpleNamespace(shape=(4, 200)) if operation.masked else None)
    reduction = full_softmax_record.precision(call).reduction
    assert (reduction.num_warps, reduction.rows) == ((8, 16) if operation.masked else (4, 8))  # tuned / derived


HOPPER_SHARED = 228 * 1024  # an H100's or H200's shared memory an SM


@pytest.fixture
def cluster_card(fake_cards, monkeypatch):
    """Device 0 a Hopper card (sm_90, 228 KB of shared memory an SM) under a Triton with cluster layouts."""
    monkeypatch.setattr(host, "HAS_CLUSTER_LAYOUTS", True)
    fake_cards(CARD, (9, 0), HOPPER_SHARED)
    return fake_cards


# Rows of a Hopper card's cluster path: (n, element size) -> blocks, warps, tile, columns of a span held in
# registers, a thread's registers (measured: docs/speed.md).
CLUSTER_PLANS = {(65536, 4): (4, 4, 1024, 0, None), (131072, 4): (8, 4, 1024, 0, None),
                 (200000, 4): (16, 4, 1024, 0, None), (1 << 18, 4): (16, 4, 1024, 0, None),
                 (1 << 19, 4): (16, 8, 2048, 8192, 128), (32769, 2): (2, 8, 4096, 0, None),
                 (1 << 18, 2): (8, 8, 4096, 0, None), (1 << 19, 2): (16, 8, 4096, 0, None),
                 (1 << 20, 2): (16, 8, 4096, 16384, 128)}


@pytest.mark.parametrize("key", sorted(CLUSTER_PLANS), ids=str)
def test_a_hopper_card_with_cluster_layouts_runs_long_rows_over_a_cluster(cluster_card, key):
    n, element_size = key
    ctas, warps, tile, held, registers = CLUSTER_PLANS[key]
    plan = host.plan((7, n), 1, CUDA, element_size)
    assert plan == Plan("cluster", tile, 1, warps, splits=ctas, programs=7, held=held, registers=registers)
    assert plan == gpu_plan(n, 7, 132, element_size, clusters=ClusterCard(HOPPER_SHARED, 16))


@pytest.mark.parametrize("n, element_size, masked, log, exact", [
    (32768, 4, False, False, True),  # one pass: at a copy's speed already
    ((1 << 19) + 1, 4, False, False, True), ((1 << 20) + 1, 2, False, False, False),  # a span past two shares
    ((1 << 19) + 1, 2, False, False, True),  # half in, fp32 out: a span past the exact sums' 32768 columns
    (65536, 4, True, False, True), (65536, 4, False, True, True)],  # masked rows, log_softmax's float64 arithmetic
    ids=str)
def test_rows_the_cluster_path_does_not_take_keep_their_plans(cluster_card, n, element_size, masked, log, exact):
    plan = host.plan((7, n), 1, CUDA, element_size, masked, log, exact)
    assert plan.path != "cluster"
    assert plan == gpu_plan(n, 7, 132, element_size, masked)


def test_the_cluster_path_needs_cluster_layouts_an_nvidia_sm_90_and_its_shared_memory(cluster_card, monkeypatch):
    assert host.plan((7, 65536), 1, CUDA, 4).path == "cluster"
    cluster_card(CARD, (8, 6), HOPPER_SHARED)
    assert host.plan((7, 65536), 1, CUDA, 4) == gpu_plan(65536, 7, 132, 4)
    cluster_card(CARD, (9, 0), None)  # a torch that does not report it
    assert host.plan((7, 65536), 1, CUDA, 4) == gpu_plan(65536, 7, 132, 4)
    monkeypatch.setattr(torch.version, "hip", "6.4")  # ROCm: an MI300 reports capability (9, 4)
    cluster_card(CARD, (9, 4), 64 * 1024)
    assert host.plan((7, 65536), 1, CUDA, 4) == gpu_plan(65536, 7, 132, 4)
    monkeypatch.setattr(torch.version, "hip", None)
    monkeypatch.setattr(host, "HAS_CLUSTER_LAYOUTS", False)
    cluster_card(CARD, (9, 0), HOPPER_SHARED)
    assert host.plan((7, 65536), 1, CUDA, 4) == gpu_plan(65536, 7, 132, 4)


def test_the_cluster_settings_follow_the_cards_shared_memory_and_cluster_size():
    """A card of 100 KB an SM and clusters of 8: shares of 32 KB; spans of two, a quarter of them in registers, for
    two blocks an SM whose registers the card's count divides; no cluster path for rows whose spans would pass
    two shares."""
    small = ClusterCard(100 * 1024, 8, 32768)
    assert gpu_plan(65536, 7, 132, 4, clusters=small) == Plan("cluster", 512, 1, 2, splits=8, programs=7)
    assert gpu_plan(1 << 16, 7, 132, 2, clusters=small) == Plan("cluster", 2048, 1, 4, splits=4, programs=7)
    assert gpu_plan(1 << 17, 7, 132, 4, clusters=small) == Plan("cluster", 2048, 1, 8, splits=8, programs=7,
                                                               held=4096, registers=64)
    assert gpu_plan(1 << 18, 7, 132, 4, clusters=small).path == "split"
    assert longest_cluster_row(small, 4) == 1 << 17
    assert longest_cluster_row(HOPPER_CLUSTERS, 4) == 1 << 19 and longest_cluster_row(HOPPER_CLUSTERS, 2) == 1 << 20
    assert longest_cluster_row(HOPPER_CLUSTERS, 2, exact=True) == 1 << 19  # fp32 outputs sum exactly


def test_an_sm_120_card_keeps_the_paths_without_clusters(cluster_card):
    """Triton 3.9 lowers no st.async (the blocks' exchange) for sm_120 and sm_121: their long rows stay chunked."""
    cluster_card(CARD, (12, 0), 100 * 1024)
    assert host.plan((7, 65536), 1, CUDA, 4) == gpu_plan(65536, 7, 132, 4)


def test_a_cluster_plan_depends_on_the_row_length_not_the_row_count(cluster_card):
    for n, element_size in [(65536, 4), (70001, 2), (1 << 18, 4), ((1 << 19) - 5, 2)]:
        plans = {host.plan((n_rows, n), 1, CUDA, element_size) for n_rows in (1, 3, 4096, 1 << 20)}
        settings = {(p.path, p.block, p.rows, p.num_warps, p.splits) for p in plans}
        assert len(settings) == 1 and settings.pop()[0] == "cluster", plans


@pytest.mark.parametrize("n, dtype, sums", [
    (1 << 18, torch.float32, (1024, 16, 16, 4)),  # 16 blocks of 16384 columns, each 16 tiles of 1024 in 4 warps
    (32769, torch.bfloat16, (4096, 8, 2, 8))],  # 2 blocks of 32768, the second all but one padding: 8 tiles each
    ids=str)
def test_the_precision_model_of_a_cluster_row_sums_its_blocks_spans_then_meets_them(cluster_card, n, dtype, sums):
    x = types.SimpleNamespace(shape=(4, n), device=CUDA, dtype=dtype, element_size=lambda: dtype.itemsize)
    reduction = full_softmax_record.precision(Call(x, -1, SOFTMAX, "cuda")).reduction
    assert (reduction.block, reduction.chunks, reduction.spans, reduction.num_warps) == sums


MALFORMED = {
    "an unknown key": (lambda t: t.update(tuned_by="me"), r"unknown key\(s\) \['tuned_by'\]"),
    "an unknown setting": (lambda t: t["classes"][1]["settings"].update(chunk=4096), r"classes\[1\].*unknown key"),
    "a missing setting": (lambda t: t["classes"][0]["settings"].pop("rows"), r"classes\[0\].*missing key"),
    "warps as text": (lambda t: t["classes"][0]["settings"].update(num_warps="8"), r"num_warps must be int"),
    "a bool for a number": (lambda t: t["classes"][0].update(row_bucket=True), r"row_bucket must be int"),
    "warps not a power of two": (lambda t: t["classes"][0]["settings"].update(num_warps=12), r"power of two in 1\.\.32"),
    "too many warps": (lambda t: t["classes"][2]["settings"].update(write_warps=64), r"write_warps must be a power"),
    "a span not a power of two": (lambda t: t["classes"][2]["settings"].update(span=3000), r"span must be a power"),
    "a tile too large": (lambda t: t["classes"][1]["settings"].update(rows=256), r"a tile of 65536 elements"),
    "another path": (lambda t: t["classes"][0].update(path="chunked"), r"take the 'single' path"),
    "a class twice": (lambda t: t["classes"].append(t["classes"][0]), r"classes\[3\].*appears twice"),
    "a bad candidate": (lambda t: t["classes"][0]["candidates"][0]["settings"].update(num_warps=0),
                        r"candidates\[0\], settings: num_warps"),
    "another card's table": (lambda t: t.update(card=OTHER_CARD), r"the table of 'Fake Card 40GB'"),
}


@pytest.mark.parametrize("flaw", sorted(MALFORMED))
def test_a_malformed_table_is_refused_naming_the_file_and_the_entry(fake_cards, flaw):
    edit, message = MALFORMED[flaw]
    document = json.loads(json.dumps(TUNED))
    edit(document)
    path = write(document)
    with pytest.raises(ValueError, match=message) as refused:
        host.plan((4096, 8192), 1, CUDA, 4)
    assert str(path) in str(refused.value)


def test_a_table_that_is_not_json_is_refused(fake_cards):
    path = tuned_plans.table_path(CARD)
    path.write_text('{"card": ')
    with pytest.raises(ValueError, match="not JSON"):
        tuned_plans.read_table(path, CARD)


def test_each_committed_table_reads_back_under_its_cards_name():
    for path in sorted(tuned_plans.TABLES_DIR.glob("*.json")):
        card = json.loads(path.read_text())["card"]
        assert tuned_plans.table_path(card) == path, f"{path.name} is not named after its card {card!r}"
        assert tuned_plans.read_table(path, card), f"{path.name} tunes no class"


def test_a_card_slug_is_its_name_in_lower_case_and_dashes():
    assert tuned_plans.card_slug("NVIDIA H100 80GB HBM3") == "nvidia-h100-80gb-hbm3"
    assert tuned_plans.card_slug("NVIDIA H200") == "nvidia-h200"
