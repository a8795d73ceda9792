"""The README and the documents it links say what is so: every command runs as written (the ones CI runs are CI's,
this test runs the others), the README's figures of how long runs take, and of what they count, are
docs/timings.md's, and the tests docs/bug-classes.md names are where it says."""

import re
from pathlib import Path

import pytest

from harness.guard.replay_command import PYTHON

ROOT = Path(__file__).resolve().parents[2]
CI_RUNS = ('python -m pip install ".[cpu]"', "python -m pytest -n auto --accuracy-baseline auto")
# The failing run whose report tests/suite/test_report_in_a_browser.py opens.
FAILING = "python -m pytest -n auto --kernel examples/my_kernels.py:softmax_half_sum --accuracy-report reports/mine"
# What each other command must do, run from the checkout's root: its exit status, and words of its output.
RUN_HERE = {
    "python -m pytest -n auto --kernel examples/my_kernels.py:softmax": (0, "passed"),
    FAILING: (1, f"replay in one step: {PYTHON} -m harness.replay --kernel "),
    "python -m harness.replay --kernel examples/my_kernels.py:softmax_half_sum --device cpu --op softmax "
    "\"Case(shape=(2, 4096), dim=1, dtype=torch.bfloat16, values=Values(kind='equal', scale=1.0), seed=4)\"":
        (1, "beyond the derived bound"),
    "python -m harness.nightly --minutes 5 --rounds 1 --examples-per-test 20 --out reports/nightly -- --kernel examples/my_kernels.py:softmax":
        (0, "nightly: PASSED"),
}


def readme_commands() -> list[str]:
    """The commands of the README's ``sh`` blocks, a line each (a trailing backslash continues it)."""
    blocks = re.findall(r"```sh\n(.*?)```", (ROOT / "README.md").read_text(), re.DOTALL)
    return [line.strip() for block in blocks for line in block.replace("\\\n", " ").splitlines() if line.strip()]


def test_every_command_of_the_readme_is_run_by_ci_or_by_this_test():
    ci = (ROOT / ".ci" / "run").read_text()
    assert all(command in ci for command in CI_RUNS)
    assert sorted(readme_commands()) == sorted([*CI_RUNS, *RUN_HERE])


@pytest.mark.parametrize("command", list(RUN_HERE))
def test_a_readme_command_does_what_the_readme_says(command, readme_command):
    """Run by a shell from the root of a copy of the checkout, exactly as written (what they write, in reports/,
    stays out of the user's checkout), with nothing inherited that the README does not say."""
    status, said = RUN_HERE[command]
    result = readme_command(command)
    assert result["returncode"] == status, result["stdout"][-3000:] + result["stderr"][-3000:]
    assert said in result["stdout"] + result["stderr"], result["stdout"][-3000:]


def test_a_path_outside_the_checkout_is_taken_after_an_equals_sign_as_the_readme_says(run_pytest, tmp_path):
    """And given apart, pytest's usage error, not a run without the suite's options."""
    outside = tmp_path / "report"
    outside.mkdir()
    joined = run_pytest("--collect-only", "-q", "--kernel", "torch", f"--accuracy-report={outside}")
    assert joined.returncode == 0, joined.stdout[-3000:] + joined.stderr[-3000:]
    apart = run_pytest("--collect-only", "-q", "--kernel", "torch", "--accuracy-report", str(outside))
    assert apart.returncode == pytest.ExitCode.USAGE_ERROR and "unrecognized arguments" in apart.stderr, apart.stderr


TIMINGS = ROOT / "docs" / "timings.md"
# A figure of a run: a duration, its CPU-seconds, a count of passed or skipped tests.
FIGURE = re.compile(r"(?<![\d.])\d+(?: min \d+ s| min| minutes| s| CPU-seconds| passed| skipped)\b")
COUNTS = re.compile(r'"(\d+ passed, \d+ skipped)"')  # the example run's counts, as pytest says them


def figures_citing_timings() -> list[list[str]]:
    """The figures of each clause (up to a semicolon) of the README's paragraphs that link docs/timings.md: those
    that state how long a run takes, and what it counts."""
    paragraphs = re.split(r"\n\s*\n", (ROOT / "README.md").read_text())
    clauses = [clause for p in paragraphs if "(docs/timings.md)" in p for clause in " ".join(p.split()).split(";")]
    return [FIGURE.findall(clause) for clause in clauses if FIGURE.search(clause)]


def timings_entries() -> list[str]:
    """docs/timings.md's entries: a top-level item each, one measurement with its date, machine and tree."""
    return [" ".join(entry.split()) for entry in re.split(r"\n(?=\* )", TIMINGS.read_text())]


def recorded(figure: str, entry: str) -> bool:
    return re.search(rf"(?<![\d.]){re.escape(figure)}\b", entry) is not None


def test_the_readmes_timing_figures_are_the_ones_docs_timings_records():
    """Gate minutes, CPU-seconds and the example run's counts: the figures of each clause of the README are those
    of one entry of docs/timings.md (dated, with its machine and tree); a README figure no entry holds so has
    drifted from what was measured."""
    clauses = figures_citing_timings()
    figures = [figure for clause in clauses for figure in clause]
    assert any(f.endswith("CPU-seconds") for f in figures) and any(f.endswith("passed") for f in figures), figures
    entries = timings_entries()
    drifted = [clause for clause in clauses if not any(all(recorded(f, entry) for f in clause) for entry in entries)]
    assert not drifted, f"README figures that no one entry of docs/timings.md records: {drifted}"


def test_the_readme_states_the_counts_its_example_run_gives(readme_command):
    """The README's "N passed, M skipped" of its example kernel are what the run says (docs/timings.md records them)."""
    stated = COUNTS.findall(" ".join((ROOT / "README.md").read_text().split()))
    assert len(stated) == 1, stated
    result = readme_command("python -m pytest -n auto --kernel examples/my_kernels.py:softmax")
    assert stated[0] in result["stdout"].splitlines()[-1], result["stdout"][-3000:]


def test_the_tests_docs_bug_classes_names_are_where_it_says():
    """Each ``file.py::test`` docs/bug-classes.md names is defined in that file (a file named alone, under tests/)."""
    text = (ROOT / "docs" / "bug-classes.md").read_text()
    wrong = []
    for path, name in set(re.findall(r"`((?:tests/\w+/)?test_\w+\.py)(?:::(test_\w+))?", text)):
        found = [ROOT / path] if "/" in path else list((ROOT / "tests").glob(f"*/{path}"))
        if len(found) != 1 or not found[0].is_file() or name and f"def {name}(" not in found[0].read_text():
            wrong.append(f"{path}::{name}" if name else path)
    assert not wrong, f"docs/bug-classes.md names tests that are not there: {wrong}"
