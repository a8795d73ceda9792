"""The regression gate: this run's categories against a committed baseline.

A baseline holds, per kernel and category, the max and mean ULP distance of a
run drawing the gate's inputs (profile ``ci``, pinned seeds) on one backend,
and the tests that measured each category (its *sources*).  A category fails
the gate when its max ULP grows by more than max(1 ULP, 10 %), its mean ULP by
more than max(0.05 ULP, 10 %), or it disappears: a source test ran and the
category was not measured (the test crashed, failed early, or the kernel no
longer declares that input).  A category none of whose sources ran (a subset
run, ``-k``, another ``--kernel``) is *not run*: named, not judged.  The slack
absorbs CPUs whose vector math differs (numpy's exp on AVX2 and AVX-512, say);
on one machine two runs drawing the same inputs agree exactly.  A baseline
also keeps, per kernel, which bitwise invariances held
(``report.invariances``), with their sources: a kernel that loses one fails
the gate, promised or not.

A missing, unreadable or malformed baseline is an error, never a pass: every
metric a finite number, every kernel gating something, a draws fingerprint.
``--update-baseline`` merges a run into the file (:func:`merge`): what the run
did not measure stays, unless the run prunes it.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from . import files

SCHEMA_VERSION = 2
PROFILE = "ci"  # the Hypothesis profile of every baseline (harness.plugins.session.GATE_PROFILE)
SLACK = {"max_ulp": (1.0, 0.10), "mean_ulp": (0.05, 0.10)}  # metric -> (absolute, relative)
SHOWN = ".4g"  # how the tables show a metric: a change below it is no finding
FAILING = ("regressed", "disappeared", "lost")


class BaselineError(ValueError):
    """The baseline file cannot be used."""


def default_path(backend: str) -> Path:
    return Path(__file__).resolve().parents[1] / "baselines" / f"{backend}.json"


def source_id(nodeid: str) -> str:
    """A test's id as a baseline names it: xdist's ``--dist loadgroup`` appends ``@group`` to node ids."""
    return nodeid.split("@", 1)[0]


def read(path: Path) -> dict:
    """The JSON object in ``path``; BaselineError saying why not."""
    try:
        data = files.read_json(path)
    except FileNotFoundError:
        raise BaselineError(f"no baseline at {path}; create one with --update-baseline") from None
    except files.UnreadableJSON as error:
        raise BaselineError(f"baseline {path} is not readable JSON: {error}") from None
    if not isinstance(data, dict):
        raise BaselineError(f"baseline {path} must hold a JSON object")
    return data


def finite_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0


def test_list(value) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(test, str) for test in value)


def problems_of(data: dict, backend: str) -> list[str]:
    """What makes ``data`` unusable as a baseline for ``backend``."""
    problems = []
    if data.get("schema_version") != SCHEMA_VERSION:
        problems.append(f"schema_version {data.get('schema_version')!r}, expected {SCHEMA_VERSION}")
    if data.get("backend") != backend:
        problems.append(f"made on backend {data.get('backend')!r}, this run is on {backend!r}")
    if data.get("profile") != PROFILE:
        problems.append(f"made with Hypothesis profile {data.get('profile')!r}, not {PROFILE!r}")
    if not (isinstance(data.get("draws"), str) and data["draws"]):
        problems.append("no draws fingerprint (what inputs its statistics came from)")
    declared = data.get("kernel_draws", {})
    if not (isinstance(declared, dict) and all(isinstance(v, str) and v for v in declared.values())):
        problems.append("kernel_draws must map kernel -> the fingerprint of its declaration")
    kernels, held, sources = data.get("kernels"), data.get("invariances", {}), data.get("invariance_tests", {})
    if not (isinstance(held, dict) and all(isinstance(cells, dict) and all(isinstance(v, bool) for v in cells.values())
                                           for cells in held.values())):
        problems.append("invariances must map kernel -> invariance -> true/false")
        held = {}
    if not (isinstance(sources, dict) and all(isinstance(cells, dict) and all(test_list(v) for v in cells.values())
                                              for cells in sources.values())):
        problems.append("invariance_tests must map kernel -> invariance -> [test ids]")
        sources = {}
    for kernel, cells in held.items():
        missing = sorted(set(cells) - set(sources.get(kernel, {})))
        if missing:
            problems.append(f"{kernel}: invariance(s) {', '.join(missing)} without the tests that measured them")
    if not isinstance(kernels, dict) or not (kernels or held):
        problems.append("no kernels: it gates nothing")
        return problems
    for kernel, groups in kernels.items():
        if not isinstance(groups, dict):
            problems.append(f"{kernel}: categories must be a JSON object")
            continue
        if not groups and not held.get(kernel):
            problems.append(f"{kernel}: no category and no invariance: it gates nothing")
        for key, stats in groups.items():
            if not (isinstance(stats, dict) and all(finite_number(stats.get(m)) for m in SLACK)):
                problems.append(f"{kernel} / {key}: needs finite numbers >= 0 for {', '.join(SLACK)}")
            elif not (isinstance(stats.get("records"), int) and stats["records"] > 0 and test_list(stats.get("tests"))):
                problems.append(f"{kernel} / {key}: needs a positive count of records and the tests that measured it")
    return problems


def load(path: Path, backend: str) -> dict:
    """Read and validate a baseline for ``backend``."""
    data = read(path)
    problems = problems_of(data, backend)
    if problems:
        raise BaselineError(f"baseline {path} is malformed: " + "; ".join(problems))
    return data


def build(categories: dict, *, backend: str, profile: str, run: dict, invariances: dict | None = None,
          invariance_tests: dict | None = None) -> dict:
    """A baseline from this run's categories (kernel -> category -> statistics) and invariances held."""
    held = invariances or {}
    return {
        "schema_version": SCHEMA_VERSION,
        "backend": backend,
        "profile": profile,
        "device": run.get("device"),
        "cpu_capability": run.get("cpu_capability"),
        "draws": run.get("draws"),
        # Each kernel's declaration as it decides its draws (harness.plugins.seeding.kernel_fingerprint).
        "kernel_draws": {kernel: digest for kernel, digest in (run.get("kernel_draws") or {}).items()
                         if kernel in set(categories) | set(held)},
        "made_by": {key: run.get(key) for key in ("git_commit", "versions", "started")},
        "kernels": {
            kernel: {key: {metric: stats["kernel"][metric] or 0.0 for metric in SLACK}
                     | {"records": stats["records"], "tests": stats.get("tests", [])}
                     for key, stats in categories.get(kernel, {}).items()}
            for kernel in sorted(set(categories) | set(held))
        },
        "invariances": held,
        "invariance_tests": invariance_tests or {},
    }


def merge(old: dict | None, new: dict, ran: set[str], *, prune: bool) -> tuple[dict, list[str]]:
    """``new`` (this run's baseline) merged into ``old``, and notes on what happened.

    A category or invariance of ``old`` whose sources ran in this run is replaced by this run's
    measurement (or dropped: the run measured it no more); the others stay, unless ``prune``.  An
    ``old`` drawn from other inputs, made on another machine kind or unreadable is replaced whole.
    """
    if old is None:
        return new, []
    stale = [what for what, key in (("other draws", "draws"), ("another CPU instruction set", "cpu_capability"))
             if old.get(key) != new.get(key)]
    if stale:
        return new, [f"the existing baseline came from {' and '.join(stale)}: replaced whole, not merged"]
    merged = json.loads(json.dumps(new))  # a deep copy
    kept = dropped = 0
    redrawn = sorted(kernel for kernel, digest in old.get("kernel_draws", {}).items()
                     if kernel in new["kernel_draws"] and new["kernel_draws"][kernel] != digest)
    for kernel, digest in old.get("kernel_draws", {}).items():
        merged["kernel_draws"].setdefault(kernel, digest)
    for kernel, groups in old["kernels"].items():
        for key, stats in groups.items():
            if key in merged["kernels"].get(kernel, {}) or any(source_id(t) in ran for t in stats["tests"]):
                continue
            if kernel in redrawn:  # measured on what the kernel's old declaration drew: no longer its inputs
                dropped += 1
                continue
            if prune:
                dropped += 1
            else:
                merged["kernels"].setdefault(kernel, {})[key] = stats
                kept += 1
    for kernel, cells in old.get("invariances", {}).items():
        for name, holds in cells.items():
            tests = old["invariance_tests"][kernel][name]
            if name in merged["invariances"].get(kernel, {}) or any(source_id(t) in ran for t in tests):
                continue
            if kernel in redrawn:
                dropped += 1
                continue
            if prune:
                dropped += 1
            else:
                merged["invariances"].setdefault(kernel, {})[name] = holds
                merged["invariance_tests"].setdefault(kernel, {})[name] = tests
                merged["kernels"].setdefault(kernel, {})
                kept += 1
    merged["kernels"] = dict(sorted(merged["kernels"].items()))
    merged["kernel_draws"] = dict(sorted(merged["kernel_draws"].items()))
    notes = [f"{kernel}: its declaration draws other inputs than the baseline's: what this run did not measure of "
             "it dropped" for kernel in redrawn]
    notes += [f"kept {kept} categorie(s) or invariance(s) this run did not measure"] if kept else []
    notes += [f"pruned {dropped} categorie(s) or invariance(s) this run did not measure"] if dropped else []
    return merged, notes


def write(path: Path, baseline: dict) -> None:
    """Write atomically: a reader (another run's gate) never sees half a baseline."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    files.write_text(path, json.dumps(baseline, indent=1, sort_keys=True) + "\n")


def other_draws(reference: dict, run: dict) -> str | None:
    """Why this run's inputs are not the ones the baseline's statistics came from, if they are not.

    Statistics of other inputs say nothing of a kernel: compared, they flagged correct kernels.
    """
    made, now = reference.get("draws"), run.get("draws")
    if made == now:
        return None
    return (f"the suite draws other inputs than the baseline's (fingerprint {made} there, {now} here: other "
            f"strategies, Hypothesis version, profile, seeding or an example database replayed: this run's seeds "
            f"{run.get('seed')}, database {run.get('example_database')}); "
            "remake the baseline with --update-baseline")


def redeclared(reference: dict, run: dict) -> dict[str, str]:
    """Kernels whose declaration draws other inputs than when the baseline was made, with why: a kernel's draws
    follow its capabilities (its code-path boundaries, its longest rows), which the run's draws fingerprint does
    not cover.  A baseline that keeps no digest of a kernel judges it as before."""
    made, now = reference.get("kernel_draws") or {}, run.get("kernel_draws") or {}
    return {kernel: (f"its declaration (capabilities: limits, code-path boundaries) draws other inputs than the "
                     f"baseline's (fingerprint {made[kernel]} there, {now[kernel]} here); remake the baseline with "
                     "--update-baseline")
            for kernel in sorted(set(made) & set(now)) if made[kernel] != now[kernel]}


def machine_bound(reference: dict, run: dict) -> dict[str, str]:
    """Kernels whose numbers this machine cannot reproduce, with the reason.

    On the CPU backend torch.softmax runs ATen's vectorised kernels, chosen by the
    instruction set: AVX2 and AVX512 round differently, by more than the slack
    (log_softmax of fp32 underflow rows: 5 ulp on one, 25 on the other).
    """
    made, now = reference.get("cpu_capability"), run.get("cpu_capability")
    if run.get("backend") == "cpu" and made != now:
        return {"torch": f"its CPU kernels depend on the instruction set: baseline made with {made}, this run {now}"}
    return {}


@dataclass(frozen=True)
class Finding:
    kernel: str
    category: str
    metric: str
    baseline: float | None
    now: float | None
    verdict: str  # "regressed", "disappeared", "lost", "improved", "new", "gained", "not gated", "not run"

    @property
    def fails(self) -> bool:
        return self.verdict in FAILING


def allowed(metric: str, old: float) -> float:
    absolute, relative = SLACK[metric]
    return old + max(absolute, relative * old)


def ran_any(tests, ran: set[str] | None) -> bool:
    """Whether a source of a category ran (``ran`` None: every test ran, as when comparing whole reports)."""
    return ran is None or any(source_id(test) in ran for test in tests or ())


def compare(baseline_kernels: dict, categories: dict, ran: set[str] | None = None) -> list[Finding]:
    """Findings for every category of the baseline whose sources ran, and every kernel this run measured.

    ``ran``: the tests this run ran (None: all of them).  A baseline category none of whose sources
    ran is not run; a kernel the baseline does not hold is named as not gated.
    """
    findings = []
    for kernel in sorted(set(baseline_kernels) | set(categories)):
        now_groups = categories.get(kernel, {})
        if kernel not in baseline_kernels:
            records = sum(group["records"] for group in now_groups.values())
            findings.append(Finding(kernel, "all categories", "records", None, records, "not gated"))
            continue
        old_groups = baseline_kernels[kernel]
        for key, old in sorted(old_groups.items()):
            if key not in now_groups:
                verdict = "disappeared" if ran_any(old.get("tests"), ran) else "not run"
                findings.append(Finding(kernel, key, "records", old.get("records"), None, verdict))
                continue
            for metric in SLACK:
                value = now_groups[key]["kernel"][metric] or 0.0  # None: the category holds no element
                if value > allowed(metric, old[metric]):
                    findings.append(Finding(kernel, key, metric, old[metric], value, "regressed"))
                elif value < old[metric] and f"{value:{SHOWN}}" != f"{old[metric]:{SHOWN}}":
                    findings.append(Finding(kernel, key, metric, old[metric], value, "improved"))
        for key in sorted(set(now_groups) - set(old_groups)):
            findings.append(Finding(kernel, key, "records", None, now_groups[key]["records"], "new"))
    return findings


def vanished(baseline_kernels: dict, categories: dict) -> list[Finding]:
    """Kernels the baseline (or an older report) holds that this run does not."""
    return [Finding(kernel, "all categories", "records", sum(group["records"] for group in groups.values()), None,
                    "disappeared")
            for kernel, groups in sorted(baseline_kernels.items()) if kernel not in categories]


def compare_invariances(baseline_held: dict, held: dict, sources: dict | None = None,
                        ran: set[str] | None = None) -> list[Finding]:
    """An invariance that held in the baseline and broke now is lost; one broken there that holds now, gained;
    one whose measuring tests ran and measured nothing (they crashed) disappeared."""
    findings = []
    for kernel in sorted(set(baseline_held) | set(held)):
        before, now = baseline_held.get(kernel, {}), held.get(kernel, {})
        for name in sorted(set(before) | set(now)):
            if name not in now:
                tests = (sources or {}).get(kernel, {}).get(name)
                if ran is not None and tests and ran_any(tests, ran):
                    findings.append(Finding(kernel, f"invariance: {name}", "held", None, None, "disappeared"))
                continue
            if before.get(name) is True and not now[name]:
                findings.append(Finding(kernel, f"invariance: {name}", "held", None, None, "lost"))
            elif before.get(name) is False and now[name]:
                findings.append(Finding(kernel, f"invariance: {name}", "held", None, None, "gained"))
    return findings


def judge(reference: dict, categories: dict, held: dict, ran: set[str], run: dict) -> tuple[list, dict[str, str]]:
    """The regression gate's findings for a run's categories and invariances held, against the baseline
    ``reference``, and the kernels it cannot judge on this run, with why.  A run judges itself with this at its
    end (:mod:`harness.plugins.reporting`); a merge of shards judges their union with it (:mod:`report.merge`)."""
    stale = other_draws(reference, run)
    kernels = set(reference["kernels"]) | set(categories) | set(held)
    unjudged = dict.fromkeys(kernels, stale) if stale else {**machine_bound(reference, run),
                                                             **redeclared(reference, run)}
    unjudged = {kernel: why for kernel, why in unjudged.items() if kernel in kernels}
    judged = {k: groups for k, groups in reference["kernels"].items() if k not in unjudged}
    findings = compare(judged, {k: v for k, v in categories.items() if k not in unjudged}, ran)
    findings += compare_invariances(
        {k: v for k, v in reference.get("invariances", {}).items() if k not in unjudged},
        {k: v for k, v in held.items() if k not in unjudged}, reference.get("invariance_tests"), ran)
    return findings, unjudged


def table(findings: list[Finding], *, only_failures: bool) -> list[str]:
    """Aligned text rows: kernel, category, metric, baseline, the most the gate allows, now, verdict.
    Failing rows first."""
    chosen = sorted((f for f in findings if f.fails or not only_failures and f.verdict != "not run"),
                    key=lambda f: not f.fails)
    rows = [("kernel", "category", "metric", "baseline", "allowed", "now", "verdict")]
    rows += [(f.kernel, f.category, f.metric, "-" if f.baseline is None else f"{f.baseline:{SHOWN}}",
              f"{allowed(f.metric, f.baseline):{SHOWN}}" if f.metric in SLACK and f.baseline is not None else "-",
              "-" if f.now is None else f"{f.now:{SHOWN}}", f.verdict)
             for f in chosen]
    return aligned(rows) if len(rows) > 1 else []


def not_run(findings: list[Finding]) -> dict[str, int]:
    """Per kernel, how many of its baseline categories this run did not run."""
    counts: dict[str, int] = {}
    for f in findings:
        if f.verdict == "not run":
            counts[f.kernel] = counts.get(f.kernel, 0) + 1
    return counts


def aligned(rows: list[tuple[str, ...]]) -> list[str]:
    """Rows of cells as lines of left-aligned columns."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]
