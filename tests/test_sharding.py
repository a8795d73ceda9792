"""One gate over several hosts: ``python -m report merge`` makes one report and one verdict of the reports of a
run's shards, and refuses folders that are not the shards of one run."""

import json
from pathlib import Path

import pytest

from report import artifacts, merge
from report.__main__ import main as report_cli


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
