"""What the accuracy gate says of a run, or of a run's shards merged: its notes, and its verdict in one line.

One wording for both (harness/plugins/reporting.py prints a run's, :mod:`report.merge` the merged shards'): the
findings of :func:`report.baseline.judge`, the kernels it could not judge here and why, and the kernels the run
measured (accuracy or invariances).
"""

from __future__ import annotations

from pathlib import Path

from . import baseline

RUN, SHARDS = "this run", "the shards"  # whose measurements the gate judged


def notes(findings: list, unjudged: dict[str, str], measured: set[str], path: Path, require: bool,
          scope: str = RUN) -> list[str]:
    """The gate's lines beside its regression table and its verdict: nothing measured, baseline categories not run,
    kernels not in the baseline, kernels it cannot judge here."""
    lines = [] if measured else [f"accuracy gate: {scope} measured no accuracy and no invariance: nothing judged "
                                 f"against {path}"]
    where = "in this run (their tests were not selected)" if scope == RUN else "in any shard"
    lines += [f"accuracy gate: {kernel}: {count} baseline categorie(s) not run {where}: not judged"
              for kernel, count in baseline.not_run(findings).items()]
    fails = " (fails: --require-baseline)" if require else ""
    lines += [f"accuracy gate: {f.kernel} is not in {path}: not gated{fails}" for f in findings
              if f.verdict == "not gated"]
    return lines + [f"accuracy gate: {kernel} not judged: {why}" for kernel, why in unjudged.items()]


def verdict(findings: list, unjudged: dict[str, str], measured: set[str], path: Path,
            interrupted: bool = False) -> str:
    """The gate's verdict in a line, a run's last: the regressions, or the kernels judged without one."""
    failing = sum(f.fails for f in findings)
    not_gated = [f.kernel for f in findings if f.verdict == "not gated"]
    if interrupted:
        return f"accuracy gate: no verdict (the run was interrupted) against {path}"
    if failing:
        return f"accuracy gate: FAILED, {failing} regression(s) against {path} (table above)"
    tail = f"; not in the baseline, not gated: {', '.join(not_gated)}" if not_gated else ""
    kernels = judged(findings, unjudged, measured)
    if not kernels:
        return f"accuracy gate: nothing judged against {path}{tail}"
    return f"accuracy gate: no regression against {path} ({', '.join(sorted(kernels))}){tail}"


def judged(findings: list, unjudged: dict[str, str], measured: set[str]) -> set[str]:
    """The kernels the gate judged: measured, judgeable here, and in the baseline."""
    return measured - set(unjudged) - {f.kernel for f in findings if f.verdict == "not gated"}


def fails(findings: list, require: bool) -> bool:
    """Whether the gate fails the run: a regression, or a kernel not in the baseline where one is required."""
    return any(f.fails or require and f.verdict == "not gated" for f in findings)
