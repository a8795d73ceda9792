"""One-step replay: the command a failure prints rebuilds the input, reruns the kernel and judges it again."""

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from harness.replay import parse_case
from harness.strategies import Case, Specials, Values

ROOT = Path(__file__).resolve().parents[1]
PLANTED = "my_kernels:softmax_half_sum"  # examples/my_kernels.py: the row sum in the half input dtype


def start_replay(*args: str, cwd: Path = ROOT) -> subprocess.Popen:
    """``python -m harness.replay`` in a fresh interpreter (no inherited TRITON_INTERPRET), running in ``cwd``."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "examples"), str(ROOT)])}
    env.pop("TRITON_INTERPRET", None)
    return subprocess.Popen([sys.executable, "-m", "harness.replay", *args], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finished(process: subprocess.Popen) -> subprocess.CompletedProcess:
    try:
        stdout, stderr = process.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        process.kill()  # as subprocess.run does: no replay outlives its test
        raise
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def replay(*args: str) -> subprocess.CompletedProcess:
    return finished(start_replay(*args))


def test_the_command_a_failure_prints_replays_it_and_the_reports_lead_to_it(run_pytest, tmp_path):
    # One dtype, one test: the planted half-precision sum fails fp16 (and bf16), not fp32.
    failed = run_pytest("tests/test_accuracy.py", "-k", "test_softmax_within and float16 and not bfloat16", "--hypothesis-profile", "ci",
                        "--device", "cpu", "--kernel", PLANTED, "--accuracy-report", str(tmp_path), PYTHONPATH=str(ROOT / "examples"))
    assert failed.returncode == pytest.ExitCode.TESTS_FAILED, failed.stdout[-3000:]

    summary = (tmp_path / "summary.md").read_text()
    assert summary.split("\n")[2].startswith("**FAILED: 0 test(s) passed, 1 failed")
    assert "## Failed tests" in summary and "replay: `python -m harness.replay --kernel my_kernels:" in summary
    page = (tmp_path / "index.html").read_text()
    links = set(re.findall(r"<tr class=bad><td><a href='#([^']+)'>", page))
    assert links and all(f"id='{anchor}'" in page for anchor in links)  # every red row leads to its failure
    line = next(line for line in failed.stdout.splitlines() if "replay in one step: python -m harness.replay" in line)
    command = shlex.split(line.split("replay in one step: ")[1])
    assert command[:3] == ["python", "-m", "harness.replay"]
    again = replay(*command[3:])
    assert again.returncode == 1, again.stdout[-2000:] + again.stderr[-2000:]
    assert f"{PLANTED}: " in again.stdout and "beyond the derived bound" in again.stdout
    fixed = replay(*[arg.replace(PLANTED, "my_kernels:softmax") for arg in command[3:]])
    assert fixed.returncode == 0 and "0 of " in fixed.stdout, fixed.stdout[-2000:] + fixed.stderr[-2000:]


def test_a_case_is_read_back_from_its_repr_and_nothing_else_is():
    case = Case((3, 5), 1, __import__("torch").float16, Values("normal", 4.0), specials=Specials(nan=0.3), seed=7)
    assert parse_case(repr(case)) == case
    with pytest.raises(ValueError, match="not a Case"):
        parse_case("__import__('os').system('true')")
    bad = replay("--kernel", "torch", "--device", "cpu", "Case(shape=(4,)")
    assert bad.returncode == 2 and "CASE: not a Case(...)" in bad.stderr
