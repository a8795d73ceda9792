"""The files the suite reads and writes (report/files.py): JSON nested too deeply to parse is refused as a usage error
naming the file, never a crash; what the suite writes is as readable as the umask allows."""

import json
import os

import pytest

from report import artifacts, baseline, files
from report.__main__ import main as report_cli

DEEP = {"array": "[" * 100000 + "]" * 100000, "object": '{"a": ' * 100000 + "1" + "}" * 100000}
UMASK, CREATED = 0o027, 0o640  # group-readable: neither mkstemp's 0600 nor the usual 0644
QUICK_TEST = "tests/suite/test_folders.py::test_no_test_file_lies_outside_the_two_folders"  # a sub-run's only test


@pytest.fixture(params=sorted(DEEP))
def deep(request, tmp_path):
    """A JSON file nested 100000 deep (Python's parser recurses once a level)."""
    path = tmp_path / f"deep-{request.param}.json"
    path.write_text(DEEP[request.param])
    return path


@pytest.fixture
def umask():
    """This process's umask set to UMASK for the test (a sub-run inherits it), then put back."""
    before = os.umask(UMASK)
    yield UMASK
    os.umask(before)


def test_json_nested_too_deeply_is_unreadable_and_a_bad_baseline_naming_its_file(deep):
    with pytest.raises(files.UnreadableJSON, match="nested too deeply"):
        files.read_json(deep)
    with pytest.raises(baseline.BaselineError, match=f"baseline {deep} is not readable JSON: nested too deeply"):
        baseline.load(deep, "cpu")


def test_a_baseline_or_durations_file_nested_too_deeply_stops_the_run_as_a_usage_error_naming_it(run_pytest, tmp_path):
    """It was pytest's INTERNALERROR (a RecursionError), exit status 3."""
    path = tmp_path / "deep.json"
    path.write_text(DEEP["object"])
    for option in ("--accuracy-baseline", "--test-durations"):
        result = run_pytest(QUICK_TEST, f"{option}={path}")
        assert result.returncode == pytest.ExitCode.USAGE_ERROR, (option, result.stdout[-2000:], result.stderr[-2000:])
        assert str(path) in result.stderr and "nested too deeply" in result.stderr, (option, result.stderr[-2000:])


def test_python_m_report_refuses_json_nested_too_deeply_with_its_usage_status_naming_the_file(deep, tmp_path, capsys):
    report = tmp_path / "accuracy.json"
    report.write_text(json.dumps({"run": {"backend": "cpu", "profile": "ci", "draws": "d"}, "categories": {}}))
    shard = tmp_path / "shard"
    shard.mkdir()
    (shard / "accuracy.json").write_text(deep.read_text())
    for argv, named in ((["compare", str(deep), str(report)], deep), (["league", str(deep)], deep),
                        (["league", str(report), "--bench", str(deep)], deep),
                        (["merge", str(tmp_path / "merged"), str(shard)], shard / "accuracy.json")):
        assert report_cli([*argv, "--out", str(tmp_path)] if argv[0] == "league" else argv) == 4, argv
        said = capsys.readouterr()
        assert f"{named}: not" in said.out + said.err and "nested too deeply" in said.out + said.err, (argv, said)


def test_a_file_written_in_place_is_as_readable_as_the_umask_allows(tmp_path, umask):
    artifacts.write_text(tmp_path / "summary.md", "text")
    files.replace_file(tmp_path / "plot.png", lambda temporary: temporary.write_bytes(b"\x89PNG"))
    baseline.write(tmp_path / "baseline.json", {})
    assert {p.name: oct(p.stat().st_mode & 0o777) for p in tmp_path.iterdir()} == dict.fromkeys(
        ("summary.md", "plot.png", "baseline.json"), oct(CREATED))


def test_a_runs_report_baseline_and_durations_are_as_readable_as_the_umask_allows(run_pytest, tmp_path, umask):
    """They were 0600 (tempfile.mkstemp's), whatever the umask: no one else could read a CI job's report."""
    result = run_pytest(QUICK_TEST, f"--accuracy-report={tmp_path / 'report'}",
                        f"--accuracy-baseline={tmp_path / 'baseline.json'}", "--update-baseline",
                        "--record-durations", f"--test-durations={tmp_path / 'durations.json'}")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    written = [tmp_path / "baseline.json", tmp_path / "durations.json", *(tmp_path / "report").iterdir()]
    assert len(written) == 5 and {p.name: oct(p.stat().st_mode & 0o777) for p in written} == {
        p.name: oct(CREATED) for p in written}
