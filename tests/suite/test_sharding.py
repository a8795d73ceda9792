"""One gate over several hosts: ``--shard K/N`` splits the tests, ``python -m report merge`` makes one report and one
verdict of the shards' reports, and refuses folders that are not the shards of one run."""

import json
import random
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from harness import nightly
from harness.plugins.sharding import split
from report import artifacts, baseline, invariances, merge
from report.__main__ import main as report_cli
from report.summary import categorize
from tests import subruns
from tests.scenarios.gate_kernel import GATE_KERNEL
from tests.suite.test_nightly import fixed_record

ROOT = Path(__file__).resolve().parents[2]
# Two kernels' fp32 accuracy tests (their categories and the gate's), their shift invariance (the invariance table)
# and a few quick tests: what a gate runs, in small.
SUITE = ("tests/kernel/test_accuracy.py", "tests/kernel/test_metamorphic.py", "tests/suite/test_formats.py",
         "-k", "(test_output_within and -softmax- and float32) or test_shift_invariance or rounding",
         "--kernel", "torch", "--kernel", GATE_KERNEL, "--device", "cpu")


# The split ------------------------------------------------------------------------------------------------------

def synthetic_durations(tests: int, seed: int) -> dict[str, float]:
    """Durations spread as the suite's are: most tests short, a few a thousand times longer, some unknown (0)."""
    draw = random.Random(seed)
    return {f"t.py::test_{i}": draw.choice([0.0, draw.uniform(0, 0.1), draw.uniform(0, 5), draw.uniform(10, 90)])
            for i in range(tests)}


@pytest.mark.parametrize("count", [1, 2, 3, 8])
@pytest.mark.parametrize("seed", range(5))
def test_every_test_lands_in_exactly_one_shard_and_the_largest_exceeds_the_smallest_by_at_most_one_test(count, seed):
    seconds = synthetic_durations(200, seed)
    shards = split(seconds, count)
    assert len(shards) == count
    assert sorted(test for shard in shards for test in shard) == sorted(seconds)
    totals = [sum(seconds[test] for test in shard) for shard in shards]
    largest = shards[totals.index(max(totals))]
    # The bound split's docstring states: the shortest test of the largest shard, so at most the longest test.
    assert max(totals) - min(totals) <= min(seconds[test] for test in largest) + 1e-9
    assert max(totals) - min(totals) <= max(seconds.values())


def test_the_split_depends_only_on_the_tests_and_their_durations_not_their_order():
    seconds = synthetic_durations(100, 7)
    shuffled = list(seconds.items())
    random.Random(1).shuffle(shuffled)
    assert split(dict(shuffled), 4) == split(seconds, 4)


def test_tests_of_unknown_duration_are_dealt_round_the_shards():
    shards = split({f"t.py::test_{i}": 0.0 for i in range(10)}, 3)
    assert sorted(len(shard) for shard in shards) == [3, 3, 4]


def test_a_shard_is_written_k_of_n_with_k_from_1_to_n():
    assert merge.Shard.parse("2/3") == merge.Shard(2, 3) and merge.Shard.parse("1/1").label == "1/1"
    for wrong in ("0/3", "4/3", "3", "a/b", "1/0", "1/2/3", ""):
        with pytest.raises(ValueError, match="K/N"):
            merge.Shard.parse(wrong)


# Merging small reports ------------------------------------------------------------------------------------------

RUN = {"backend": "cpu", "device": "x86_64", "cpu_capability": "AVX2", "profile": "ci", "seed": "pinned",
       "example_database": None, "draws": "d1", "git_commit": "c1", "started": "2026-11-26T00:00:00+00:00",
       "versions": {"python": "3.11.7", "torch": "2.13.0"}, "interrupted": False}


def shard_report(folder: Path, label: str, tests: list[str], collected: int, **run) -> Path:
    """A shard's accuracy.json in ``folder``: ``tests`` passed, of a collection of ``collected`` tests."""
    folder.mkdir(parents=True, exist_ok=True)
    document = {"schema_version": artifacts.SCHEMA_VERSION, "verdict": "PASSED", "failures": [], "records": [],
                "categories": {}, "invariances": {}, "missing_records": [], "tests": dict.fromkeys(tests, "passed"),
                "run": {**RUN, "shard": label, "shard_tests": sorted(tests),
                        "shard_collection": {"tests": collected, "sha256": f"collection-of-{collected}"}, **run}}
    (folder / "accuracy.json").write_text(json.dumps(document))
    return folder


def three_shards(tmp_path: Path, **second) -> list[Path]:
    """Shards 1/3 to 3/3 of six tests, ``second`` replacing run metadata of shard 2/3."""
    return [shard_report(tmp_path / "s1", "1/3", ["t::a", "t::b"], 6),
            shard_report(tmp_path / "s2", "2/3", ["t::c", "t::d"], 6, **second),
            shard_report(tmp_path / "s3", "3/3", ["t::e", "t::f"], 6)]


def merged(tmp_path: Path, folders, capsys, *options) -> tuple[int, str]:
    status = report_cli(["merge", str(tmp_path / "merged"), *map(str, folders), *options])
    return status, capsys.readouterr().out


def test_shards_of_one_run_merge_into_one_report(tmp_path, capsys):
    status, out = merged(tmp_path, three_shards(tmp_path), capsys)
    assert status == 0 and "merged 3 shard(s) of 3: PASSED: 6 test(s) passed, 0 failed" in out, out
    report = json.loads((tmp_path / "merged" / "accuracy.json").read_text())
    assert len(report["tests"]) == 6 and [s["shard"] for s in report["run"]["shards"]] == ["1/3", "2/3", "3/3"]
    assert "shard" not in report["run"] and report["verdict"].startswith("PASSED")


@pytest.mark.parametrize("key,value,message", [
    ("draws", "d2", "shards of different draws fingerprints: d1 (shard 1/3, 3/3); d2 (shard 2/3)"),
    ("profile", "nightly", "shards of different Hypothesis profiles"),
    ("backend", "cuda", "shards of different backends"),
    ("git_commit", "c2", "shards of different suite versions (git commit): c1 (shard 1/3, 3/3); c2 (shard 2/3)"),
    ("versions", {"python": "3.11.7", "torch": "2.11.0"}, "shards of different library versions: torch 2.13.0 "
                                                          "(shard 1/3, 3/3); torch 2.11.0 (shard 2/3)"),
    ("shard_collection", {"tests": 5, "sha256": "other"}, "the shards split different collections"),
])
def test_merge_refuses_shards_that_are_not_of_one_run(tmp_path, capsys, key, value, message):
    status, out = merged(tmp_path, three_shards(tmp_path, **{key: value}), capsys)
    assert status == merge.REFUSED and f"merge refused: {message}" in out, out
    assert not (tmp_path / "merged").exists()


def test_merge_names_a_missing_shard(tmp_path, capsys):
    first, _, third = three_shards(tmp_path)
    status, out = merged(tmp_path, [first, third], capsys)
    assert status == merge.REFUSED and out.splitlines() == ["merge refused: shard 2/3 missing"], out


def test_merge_refuses_a_shard_given_twice(tmp_path, capsys):
    shards = three_shards(tmp_path)
    again = shard_report(tmp_path / "again", "2/3", ["t::c", "t::d"], 6)
    status, out = merged(tmp_path, [*shards, again], capsys)
    assert status == merge.REFUSED and f"shard 2/3 given twice: {shards[1]}, {again}" in out, out


def test_merge_refuses_a_test_run_in_two_shards(tmp_path, capsys):
    status, out = merged(tmp_path, three_shards(tmp_path, shard_tests=["t::c", "t::d", "t::e"]), capsys)
    assert status == merge.REFUSED and "merge refused: test t::e in shards 2/3 and 3/3" in out, out


def test_merge_refuses_shards_that_leave_a_test_out(tmp_path, capsys):
    shards = three_shards(tmp_path)
    shard_report(shards[2], "3/3", ["t::e"], 6)  # split with another durations file: t::f went nowhere
    status, out = merged(tmp_path, shards, capsys)
    assert status == merge.REFUSED and "1 of the 6 test(s) collected are in no shard" in out, out


def test_merge_refuses_shards_of_different_splits(tmp_path, capsys):
    shards = [shard_report(tmp_path / "a", "1/2", ["t::a"], 2), shard_report(tmp_path / "b", "2/3", ["t::b"], 2)]
    status, out = merged(tmp_path, shards, capsys)
    assert status == merge.REFUSED and "shards of different splits: 1/2" in out, out


def test_merge_refuses_a_shard_that_died_or_was_interrupted_or_is_none(tmp_path, capsys):
    shards = three_shards(tmp_path)
    artifacts.prepare(shards[1])  # what a run leaves when it starts: the INCOMPLETE placeholder
    interrupted = json.loads((shards[2] / "accuracy.json").read_text())
    interrupted["run"]["interrupted"] = True
    (shards[2] / "accuracy.json").write_text(json.dumps(interrupted))
    unsharded = shard_report(tmp_path / "whole", "1/1", ["t::a"], 1)
    whole = json.loads((unsharded / "accuracy.json").read_text())
    del whole["run"]["shard"]
    (unsharded / "accuracy.json").write_text(json.dumps(whole))
    status, out = merged(tmp_path, [*shards, unsharded, tmp_path / "nothing"], capsys)
    assert status == merge.REFUSED, out
    assert f"merge refused: {shards[1]}: INCOMPLETE: its run died" in out
    assert f"merge refused: {shards[2]}: shard 3/3 was interrupted" in out
    assert f"merge refused: {unsharded}: not a shard's report" in out
    assert f"merge refused: {tmp_path / 'nothing'}: no accuracy.json" in out


def test_a_failed_test_in_any_shard_fails_the_merge(tmp_path, capsys):
    shards = three_shards(tmp_path)
    document = json.loads((shards[1] / "accuracy.json").read_text())
    document["tests"]["t::d"] = "failed"
    document["failures"] = [artifacts.failure("t::d", "call", "AssertionError: planted")]
    (shards[1] / "accuracy.json").write_text(json.dumps(document))
    status, out = merged(tmp_path, shards, capsys)
    assert status == 1 and "failed: t::d (call): AssertionError: planted" in out, out
    assert "merged 3 shard(s) of 3: FAILED: 5 test(s) passed, 1 failed" in out


def test_shards_whose_every_test_was_skipped_merge_into_no_pass(tmp_path, capsys):
    shards = three_shards(tmp_path)
    for shard in shards:
        document = json.loads((shard / "accuracy.json").read_text())
        document["tests"] = dict.fromkeys(document["tests"], "skipped")
        document["verdict"] = "NOTHING TESTED: 0 test(s) passed, 0 failed; accuracy gate: no baseline given"
        (shard / "accuracy.json").write_text(json.dumps(document))
    status, out = merged(tmp_path, shards, capsys)
    assert status == pytest.ExitCode.NO_TESTS_COLLECTED and "merged 3 shard(s) of 3: NOTHING TESTED" in out, out


def test_an_invariance_holds_in_the_merge_only_where_it_held_in_every_shard(tmp_path, capsys):
    def cell(held, test, counterexample=None):
        return {"promised": False, "held": held, "counterexample": counterexample, "tests": [test]}

    shards = three_shards(tmp_path)
    tables = [{"k": {"batch": cell(True, "t::a"), "shift": cell(True, "t::b")}},
              {"k": {"batch": cell(False, "t::c", "row 3 differs")}}, {}]
    for folder, table in zip(shards, tables):
        document = json.loads((folder / "accuracy.json").read_text())
        (folder / "accuracy.json").write_text(json.dumps({**document, "invariances": table}))
    assert merged(tmp_path, shards, capsys)[0] == 0
    table = json.loads((tmp_path / "merged" / "accuracy.json").read_text())["invariances"]["k"]
    assert table["batch"] == {"promised": False, "held": False, "counterexample": "row 3 differs",
                              "tests": ["t::a", "t::c"]}
    assert table["shift"]["held"] and table["shift"]["tests"] == ["t::b"]


# A fleet's nights -----------------------------------------------------------------------------------------------

def shard_night(folder: Path, label: str, tests: list[str], records: list[dict], soak_verdict: str) -> Path:
    """A night run as shard ``label``: its merged rounds' accuracy.json and its soak's summary."""
    shard_report(folder, label, tests, 2, draws=f"seeded-{label}", rounds=2, seeds=[label])
    document = json.loads((folder / "accuracy.json").read_text())
    document.update(records=records, categories=categorize(records))
    (folder / "accuracy.json").write_text(json.dumps(document))
    (folder / "soak").mkdir()
    (folder / "soak" / "soak.json").write_text(json.dumps({"verdict": soak_verdict, "rounds": []}))
    return folder


def test_the_nightly_driver_merges_a_fleets_shard_nights_and_compares_them_with_the_previous_night(tmp_path):
    def nights(day: str, max_ulp: int, soak_verdict: str = "PASSED") -> list[Path]:
        return [shard_night(tmp_path / day / "host1", "1/2", ["t::a"], [fixed_record("k", "normal", 3, "a")],
                            "PASSED"),
                shard_night(tmp_path / day / "host2", "2/2", ["t::b"], [fixed_record("k", "zeros", max_ulp, "b")],
                            soak_verdict)]

    def night(day: str, *shard_nights, previous=()) -> int:
        return nightly.main(["--out", str(tmp_path / day / "night"), *previous,
                             "--merge-shards", *map(str, shard_nights)])

    assert night("mon", *nights("mon", 0)) == 0  # draws differ from shard to shard: every round seeds anew
    monday = json.loads((tmp_path / "mon" / "night" / "fixed.json").read_text())
    assert set(monday["categories"]["k"]) == {"softmax/float32/normal", "softmax/float32/zeros"}
    assert [s["shard"] for s in monday["run"]["shards"]] == ["1/2", "2/2"] and monday["run"]["rounds"] == 4
    previous = ("--previous", str(tmp_path / "mon" / "night"))
    assert night("tue", *nights("tue", 40), previous=previous) == 1
    assert "k       softmax/float32/zeros  max_ulp" in (tmp_path / "tue" / "night" / "compare.txt").read_text()
    assert night("wed", *nights("wed", 0, "FAILED"), previous=previous) == 1
    summary = (tmp_path / "wed" / "night" / "nightly.md").read_text()
    assert summary.startswith("# Nightly run\n\n**FAILED**: 0 new, 0 known; 2 shard nights merged, soaks of shard(s) 2/2 did not "
                              "pass; no regression against"), summary
    assert night("thu", nights("thu", 0)[0], previous=previous) == merge.REFUSED  # shard 2/2 missing


# End to end -----------------------------------------------------------------------------------------------------

def accuracy(folder: Path) -> dict:
    return json.loads((folder / "accuracy.json").read_text())


def gate_section(folder: Path) -> str:
    """The regression gate's table in a report's summary.md: every finding, failing ones first."""
    return (folder / "summary.md").read_text().split("## Regression gate")[1]


def test_three_shards_merged_give_the_unsharded_runs_categories_invariances_and_verdict(run_pytest, tmp_path, capsys):
    reference = tmp_path / "baseline.json"
    made = run_pytest(*SUITE, "--accuracy-baseline", str(reference), "--update-baseline")
    assert made.returncode == 0, made.stdout[-3000:]

    def gated(folder: str, *extra: str):
        """A run gated against the baseline, the gate kernel's precision worse than when it was made."""
        return run_pytest(*SUITE, "--accuracy-baseline", str(reference), "--accuracy-report", str(tmp_path / folder),
                          *extra, SOFTMAX_SUITE_PLANT_LOSS="1")

    # The unsharded run and the shards (the second under xdist, whose workers collect and split) side by side.
    with ThreadPoolExecutor(4) as pool:
        whole, *shards = pool.map(lambda args: gated(*args), [("whole",), ("shard-1", "--shard", "1/3"),
                                                              ("shard-2", "--shard", "2/3", "-n", "2"),
                                                              ("shard-3", "--shard", "3/3")])
    assert whole.returncode == pytest.ExitCode.TESTS_FAILED, whole.stdout[-3000:]
    assert "accuracy regressions against the baseline" in whole.stdout
    one, runs = accuracy(tmp_path / "whole"), [accuracy(tmp_path / f"shard-{k}") for k in (1, 2, 3)]
    assert one["verdict"].startswith("FAILED") and "0 failed; accuracy gate: " in one["verdict"], one["verdict"]
    assert [run["run"]["shard"] for run in runs] == ["1/3", "2/3", "3/3"] and all(run["tests"] for run in runs)
    assert sorted(t for run in runs for t in run["run"]["shard_tests"]) == sorted(one["tests"])
    assert list(runs[1]["run"]["workers"].values()) == [2] and list(one["run"]["workers"].values()) == [1]
    for result, run in zip(shards, runs):  # each shard gates what it ran: only the gate kernel's shard fails it
        measured = GATE_KERNEL in run["categories"]
        assert result.returncode == (1 if measured else 0), result.stdout[-3000:]
        assert ("accuracy gate: no regression" in result.stdout) is not measured, result.stdout[-3000:]

    folders = [str(tmp_path / f"shard-{k}") for k in (3, 1, 2)]
    result = subruns.run(subruns.python("report", "merge", str(tmp_path / "merged"), *folders, "--accuracy-baseline",
                                        str(reference)))
    assert result.returncode == 1 and "accuracy regressions against the baseline" in result.stdout, \
        result.stdout + result.stderr
    together = accuracy(tmp_path / "merged")
    assert together["categories"] == one["categories"] and one["categories"][GATE_KERNEL]
    assert together["invariances"] == one["invariances"] and one["invariances"]["torch"]["shift"]["held"]
    assert together["records"] == one["records"] and together["tests"] == one["tests"]
    assert together["verdict"] == one["verdict"]
    assert gate_section(tmp_path / "merged") == gate_section(tmp_path / "whole")
    assert f"merged 3 shard(s) of 3: {one['verdict']}" in result.stdout

    # Against a baseline of what the kernel does now, the same shards pass the gate.
    remade = tmp_path / "remade.json"
    baseline.write(remade, baseline.build(one["categories"], backend="cpu", profile="ci", run=one["run"],
                                          invariances=invariances.held(one["invariances"]),
                                          invariance_tests=invariances.sources(one["invariances"])))
    status, out = merged(tmp_path, folders, capsys, "--accuracy-baseline", str(remade))
    assert status == 0 and f"accuracy gate: no regression against {remade}" in out, out

    # A shard left out is named.
    status, out = merged(tmp_path, folders[1:], capsys, "--accuracy-baseline", str(reference))
    assert status == merge.REFUSED and out.splitlines() == ["merge refused: shard 3/3 missing"], out


def test_a_shard_that_holds_no_test_says_so_and_still_merges(run_pytest, tmp_path):
    one_test = ("tests/suite/test_formats.py", "-k", "bfloat16_rounding", "--device", "cpu")
    first = run_pytest(*one_test, "--shard", "1/2", "--accuracy-report", str(tmp_path / "1"))
    empty = run_pytest(*one_test, "--shard", "2/2", "--accuracy-report", str(tmp_path / "2"))
    assert first.returncode == 0, first.stdout[-2000:]
    assert empty.returncode == pytest.ExitCode.NO_TESTS_COLLECTED, empty.stdout[-2000:]
    assert "shard 2/2 holds no test: the split gave all 1 selected test(s) to the other shards" in empty.stdout
    assert accuracy(tmp_path / "2")["run"]["shard_tests"] == []
    assert report_cli(["merge", str(tmp_path / "merged"), str(tmp_path / "1"), str(tmp_path / "2")]) == 0


def test_a_kernel_whose_every_test_is_skipped_in_every_shard_fails_the_merge_not_a_shard(run_pytest, tmp_path):
    """The gate kernel declares none of the operations these tests take, torch all: each shard passes (its skipped
    tests of the kernel may be judged in another), and the merge says the run judged nothing of the kernel: 5."""
    chosen = ("tests/kernel/test_metamorphic.py", "-k", "every_other_unscaled", "--kernel", "torch", "--kernel",
              GATE_KERNEL, "--device", "cpu", "--hypothesis-profile", "mutation")
    shards = [run_pytest(*chosen, "--shard", f"{k}/2", "--accuracy-report", str(tmp_path / f"shard-{k}"))
              for k in (1, 2)]
    assert [result.returncode for result in shards] == [0, 0], [result.stdout[-2000:] for result in shards]
    assert any(f"of {GATE_KERNEL}'s tests in this shard were skipped" in result.stdout for result in shards)
    result = subruns.run(subruns.python("report", "merge", str(tmp_path / "merged"), str(tmp_path / "shard-1"),
                                        str(tmp_path / "shard-2")))
    assert result.returncode == merge.NOTHING_TESTED, result.stdout + result.stderr
    assert f"NOTHING TESTED of {GATE_KERNEL}: all 3 of its tests in the shards were skipped" in result.stdout
    assert "NOTHING TESTED of torch" not in result.stdout
