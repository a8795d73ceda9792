"""``python -m report merge OUT SHARD_DIR...``: the reports of one run's shards as one report and one verdict.

A run split over hosts with ``--shard K/N`` (:mod:`harness.plugins.sharding`) leaves
one report folder per shard (``--accuracy-report``).  Each shard's
``accuracy.json`` carries what merging needs: the run's metadata (commit,
draws fingerprint, profile, backend, versions, CPU instruction set), which
shard it was and the tests it selected (``shard``, ``shard_tests``), a
fingerprint of the collection it split (``shard_collection``), its records,
its invariance table with the tests that measured each cell, and the outcome
of every test that ran (``tests``).

Shards are merged only when they are one run's: the same commit, draws,
profile, backend and library versions, every shard of the split once, no test
in two shards, the same collection split, every test of it in a shard, no
shard that died (its report still the INCOMPLETE placeholder) or was
interrupted.  Anything else is refused with a line per problem (exit status
4, pytest's usage error).

The merged report is written as a run writes its own
(:func:`report.artifacts.write_all`): the union of the shards' records and
their categories (:func:`report.summary.categorize`, which depends on no
order), the invariances combined over shards (:func:`report.invariances.combine`:
held only where held in every shard), the union of the tests' outcomes.  With
``--accuracy-baseline FILE|auto`` the union is gated by :func:`gate`, which the
run's own gate calls too: the same comparison over the union of the shards'
categories and of the tests they ran, so merged shards get the verdict an
unsharded run of the same draws gets.  Exit status 1 when a shard failed a
test or the merged gate failed, else 0.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from . import artifacts, baseline, files, gate, invariances
from .summary import categorize
from .text import printable

REFUSED = 4  # pytest's exit status for a usage error
NOTHING_TESTED = 5  # pytest's for a run that tested nothing: shards whose every test was skipped are no pass
ALIKE = (("git_commit", "suite versions (git commit)"), ("draws", "draws fingerprints"),
         ("kernel_draws", "kernels' declarations (what each is drawn from)"),
         ("profile", "Hypothesis profiles"), ("backend", "backends"), ("versions", "library versions"))
SHARD_KEYS = ("shard", "shard_tests", "shard_collection")  # a shard's own run metadata, not the merged run's
NEEDED = ("run", "verdict", "failures", "records", "invariances", "tests")
SHOWN_TESTS = 5  # test ids named per problem; the rest are counted


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` of ``count`` (both from 1), written ``K/N``."""

    index: int
    count: int

    @property
    def label(self) -> str:
        return f"{self.index}/{self.count}"

    @classmethod
    def parse(cls, text: str) -> Shard:
        """``"2/3"`` -> Shard(2, 3); ValueError saying what a shard is for anything else."""
        try:
            index, count = (int(part) for part in str(text).split("/"))
        except ValueError:
            raise ValueError(f"shard {text!r}: expected K/N, two whole numbers with 1 <= K <= N") from None
        if not 1 <= index <= count:
            raise ValueError(f"shard {text!r}: expected K/N with 1 <= K <= N")
        return cls(index, count)


class Refused(Exception):
    """The folders given are not the shards of one run: ``problems`` says why, a line each."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class ShardReport:
    folder: Path
    document: dict
    shard: Shard

    @property
    def run(self) -> dict:
        return self.document["run"]

    @property
    def tests(self) -> set[str]:
        """The tests this shard selected or ran."""
        return {baseline.source_id(t) for t in [*self.run.get("shard_tests", []), *self.document.get("tests", {})]}

    @classmethod
    def of(cls, folder: Path, document: dict) -> ShardReport:
        """A shard's report from its document; Refused when it is no shard's."""
        label = document.get("run", {}).get("shard")
        if label is None:
            raise Refused([f"{folder}: not a shard's report (its run was not given --shard K/N)"])
        try:
            return cls(folder, document, Shard.parse(label))
        except ValueError as error:
            raise Refused([f"{folder}: {error}"]) from None


def read(folder: Path) -> ShardReport:
    """The shard report in ``folder``; Refused when there is none, or the shard died or was interrupted."""
    path = folder / "accuracy.json"
    try:
        document = files.read_json(path)
    except FileNotFoundError:
        raise Refused([f"{folder}: no accuracy.json (was the shard run with --accuracy-report {folder}?)"]) from None
    except files.UnreadableJSON as error:
        raise Refused([f"{path}: not readable JSON ({error})"]) from None
    if not isinstance(document, dict):
        raise Refused([f"{path}: not an accuracy report"])
    if str(document.get("verdict", "")).startswith(artifacts.INCOMPLETE):
        raise Refused([f"{folder}: INCOMPLETE: its run died or has not finished (the report is the placeholder "
                       "written when it started); rerun that shard"])
    lacking = [key for key in NEEDED if key not in document]
    if lacking:
        raise Refused([f"{path}: lacks {', '.join(lacking)}: not the report of a shard of this suite's version"])
    report = ShardReport.of(folder, document)
    if report.run.get("interrupted") or document["verdict"].startswith("INTERRUPTED"):
        raise Refused([f"{folder}: shard {report.shard.label} was interrupted before its tests ended; rerun it"])
    return report


def read_all(folders: list[Path]) -> list[ShardReport]:
    """Every folder's shard report; Refused with every folder's problem at once."""
    reports, problems = [], []
    for folder in folders:
        try:
            reports.append(read(folder))
        except Refused as refused:
            problems += refused.problems
    if problems:
        raise Refused(problems)
    return reports


def as_text(value) -> str:
    return json.dumps(value, sort_keys=True) if isinstance(value, (dict, list)) else str(value)


def labels(reports: list[ShardReport]) -> str:
    return ", ".join(r.shard.label for r in reports)


def differing(reports: list[ShardReport], key: str, what: str) -> str | None:
    """A problem when the shards' run metadata differ at ``key``."""
    groups: dict[str, list[ShardReport]] = {}
    for report in reports:
        groups.setdefault(as_text(report.run.get(key)), []).append(report)
    if len(groups) < 2:
        return None
    if key == "versions":  # name only the libraries that differ
        names = sorted({n for r in reports for n in r.run.get(key) or {}
                        if len({as_text((s.run.get(key) or {}).get(n)) for s in reports}) > 1})
        groups = {", ".join(f"{n} {(rs[0].run.get(key) or {}).get(n)}" for n in names): rs for rs in groups.values()}
    return f"shards of different {what}: " + "; ".join(f"{value} (shard {labels(rs)})"
                                                      for value, rs in groups.items())


def problems(reports: list[ShardReport], *, same_draws: bool = True) -> list[str]:
    """Why ``reports`` are not the shards of one run (nothing when they are).

    ``same_draws``: the shards must have drawn the same inputs; nightly soak rounds draw random seeds, and their
    merge compares only the inputs every round draws alike."""
    checked = [(key, what) for key, what in ALIKE if same_draws or key != "draws"]
    found = [problem for key, what in checked if (problem := differing(reports, key, what))]
    counts = {r.shard.count for r in reports}
    if len(counts) > 1:
        return found + ["shards of different splits: " + ", ".join(f"{r.shard.label} ({r.folder})" for r in reports)]
    count = counts.pop()
    by_index: dict[int, list[ShardReport]] = {}
    for report in reports:
        by_index.setdefault(report.shard.index, []).append(report)
    found += [f"shard {index}/{count} given twice: {', '.join(str(r.folder) for r in rs)}"
              for index, rs in sorted(by_index.items()) if len(rs) > 1]
    found += [f"shard {index}/{count} missing" for index in range(1, count + 1) if index not in by_index]
    owners: dict[str, list[str]] = {}  # test -> the shards (by K) that selected or ran it
    for report in sorted(reports, key=lambda r: r.shard.index):
        for test in report.tests:
            if report.shard.label not in owners.setdefault(test, []):
                owners[test].append(report.shard.label)
    twice = sorted((test, shards) for test, shards in owners.items() if len(shards) > 1)
    found += [f"test {test} in shards {' and '.join(shards)}" for test, shards in twice[:SHOWN_TESTS]]
    found += [f"... and {len(twice) - SHOWN_TESTS} more test(s) in two shards"] if len(twice) > SHOWN_TESTS else []
    collections = {as_text(r.run.get("shard_collection")) for r in reports}
    if len(collections) > 1:
        found.append("the shards split different collections (other test files, -k, --kernel or checkout): "
                     + "; ".join(f"{r.shard.label} collected {(r.run.get('shard_collection') or {}).get('tests')} "
                                 f"test(s) ({(r.run.get('shard_collection') or {}).get('sha256')})" for r in reports))
    elif len(by_index) == count and not twice:
        collected = (reports[0].run.get("shard_collection") or {}).get("tests")
        if collected is not None and len(owners) < collected:
            found.append(f"{collected - len(owners)} of the {collected} test(s) collected are in no shard (were the "
                         "shards split with other durations files?)")
    return found


def invariance_entries(table: dict) -> list[dict]:
    """An invariance table (kernel -> invariance -> cell) as the entries :func:`invariances.combine` takes, one per
    test that measured a cell: combined with other tables' entries, a cell holds only where it held in all."""
    return [{"kernel": kernel, "property": name, "promised": cell["promised"], "held": cell["held"],
             "counterexample": cell["counterexample"], "test": test}
            for kernel, cells in table.items() for name, cell in cells.items() for test in cell.get("tests") or [""]]


def merged_run(reports: list[ShardReport]) -> dict:
    """The run metadata of the merged report: what the shards share, and each shard's own."""
    runs = [r.run for r in reports]
    run = {key: value for key, value in runs[0].items() if key not in SHARD_KEYS}
    devices = sorted({str(r.get("device")) for r in runs})
    capabilities = sorted({str(r.get("cpu_capability")) for r in runs})
    run.update(
        started=min(str(r.get("started")) for r in runs), device="; ".join(devices),
        # A mixed fleet's torch numbers come from several instruction sets: the gate leaves torch unjudged.
        cpu_capability=runs[0].get("cpu_capability") if len(capabilities) == 1 else "mixed: " + ", ".join(capabilities),
        interrupted=False, named_kernels=named_kernels(reports),
        # Each host numbers its own devices: a shard's device is not another's.
        workers={f"shard {r.shard.label}: {device}": count for r in reports
                 for device, count in (r.run.get("workers") or {}).items()},
        shards=[{"shard": r.shard.label, "folder": str(r.folder), "started": r.run.get("started"),
                 "device": r.run.get("device"), "cpu_capability": r.run.get("cpu_capability"),
                 "workers": r.run.get("workers"), "tests": len(r.run.get("shard_tests", []))} for r in reports])
    return run


@dataclass
class Merged:
    run: dict
    records: list
    categories: dict
    invariances: dict
    tests: dict  # test id -> outcome
    failures: list
    missing: list
    known: list  # failures a known finding explains ({"test", "kernel", "findings"})
    fixed: list  # known findings whose test passed

    @property
    def ran(self) -> set[str]:
        return {baseline.source_id(test) for test in self.tests}

    @property
    def passed(self) -> int:
        return sum(outcome == "passed" for outcome in self.tests.values())


def merge(reports: list[ShardReport]) -> Merged:
    """The shards' reports as one run's (the shards checked by :func:`problems` first)."""
    reports = sorted(reports, key=lambda r: r.shard.index)
    records = sorted((record for r in reports for record in r.document["records"]),
                     key=lambda record: (record["test"], record["example"]))
    entries = [entry for r in reports for entry in invariance_entries(r.document["invariances"])]
    return Merged(run=merged_run(reports), records=records, categories=categorize(records),
                  invariances=invariances.combine(entries),
                  tests={test: outcome for r in reports for test, outcome in r.document["tests"].items()},
                  failures=[failure for r in reports for failure in r.document["failures"]],
                  missing=sorted({test for r in reports for test in r.document.get("missing_records", [])}),
                  known=[k for r in reports for k in r.document.get("known", [])],
                  fixed=[k for r in reports for k in r.document.get("fixed", [])])


def reference_of(option: str, backend: str) -> tuple[Path, dict]:
    path = baseline.default_path(backend) if option == "auto" else Path(option)
    return path, baseline.load(path, backend)


def main(out: Path, folders: list[Path], baseline_option: str | None = None, require: bool = False) -> int:
    """Merge the shards in ``folders`` into the report ``out``, gated against ``baseline_option``; exit status."""
    try:
        if any(out.resolve() == folder.resolve() for folder in folders):
            raise Refused([f"{out}: the merged report would overwrite a shard's; give another folder"])
        reports = read_all(folders)
        found = problems(reports)
        if found:
            raise Refused(found)
        merged = merge(reports)
        path, reference = reference_of(baseline_option, merged.run["backend"]) if baseline_option else (None, None)
        artifacts.prepare(out)
    except (Refused, baseline.BaselineError, artifacts.ReportError) as error:
        for line in getattr(error, "problems", [str(error)]):
            print(printable(f"merge refused: {line}"))
        return REFUSED
    findings, unjudged = baseline.judge(reference, merged.categories, invariances.held(merged.invariances), merged.ran,
                              merged.run) if reference else ([], {})
    measured = set(merged.categories) | set(merged.invariances)
    verdict = artifacts.verdict(merged.passed, merged.failures, findings, path, known=merged.known,
                                fixed=merged.fixed, not_run=artifacts.not_run(merged.tests),
                                judged=gate.judged(findings, unjudged, measured) if reference else None)
    for failure in merged.failures:
        print(printable(f"failed: {failure['test']} ({failure['when']}): {failure['headline']}"))
    if reference:
        regressions = baseline.table(findings, only_failures=True)
        lines = ["accuracy regressions against the baseline:", *("  " + line for line in regressions)] if regressions \
            else []
        for line in lines + gate.notes(findings, unjudged, measured, path, require, gate.SHARDS) + \
                [gate.verdict(findings, unjudged, measured, path)]:
            print(printable(line))
    written = artifacts.write_all(out, artifacts.Report(
        run=merged.run, verdict=verdict, failures=merged.failures, categories=merged.categories,
        records=merged.records, missing=merged.missing, gate=baseline.table(findings, only_failures=False),
        invariances=merged.invariances, outcomes=merged.tests, known=merged.known, fixed=merged.fixed))
    for file in written:
        print(f"accuracy report: wrote {file}")
    unjudged_kernels = named_but_unjudged(reports)
    for kernel, count in unjudged_kernels.items():
        print(printable(f"NOTHING TESTED of {kernel}: all {count} of its tests in the shards were skipped; the run is "
                        "no pass for it: exit status 5"))
    print(f"merged {len(reports)} shard(s) of {reports[0].shard.count}: {verdict}")
    failing = merged.failures or gate.fails(findings, require)
    return 1 if failing else 0 if (merged.passed or merged.known) and not unjudged_kernels else NOTHING_TESTED


def named_kernels(reports: list[ShardReport]) -> dict[str, dict]:
    """Per kernel ``--kernel`` named that ran tests in some shard: how many over the shards, and whether one judged
    it."""
    named: dict[str, dict] = {}
    for report in reports:
        for kernel, said in (report.run.get("named_kernels") or {}).items():
            total = named.setdefault(kernel, {"tests": 0, "judged": False})
            total["tests"] += said["tests"]
            total["judged"] = total["judged"] or said["judged"]
    return dict(sorted(named.items()))


def named_but_unjudged(reports: list[ShardReport]) -> dict[str, int]:
    """The kernels ``--kernel`` named that ran tests in some shard and were judged in none, with how many ran: each
    shard leaves that rule to the merge (:func:`harness.plugins.ledger.exit_status`)."""
    return {kernel: said["tests"] for kernel, said in named_kernels(reports).items() if not said["judged"]}
