"""Under ``pytest -n`` idle workers steal queued tests, unless the command line chose a ``--dist``."""

import pytest

QUICK = ("--device", "cpu", "tests/test_formats.py")


@pytest.mark.parametrize("args,scheduler", [((), "WorkStealingScheduling"),
                                            (("--dist", "load"), "LoadScheduling")])
def test_workers_steal_work_unless_the_command_line_chose(run_pytest, args, scheduler):
    result = run_pytest("-n", "2", "-v", *args, *QUICK)
    assert result.returncode == pytest.ExitCode.OK, result.stdout[-2000:]
    assert f"scheduling tests via {scheduler}" in result.stdout
