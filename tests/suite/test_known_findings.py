"""Known findings: a failure an entry of specs/known_findings.py explains is known, any other is new, and a known
finding whose test passes fails as fixed, in a run's verdict, a soak's and a nightly's."""

import importlib.metadata
import json
import re
import subprocess

import pytest
import torch

from harness.plugins import known
from report.known import counted, label
from specs import known_findings
from specs.known_findings import KNOWN_FINDINGS, KnownFinding
from tests import subruns

SCENARIO = "tests/scenarios/known_findings.py"
ROOT = subruns.ROOT


def entry(signature: str) -> KnownFinding:
    return KnownFinding("k", "t", (), (), signature, f"docs/findings/k.md {signature}: a bug", ("torch", ""), (), False)


def test_a_failure_is_known_only_when_an_entry_explains_every_failure_of_the_test():
    nan, gap = entry("nan"), entry("gap")
    assert known.matched([nan, gap], AssertionError("got 1.0, expected exactly nan")) == [nan]
    assert known.matched([nan, gap], ExceptionGroup("two", [AssertionError("nan"), ValueError("a gap")])) == [nan, gap]
    assert known.matched([nan], ExceptionGroup("two", [AssertionError("nan"), AssertionError("a new bug")])) == []
    assert known.matched([nan], ValueError("nothing known")) == []


def test_an_entry_applies_only_where_its_library_version_is_installed():
    assert known.installed("torch", "") and not known.installed("torch", "0.1.")
    assert not known.installed("a-library-nobody-installed", "")


@pytest.mark.parametrize("finding", KNOWN_FINDINGS, ids=lambda f: f"{f.kernel}-{label(f.finding)}")
def test_every_known_finding_names_a_section_of_its_document_and_a_valid_signature(finding):
    re.compile(finding.signature)
    document, section = finding.finding.split(":", 1)[0].split(" ")
    assert re.search(rf"^## {section}\. ", (ROOT / document).read_text(), re.M), f"{document} has no section {section}"


def test_the_count_names_each_kernels_findings():
    knowns = [{"kernel": "flag_gems", "findings": ["flag-gems.md 1"]}] * 3 + [
        {"kernel": "flag_gems", "findings": ["flag-gems.md 3"]}]
    assert counted(0, knowns) == "0 new, 4 known (flag_gems: flag-gems.md 1 x3, flag-gems.md 3)"
    # Two failures, one of them the fixed finding's: one new.
    assert counted(2, [], [{"kernel": "k", "findings": ["k.md 2"]}]) == "1 new, 0 known, 1 fixed (k: k.md 2)"


def test_a_run_whose_only_failure_is_known_passes_and_counts_it(run_pytest):
    result = run_pytest("--kernel", "torch", SCENARIO, "-k", "known_bug and float32")
    assert result.returncode == 0, result.stdout[-3000:]
    assert re.search(r"\b1 xfailed\b", result.stdout) and "failures: 0 new, 1 known (torch: planted.md 1)" in \
        result.stdout, result.stdout[-3000:]


def test_a_failure_no_entry_explains_is_new_beside_the_known_one(run_pytest):
    result = run_pytest("--kernel", "torch", SCENARIO, "-k", "known_bug or another_version")
    assert result.returncode == 1, result.stdout[-3000:]
    assert re.search(r"\b2 failed\b.*\b1 xfailed\b", result.stdout), result.stdout[-3000:]
    assert "failures: 2 new, 1 known (torch: planted.md 1)" in result.stdout
    assert re.search(r"FAILED .*test_known_bug\[torch-float16\]", result.stdout)
    assert re.search(r"FAILED .*test_bug_of_another_version\[torch\]", result.stdout)


def test_a_known_finding_every_run_shows_fails_as_fixed_when_its_test_passes(run_pytest):
    result = run_pytest("--kernel", "torch", SCENARIO, "-k", "fixed_bug")
    assert result.returncode == 1, result.stdout[-3000:]
    assert "FIXED: docs/findings/planted.md 2: an overflow" in result.stdout
    assert "failures: 0 new, 0 known, 1 fixed (torch: planted.md 2)" in result.stdout, result.stdout[-3000:]


def soak(tmp_path, minutes: str, *selection: str, **env) -> subprocess.CompletedProcess:
    return subruns.run(subruns.python("harness.soak", "--minutes", minutes, "--out", str(tmp_path), "--", "-p",
                                      "no:xdist", "--device", "cpu", "--kernel", "torch", SCENARIO, *selection), **env)


def test_a_soak_whose_only_failure_is_known_passes_and_names_it(tmp_path):
    result = soak(tmp_path, "0.02", "-k", "slow_first or known_bug and float32")
    assert result.returncode == 0, result.stdout + result.stderr
    text = (tmp_path / "soak.md").read_text()
    assert "**PASSED** 1 round(s), failures: 0 new, 1 known (torch: planted.md 1)" in text, text
    assert json.loads((tmp_path / "soak.json").read_text())["rounds"][0]["known"] == 1


def test_a_soak_that_left_tests_unrun_in_every_round_is_incomplete(tmp_path):
    result = soak(tmp_path, "0.02", "-k", "slow_first or known_bug and float32", SOFTMAX_SUITE_PLANT_LOSS="slow")
    assert result.returncode == 3, result.stdout + result.stderr
    text = (tmp_path / "soak.md").read_text()
    assert "**INCOMPLETE** 1 test(s) not run in any of 1 round(s)" in text, text
    assert re.search(r"round 1: NOT RUN \(the time box ended before they started\): .*test_known_bug", text)
    report = json.loads((tmp_path / "round-1" / "accuracy.json").read_text())
    assert report["verdict"].startswith("INCOMPLETE: 1 test(s) passed, 0 failed, 1 not run"), report["verdict"]


def test_an_entry_applies_to_the_tests_of_its_kernel_operation_dtype_and_special_case_only(monkeypatch):
    from types import SimpleNamespace as Item

    from specs import known_findings

    nan_rule = KnownFinding("k", "t", ("log_softmax",), ("float32",), "nan", "docs/findings/k.md 1: a bug",
                            ("torch", ""), ("nan",), True)
    monkeypatch.setattr(known_findings, "KNOWN_FINDINGS", (nan_rule,))

    def test(name="t", kernel="k", **params):
        params = {"kernel": Item(name=kernel), "op": "log_softmax", "dtype": torch.float32, "rule": Item(name="nan"),
                  **params}
        return Item(originalname=name, name=name, callspec=Item(params=params))

    assert known.entries_for(test()) == [nan_rule]
    for other in (test(rule=Item(name="+inf")), test(op="softmax"), test(dtype=torch.float16), test(kernel="other"),
                  test(name="u")):
        assert known.entries_for(other) == [], other


def test_a_known_failure_does_not_end_the_search_for_a_new_one_in_the_same_test(run_pytest):
    known_only = run_pytest("--kernel", "torch", SCENARIO, "-k", "known_and_new", "--hypothesis-profile", "ci")
    assert known_only.returncode == 0 and re.search(r"\b1 xfailed\b", known_only.stdout), known_only.stdout[-3000:]
    assert "failures: 0 new, 1 known (torch: planted.md 4)" in known_only.stdout
    with_new = run_pytest("--kernel", "torch", SCENARIO, "-k", "known_and_new", "--hypothesis-profile", "ci",
                          SOFTMAX_SUITE_PLANT_LOSS="new")
    assert with_new.returncode == 1 and re.search(r"\b1 failed\b", with_new.stdout), with_new.stdout[-3000:]
    assert re.search(r"AssertionError: new bug at \d+", with_new.stdout), with_new.stdout[-3000:]


def test_a_known_failure_is_not_counted_by_maxfail_per_kernel(run_pytest):
    result = run_pytest("--kernel", "torch", SCENARIO, "-k", "known_bug", "--maxfail-per-kernel", "1")
    assert re.search(r"\b1 failed\b.*\b1 xfailed\b", result.stdout), result.stdout[-3000:]


def test_a_test_a_round_reached_and_skipped_was_run_though_another_round_did_not_reach_it():
    from harness.soak import never_run

    rounds = [{"tests_reached": ["t::a", "t::skips_itself"], "tests_not_run": []},
              {"tests_reached": ["t::a"], "tests_not_run": ["t::skips_itself", "t::late"]}]
    assert never_run(rounds) == ["t::late"]


def test_a_run_whose_only_failures_are_known_tested_something():
    from report.artifacts import verdict

    said = verdict(0, [], [], None, known=[{"test": "t", "kernel": "k", "findings": ["k.md 1"]}])
    assert said.startswith("PASSED: 0 test(s) passed, 0 failed (0 new, 1 known (k: k.md 1))"), said


def test_a_version_that_does_not_end_in_a_dot_is_one_version_only():
    installed = importlib.metadata.version("torch")
    release = installed.split("+")[0]
    assert known.installed("torch", installed) and known.installed("torch", release)
    assert known.installed("torch", release.rsplit(".", 1)[0] + ".")
    assert not known.installed("torch", release[:-1]) or release[:-1].endswith(".")


BOUND = "({}, unknown kernel (loosest known), sequential sum)"
FIGURES = "kernel: max 6 ULP, mean 0.279 over {} result(s){}; torch on the same input: max 2 ULP, mean 0.261"


def beyond(kernel: str, bad: int, special: int, worst: str, non_finite: int = 0, fmt: str = "float32") -> str:
    """A BeyondBound failure as the judge words it (harness/judging/judge.py's explain)."""
    specials = f"; {special} of them special: results that are exact whatever the rounding" if special else ""
    nan = f", and {non_finite} NaN or inf where the oracle's result is finite (or the reverse)" if non_finite else ""
    return (f"BeyondBound: {kernel}: {bad} of 8192 elements beyond the derived bound {BOUND.format(fmt)}{specials}\n"
            f"worst element: row 1, column 61: {worst}\nthat row's input (first 8 of 1024): [0.5, 0.1]\n"
            f"{FIGURES.format(8192 - special, nan)}\ninput: Case(shape=(8, 1024), dim=1, ...)")


EMPTY_HALF = next(f.signature for f in KNOWN_FINDINGS if f.finding.startswith("docs/findings/flag-gems.md 3"))
# A failure as the H100 nightly of 2026-12-06 printed it (FlagGems 5.0.2's softmax over dim 0, a row holding a NaN).
DIM_0_NAN_ON_THE_H100 = (
    "BeyondBound: flag_gems: 410525 of 580500 elements beyond the derived bound (bfloat16, unknown kernel (loosest "
    "known), sequential sum); 410525 of them special: results that are exact whatever the rounding\nworst element: row "
    "1, column 0: got 0.0078125, expected exactly nan: the row holds a NaN\nthat row's input (first 8 of 129): "
    "[-0.00037384033203125, -0.000789642333984375]\nkernel: max 0 ULP, mean 0.000 over 158412 result(s); torch on the "
    "same input: max 1 ULP, mean 0.000 over 158412 result(s) (of the 158412 elements judged by a bound)")


@pytest.mark.parametrize("signature,said,known_by_it", [
    (known_findings.NUMBERS_WHERE_NAN, DIM_0_NAN_ON_THE_H100, True),
    (known_findings.NUMBERS_WHERE_NAN,
     beyond("flag_gems", 165, 165, "got 0.0308, expected exactly nan: the row holds a NaN"), True),
    (known_findings.NUMBERS_WHERE_NAN, beyond("flag_gems", 900, 2, "got 0.5, expected exactly nan: ..."), False),
    (known_findings.NUMBERS_WHERE_NAN, beyond("flag_gems", 4, 4, "got 0.0, expected exactly 1.0: ..."), False),
    (known_findings.NAN_WHERE_NUMBERS, beyond("inductor", 32, 0, "got nan, correctly rounded 0.0625", 32), True),
    (known_findings.NAN_WHERE_NUMBERS, beyond("inductor", 40, 0, "got nan, correctly rounded 0.0625", 32), False),
    (known_findings.ROUNDING_ONLY, beyond("liger", 39, 0, "got -0.00183, correctly rounded -0.00182, 1.4 ULP", 0,
                                          "float16"), True),
    (known_findings.ROUNDING_ONLY, beyond("liger", 39, 2, "got 0.5, expected exactly 0.0", 0, "float16"), False),
    (known_findings.ROUNDING_ONLY, beyond("liger", 39, 0, "got nan, correctly rounded 0.1, inf ULP", 3), False),
    (EMPTY_HALF, "ContractBroken: flag_gems: the kernel returned a result of shape (1, 0) and dtype "
     "torch.bfloat16 for softmax_fp32_out, whose result has x's shape (1, 0) and dtype torch.float32; replay: .",
     True),
    (EMPTY_HALF, "ContractBroken: flag_gems: the kernel returned a result of shape (0,) and dtype "
     "torch.float16 for softmax_fp32_out, whose result has x's shape (128, 1024) and dtype torch.float32", False),
], ids=lambda value: value if isinstance(value, bool) else "")
def test_a_signature_explains_its_findings_failure_and_not_a_failure_with_other_wrong_results(signature, said,
                                                                                             known_by_it):
    assert bool(re.search(signature, said)) == known_by_it, said
