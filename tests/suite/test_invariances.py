"""Invariances are promises: measured on every kernel, failing only where promised, remembered by the gate."""

import json
import types

import pytest
import torch

from harness.inputs.strategies import Case, Values
from harness.internals import payload
from harness.judging.invariance import INVARIANCE, Invariance, exact_shift
from report import baseline, invariances
from specs.registry import Capabilities, resolve
from specs.torch_softmax import TORCH_CONTRACT
from tests import outcomes

BATCH_DEPENDENT = "tests.scenarios.batch_dependent:softmax"
BATCH_GATE = ("tests/kernel/test_metamorphic.py", "-k", "batch_invariance and not 64", "--device", "cpu")  # profile ci
BATCH_TESTS = (*BATCH_GATE, "--hypothesis-profile", "mutation")  # the invariance machinery is the same on every device


@pytest.fixture
def item():
    """A stand-in test item: what it records stays out of this run's own table."""
    return types.SimpleNamespace(stash=pytest.Stash())


def entries(item) -> list[dict]:
    return item.stash.get(payload.PAYLOAD, {}).get(INVARIANCE, [])


def test_a_promise_broken_fails_and_is_recorded(item):
    with pytest.raises(AssertionError, match="k promises batch invariance: alone vs inside: 1 of 2 elements differ"):
        with Invariance(item, "k", "batch", promised=True) as batch:
            batch.check(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.5]), "alone vs inside")
    assert entries(item) == [{"kernel": "k", "property": "batch", "promised": True, "held": False,
                                      "counterexample": "alone vs inside: 1 of 2 elements differ, first at (1,): "
                                                        "2.0 vs 2.5", "test": ""}]


def test_an_invariance_not_promised_is_only_recorded(item):
    with Invariance(item, "k", "shift", promised=False) as shift:
        shift.check(torch.tensor([0.0]), torch.tensor([-0.0]), "first")  # bitwise: the signs of zero differ
        shift.check(torch.tensor([1.0]), torch.tensor([2.0]), "second")
    with Invariance(item, "k", "ties", promised=False) as ties:
        ties.check(torch.tensor([1.0]), torch.tensor([1.0]), "equal")
    recorded = entries(item)
    assert [(e["property"], e["held"]) for e in recorded] == [("shift", False), ("ties", True)]
    assert recorded[0]["counterexample"].startswith("first:")


def test_nans_are_one_and_a_promise_is_never_settled(item):
    negative_nan = torch.tensor([1.0, -torch.nan])  # x + c may change an input NaN's sign and payload
    with Invariance(item, "k", "shift", promised=True) as shift:
        shift.check(negative_nan, torch.tensor([1.0, torch.nan]), "nan")
        assert not shift.settled
    assert entries(item)[-1]["held"]
    with Invariance(item, "k", "batch", promised=False) as batch:
        batch.check(torch.tensor([1.0]), torch.tensor([2.0]), "first")
        assert batch.settled  # measured no further: a broken invariance that was not promised
    with pytest.raises(AssertionError), Invariance(item, "k", "ties", promised=True) as ties:
        ties.check(torch.tensor([1.0]), torch.tensor([2.0]), "first")
    assert not ties.settled  # Hypothesis must see the failure again when it replays the example


def test_nothing_is_recorded_when_the_test_errs_for_another_reason(item):
    with pytest.raises(ZeroDivisionError):
        with Invariance(item, "k", "determinism", promised=True):
            1 / 0
    assert entries(item) == []


def test_the_table_combines_tests_and_says_what_was_promised():
    table = invariances.combine([
        {"kernel": "k", "property": "batch", "promised": False, "held": True, "counterexample": None},
        {"kernel": "k", "property": "batch", "promised": False, "held": False, "counterexample": "row 0"},
        {"kernel": "k", "property": "shift", "promised": True, "held": True, "counterexample": None},
        {"kernel": "t", "property": "ties", "promised": True, "held": False, "counterexample": "equal logits"},
    ])
    assert invariances.rows(table) == [("kernel", "batch", "shift", "ties"),
                                       ("k", "broken, not promised", "held", "not measured"),
                                       ("t", "not measured", "not measured", "BROKEN (promised)")]
    assert invariances.held(table) == {"k": {"batch": False, "shift": True}, "t": {"ties": False}}
    assert invariances.counterexamples(table) == ["k / batch: row 0", "t / ties: equal logits"]


def test_the_gate_fails_only_an_invariance_lost():
    findings = baseline.compare_invariances({"k": {"batch": True, "shift": False}, "gone": {"ties": True}},
                                            {"k": {"batch": False, "shift": True, "ties": False}})
    assert [(f.kernel, f.category, f.verdict, f.fails) for f in findings] == [
        ("k", "invariance: batch", "lost", True), ("k", "invariance: shift", "gained", False)]


def test_a_baseline_with_malformed_invariances_is_refused(tmp_path):
    path = tmp_path / "b.json"
    good = baseline.build({}, backend="cpu", profile="ci", run={"draws": "d"}, invariances={"k": {"batch": True}},
                          invariance_tests={"k": {"batch": ["t::batch"]}})
    baseline.write(path, good)
    assert baseline.load(path, "cpu")["invariances"] == {"k": {"batch": True}}
    path.write_text(json.dumps({**good, "invariances": {"k": {"batch": "yes"}}}))
    with pytest.raises(baseline.BaselineError, match="invariances must map"):
        baseline.load(path, "cpu")


def test_promises_are_declared_per_device_and_checked():
    assert "batch" in TORCH_CONTRACT.promised("cpu") and "batch" not in TORCH_CONTRACT.promised("cuda")
    assert TORCH_CONTRACT.promised("npu") == frozenset()  # nothing measured there
    assert resolve(BATCH_DEPENDENT).capabilities.promised("cpu") == frozenset()
    assert resolve("tests.scenarios.batch_dependent:promising_softmax").capabilities.promised("cuda") == {"batch"}
    with pytest.raises(ValueError, match="unknown invariance.*'batchy'"):
        Capabilities(promises=frozenset({"batchy"}))


def test_a_correct_kernel_breaking_an_invariance_it_does_not_promise_passes(run_pytest):
    result = run_pytest(*BATCH_TESTS, "--kernel", BATCH_DEPENDENT, "--kernel", "tests.scenarios.batch_dependent:"
                        "promising_softmax")
    lines = result.stdout.splitlines()
    row = next(line for line in lines if line.startswith(BATCH_DEPENDENT + " "))
    promising = next(line for line in lines if line.startswith("tests.scenarios.batch_dependent:promising_softmax "))
    assert "broken, not promised" in row and "BROKEN (promised)" in promising, result.stdout[-3000:]
    assert "passed" in result.stdout and "[tests.scenarios.batch_dependent:softmax-" not in \
        "\n".join(line for line in lines if line.startswith("FAILED")), result.stdout[-3000:]
    assert result.returncode == pytest.ExitCode.TESTS_FAILED  # the promising kernel fails, in its backward too
    assert ("FAILED tests/kernel/test_metamorphic.py::test_batch_invariance_of_every_other_operation_is_bitwise["
            "tests.scenarios.batch_dependent:promising_softmax-softmax_backward]") in result.stdout, result.stdout[-3000:]


def test_a_promise_of_shift_invariance_covers_the_kernels_log_softmax(run_pytest, tmp_path):
    """Its softmax keeps the promise and passes; its log_softmax, rounding max + log(sum) before subtracting it,
    breaks it and fails."""
    kernel = "tests.scenarios.shift_dependent_log:softmax"
    run_pytest("tests/kernel/test_metamorphic.py", "-k", "shift_invariance", "--device", "cpu", "--kernel", kernel,
               "--hypothesis-profile", "ci", "--outcomes", str(tmp_path / "outcomes.jsonl"))
    said = {case.name: case for case in outcomes.read(tmp_path / "outcomes.jsonl")}
    assert said[f"test_shift_invariance_is_bitwise[{kernel}]"].kind == "passed", said
    broken = said[f"test_shift_invariance_of_every_other_unscaled_forward_is_bitwise[{kernel}-log_softmax]"]
    assert broken.kind == "failure" and f"{kernel} promises shift invariance: log_softmax(x + " in broken.message, said


def test_the_gate_fails_a_kernel_that_loses_an_invariance_it_had(run_pytest, tmp_path):
    made = tmp_path / "baseline.json"
    result = run_pytest(*BATCH_GATE, "--kernel", BATCH_DEPENDENT, "--accuracy-baseline", str(made),
                        "--update-baseline", SOFTMAX_SUITE_PLANT_LOSS="1")
    document = json.loads(made.read_text())
    assert result.returncode == 0 and document["invariances"] == {BATCH_DEPENDENT: {"batch": True}}, result.stdout[-2000:]
    assert document["kernels"] == {BATCH_DEPENDENT: {}}  # gated for its invariances alone
    gated = run_pytest(*BATCH_GATE, "--kernel", BATCH_DEPENDENT, "--accuracy-baseline", str(made))
    assert gated.returncode == pytest.ExitCode.TESTS_FAILED, gated.stdout[-3000:]
    assert "invariance: batch" in gated.stdout and "lost" in gated.stdout


def test_a_shift_is_exact_for_every_entry_or_not_taken():
    """bf16 logits near 1 beside -1e30: a shift of ulp(1e30) = 4.95e27 rounds the small ones away, and float64
    rounds their sum the same way, so a check in float64 alone took it (torch, full_softmax, fused_softmax and
    rowwise all "broke" shift invariance in the nightly H100 soak)."""
    x, _ = Case((2, 3), 0, torch.bfloat16, Values("sentinel", -1e30), seed=0).make()
    c = exact_shift(x)
    finite = x[torch.isfinite(x)].double()
    assert c is None or torch.equal((x.double() + c).to(x.dtype).double()[torch.isfinite(x)] - c, finite)
    assert exact_shift(torch.tensor([0.5, -1e30], dtype=torch.bfloat16)) is None
