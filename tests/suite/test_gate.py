"""The gate's verdict is honest however the suite is run: on a subset, without CI, against a hand-edited file,
for a kernel whose tests all crash."""

import json
import math
from pathlib import Path

import pytest

from harness.inputs.strategies import VALUE_CLASSES
from harness.plugins import seeding
from report import baseline
from tests.scenarios.gate_kernel import GATE_KERNEL, GATE_TESTS as ACCURACY

TWO_DTYPES = ("tests/kernel/test_accuracy.py", "-k", "test_output_within_derived_bound and -softmax- and (float32 or float16) and not bfloat16",
              "--device", "cpu", "--kernel", "torch")


@pytest.fixture
def made(gate_kernel_baseline) -> Path:
    """A baseline of the gate kernel (made once for the whole run; each test has its own copy)."""
    return gate_kernel_baseline[0]


@pytest.fixture
def two_dtypes(made_baseline) -> Path:
    """A baseline of torch's fp32 and fp16 softmax tests (made once; a copy each)."""
    return made_baseline("two-dtypes-baseline", *TWO_DTYPES)[0]


def test_a_gate_draws_the_baselines_inputs_whatever_the_environment(run_pytest, made):
    """Without CI (a developer's machine), or with a profile in the environment, the gate still draws the ci
    profile's pinned inputs: no regression of an unchanged kernel."""
    for env in ({"CI": "", "HYPOTHESIS_PROFILE": "dev"}, {"CI": "1", "HYPOTHESIS_PROFILE": "nightly"}):
        gated = run_pytest(*ACCURACY, "--kernel", GATE_KERNEL, "--accuracy-baseline", str(made), **env)
        assert gated.returncode == 0 and "accuracy gate: no regression" in gated.stdout, (env, gated.stdout[-3000:])
        assert "draws: profile ci, seeds pinned: 0" in gated.stdout


def test_a_gate_refuses_settings_that_draw_other_inputs(run_pytest, made):
    for extra in (("--hypothesis-profile", "dev"), ("--soak-seed", "3"), ("--hypothesis-seed", "3")):
        refused = run_pytest(*ACCURACY, "--kernel", GATE_KERNEL, "--accuracy-baseline", str(made), *extra)
        assert refused.returncode == pytest.ExitCode.USAGE_ERROR and "would draw others" in refused.stderr, extra


def test_a_gate_replaying_an_example_database_is_not_judged(run_pytest, made, tmp_path):
    replaying = run_pytest(*ACCURACY, "--kernel", GATE_KERNEL, "--accuracy-baseline", str(made),
                           SOFTMAX_SUITE_EXAMPLES=str(tmp_path / "examples"))
    assert replaying.returncode == 0, replaying.stdout[-3000:]
    assert "not judged: the suite draws other inputs than the baseline's" in replaying.stdout
    assert "no regression" not in replaying.stdout


def test_a_gated_run_whose_tests_fail_ends_on_its_verdict_failed_whatever_the_gate_says(run_pytest, made):
    """A fresh install ended "10 failed, 1237 passed" then "accuracy gate: no regression": its last line read as a
    pass.  A kernel beside the gated one fails its test (not in the baseline: not gated)."""
    result = run_pytest(*ACCURACY, "--kernel", GATE_KERNEL, "--kernel", "tests.hostile.declares_loose_precision:softmax",
                        "--accuracy-baseline", str(made))
    last = result.stdout.splitlines()[-1]
    assert result.returncode == pytest.ExitCode.TESTS_FAILED, result.stdout[-3000:]
    assert last.startswith("verdict: FAILED: ") and " 1 failed" in last and "accuracy gate: no regression" in last, last


def test_a_kernel_whose_tests_all_crash_fails_the_gate(run_pytest, made, tmp_path):
    crashed = run_pytest(*ACCURACY, "--kernel", GATE_KERNEL, "--accuracy-baseline", str(made), "--accuracy-report",
                         str(tmp_path / "report"), SOFTMAX_SUITE_PLANT_LOSS="raise")
    assert crashed.returncode == pytest.ExitCode.TESTS_FAILED
    table = crashed.stdout.split("accuracy regressions against the baseline")[1]
    assert f"{GATE_KERNEL}  softmax/float32/normal" in table and "disappeared" in table, table
    assert "no regression" not in crashed.stdout
    verdict = (tmp_path / "report" / "summary.md").read_text().splitlines()[2]
    assert verdict.startswith("**FAILED") and "regression(s) against" in verdict, verdict


def test_a_baseline_keeps_each_kernels_declaration_as_it_decides_its_draws(made):
    """The gate kernel's digest, as the run that made the baseline computed it from its declarations (which came from
    its kernel's own process)."""
    from tests.scenarios import gate_kernel

    digest = json.loads(made.read_text())["kernel_draws"][GATE_KERNEL]
    assert digest == seeding.kernel_fingerprint(gate_kernel.softmax.capabilities, "cpu")


def test_a_kernel_whose_declaration_draws_other_inputs_is_not_judged_and_says_why(made):
    """New code-path boundaries draw rows beside them, and Hypothesis's later draws move with them: full_softmax's
    bf16 log_softmax met a [2, 2] row none had drawn (9274 ulp, torch's too) and the H100 gate called it a
    regression.  A kernel whose declaration changed is told to remake, not judged; another is judged as before."""
    reference = json.loads(made.read_text())
    worse = {GATE_KERNEL: {"softmax/float32/normal": {"kernel": {"max_ulp": 1e9, "mean_ulp": 1e9}, "records": 1}}}
    run = {"draws": reference["draws"], "kernel_draws": reference["kernel_draws"]}
    findings, unjudged = baseline.judge(reference, worse, {}, set(), run)
    assert any(f.fails for f in findings) and not unjudged  # the same declaration: judged, and the loss caught
    moved = {**run, "kernel_draws": {GATE_KERNEL: "another"}}
    findings, unjudged = baseline.judge(reference, worse, {}, set(), moved)
    assert not any(f.fails for f in findings), findings
    assert "its declaration (capabilities: limits, code-path boundaries) draws other inputs" in unjudged[GATE_KERNEL]


def test_the_fingerprint_of_a_declaration_follows_what_decides_the_draws_on_the_backend_alone():
    from specs.registry import Capabilities

    plain = Capabilities(path_boundaries={"cpu": (1024,), "cuda": (16384,)})
    cpu, cuda = seeding.kernel_fingerprint(plain, "cpu"), seeding.kernel_fingerprint(plain, "cuda")
    more = Capabilities(path_boundaries={"cpu": (1024,), "cuda": (16384, 262144)})
    assert seeding.kernel_fingerprint(more, "cuda") != cuda and seeding.kernel_fingerprint(more, "cpu") == cpu
    assert seeding.kernel_fingerprint(Capabilities(path_boundaries=plain.path_boundaries, promises={"batch"}),
                                      "cuda") == cuda  # a promise draws nothing
    shorter = Capabilities(path_boundaries=plain.path_boundaries, max_row_length={"cuda": 4096})
    assert seeding.kernel_fingerprint(shorter, "cuda") != cuda


FP32_CATEGORIES = len(VALUE_CLASSES)  # torch's fp32 softmax, one category per value class

def test_a_subset_is_gated_on_what_it_ran_and_says_what_it_did_not(run_pytest, two_dtypes):
    path = two_dtypes
    subset = run_pytest(*TWO_DTYPES[:2], TWO_DTYPES[2].replace("(float32 or float16)", "float16"),
                        *TWO_DTYPES[3:], "--accuracy-baseline", str(path))
    assert subset.returncode == 0, subset.stdout[-3000:]
    assert "accuracy gate: no regression" in subset.stdout
    assert f"accuracy gate: torch: {FP32_CATEGORIES} baseline categorie(s) not run in this run" in subset.stdout, \
        subset.stdout[-2000:]


def test_updating_a_baseline_from_a_subset_keeps_what_the_subset_did_not_measure(run_pytest, two_dtypes):
    path = two_dtypes
    full = set(json.loads(path.read_text())["kernels"]["torch"])
    fp16 = (*TWO_DTYPES[:2], TWO_DTYPES[2].replace("(float32 or float16)", "float16"), *TWO_DTYPES[3:])
    merged = run_pytest(*fp16, "--accuracy-baseline", str(path), "--update-baseline")
    assert merged.returncode == 0 and f"kept {FP32_CATEGORIES} categorie(s)" in merged.stdout, merged.stdout[-2000:]
    assert set(json.loads(path.read_text())["kernels"]["torch"]) == full
    pruned = run_pytest(*fp16, "--accuracy-baseline", str(path), "--update-baseline", "--prune-baseline")
    assert pruned.returncode == 0 and f"pruned {FP32_CATEGORIES}" in pruned.stdout, pruned.stdout[-2000:]
    assert {key.split("/")[1] for key in json.loads(path.read_text())["kernels"]["torch"]} == {"float16"}


def edits(document: dict) -> dict:
    """Hand edits that would make a baseline gate nothing, or pass whatever the kernel does."""
    kernel, groups = next(iter(document["kernels"].items()))
    category = next(iter(groups))

    def metric(value):
        edited = json.loads(json.dumps(document))
        edited["kernels"][kernel][category]["max_ulp"] = value
        return edited

    return {"NaN metric": (metric(math.nan), "finite numbers"), "infinite metric": (metric(math.inf), "finite numbers"),
            "empty kernel": ({**document, "kernels": {kernel: {}}, "invariances": {}}, "gates nothing"),
            "no draws": ({k: v for k, v in document.items() if k != "draws"}, "no draws fingerprint"),
            "no kernels": ({**document, "kernels": {}, "invariances": {}}, "gates nothing"),
            "no sources": (json.loads(json.dumps(document).replace('"tests": [', '"unsourced": [')),
                           "the tests that measured it")}


def test_a_hand_edited_baseline_that_would_gate_nothing_is_refused_before_any_test(run_pytest, made, tmp_path):
    document = json.loads(made.read_text())
    for name, (edited, message) in edits(document).items():
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(edited))  # json writes NaN and Infinity, as a hand edit may
        with pytest.raises(baseline.BaselineError, match=message):
            baseline.load(path, "cpu")
    refused = run_pytest(*ACCURACY, "--kernel", GATE_KERNEL, "--accuracy-baseline", str(tmp_path / "NaN metric.json"))
    assert refused.returncode == pytest.ExitCode.USAGE_ERROR and "finite numbers" in refused.stderr
    assert "passed" not in refused.stdout


def test_a_baseline_that_is_not_utf8_is_a_usage_error(run_pytest, tmp_path):
    path = tmp_path / "baseline.json"
    path.write_bytes(b'{"schema_version": 2, "backend": "cpu\xff"}')
    refused = run_pytest("tests/suite/test_ulp.py", "--accuracy-baseline", str(path))
    assert refused.returncode == pytest.ExitCode.USAGE_ERROR and "not readable JSON" in refused.stderr


def test_a_first_run_on_a_device_without_a_baseline_records_it_says_so_and_the_next_gates(tmp_path):
    """`--accuracy-baseline auto` where baselines/<device>.json does not exist (an NPU team's first run): the run
    records it, judging nothing and saying so in its last line; the second run gates against it.  An explicit path
    that does not exist stays an error (a typo)."""
    from tests import subruns
    from tests.conftest import copy_of_checkout

    checkout = tmp_path / "checkout"
    copy_of_checkout(checkout)
    (checkout / "baselines" / "cpu.json").unlink()
    command = subruns.python("pytest", *ACCURACY, "--kernel", GATE_KERNEL, "--accuracy-baseline", "auto")
    first = subruns.run(command, cwd=checkout)
    assert first.returncode == 0, first.stdout[-3000:]
    assert (checkout / "baselines" / "cpu.json").is_file()
    last = first.stdout.splitlines()[-1]
    assert last.startswith("verdict: PASSED: ") and "accuracy gate: no baseline for cpu yet: this run recorded" in last
    assert "judging nothing against it" in last and "no regression" not in first.stdout, first.stdout[-2000:]
    second = subruns.run(command, cwd=checkout)
    assert second.returncode == 0 and "accuracy gate: no regression against" in second.stdout.splitlines()[-1], \
        second.stdout[-2000:]
