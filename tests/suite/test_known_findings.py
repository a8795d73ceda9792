"""Known findings: a failure an entry of specs/known_findings.py explains is known, any other is new, and a known
finding whose test passes fails as fixed, in a run's verdict, a soak's and a nightly's."""

import json
import re
import subprocess
import sys

import pytest
import torch

from harness import known
from report.known import counted, label
from specs.known_findings import KNOWN_FINDINGS, KnownFinding

SCENARIO = "tests/scenarios/known_findings.py"
ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]


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
    assert counted(1, [], [{"kernel": "k", "findings": ["k.md 2"]}]) == "1 new, 0 known, 1 fixed (k: k.md 2)"


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
    clean = {k: v for k, v in __import__("os").environ.items() if not k.startswith(("PYTEST_XDIST", "TRITON"))}
    return subprocess.run([sys.executable, "-m", "harness.soak", "--minutes", minutes, "--out", str(tmp_path), "--",
                           "-p", "no:xdist", "--device", "cpu", "--kernel", "torch", SCENARIO, *selection],
                          cwd=ROOT, env={**clean, **env}, capture_output=True, text=True, timeout=300)


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
