"""``python -m report compare OLD.json NEW.json [NEWER.json ...]``: what improved and what regressed.
``python -m report league ACCURACY.json [--bench BANDWIDTH.json] [--out DIR]``: the league table
(:mod:`report.league`).
``python -m report merge OUT SHARD_DIR... [--accuracy-baseline FILE|auto]``: the reports of a run's shards
(``--shard K/N``) as one report in OUT and one gate verdict (:mod:`report.merge`; exit status 4 when the
folders are not the shards of one run, 1 when a shard failed a test or the merged gate failed).

From another folder: ``python PATH/TO/CHECKOUT/report compare ...``.

The files are ``accuracy.json`` reports (``--accuracy-report``), oldest first;
each is compared with the one before it under the regression gate's rules and
slack (:mod:`report.baseline`), and a trend table follows for three or more.
Bitwise invariances that held before and broke after count as regressions, and
so does a kernel that vanished.  Exit status 1 when the newest report regressed
against the one before it, for nightly trend jobs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

if not __package__:  # run as ``python CHECKOUT/report compare ...`` from anywhere: the checkout holds the package
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from report import baseline, invariances, league, merge  # noqa: E402


def load(path: Path) -> dict:
    try:
        document = json.loads(path.read_text())
        categories(document)  # what every use reads: a document without it is no report
        return document
    except (OSError, json.JSONDecodeError, KeyError, TypeError) as error:
        raise SystemExit(f"{path}: not an accuracy.json report ({error})") from None


def categories(document: dict) -> tuple[dict, dict, dict]:
    """A report's run, categories and invariances held (reports older than the invariances have none)."""
    return document["run"], document["categories"], invariances.held(document.get("invariances", {}))


def pair(old_path: Path, new_path: Path) -> list[baseline.Finding]:
    """Print what changed from one report to the next; the findings."""
    return changes(load(old_path), load(new_path), old_path, new_path)


def changes(old_document: dict, new_document: dict, old_name, new_name) -> list[baseline.Finding]:
    """Print what changed from one report to the next (named as given); the findings."""
    old_run, old, old_held = categories(old_document)
    new_run, new, new_held = categories(new_document)
    reference = baseline.build(old, backend=old_run.get("backend"), profile=old_run.get("profile"), run=old_run)
    findings = (baseline.compare(reference["kernels"], new) + baseline.vanished(reference["kernels"], new)
                + baseline.compare_invariances(old_held, new_held))
    print(f"old: {old_name} ({old_run.get('git_commit')}, {old_run.get('started')})")
    print(f"new: {new_name} ({new_run.get('git_commit')}, {new_run.get('started')})")
    for title, verdicts in (("regressed", ("regressed", "disappeared", "lost")), ("improved", ("improved", "gained")),
                            ("new", ("new", "not gated"))):
        rows = [f for f in findings if f.verdict in verdicts]
        print(f"\n{title}: {len(rows)}")
        for line in baseline.table(rows, only_failures=False):
            print("  " + line)
    return findings


def trend(paths: list[Path]) -> list[str]:
    """Rows kernel, category, metric, then the metric in each report, for what changed along the way."""
    series: dict[tuple[str, str, str], list[str]] = {}
    for index, path in enumerate(paths):
        for kernel, groups in categories(load(path))[1].items():
            for key, stats in groups.items():
                for metric in baseline.SLACK:
                    value = stats["kernel"][metric]
                    cells = series.setdefault((kernel, key, metric), ["-"] * len(paths))
                    cells[index] = "-" if value is None else f"{value:{baseline.SHOWN}}"
    rows = [("kernel", "category", "metric", *(f"#{i + 1}" for i in range(len(paths))))]
    rows += [(*key, *cells) for key, cells in sorted(series.items()) if len(set(cells)) > 1]
    return baseline.aligned(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m report", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    compare = commands.add_parser("compare", help="compare accuracy.json reports, oldest first")
    compare.add_argument("reports", type=Path, nargs="+", metavar="REPORT")
    table = commands.add_parser("league", help="the league table of an accuracy.json report")
    table.add_argument("report", type=Path, metavar="REPORT")
    table.add_argument("--bench", type=Path, help="bench/softmax_bandwidth.py's bandwidth.json, same device")
    table.add_argument("--out", type=Path, default=Path("."), help="where league.md, league.json, plots go")
    shards = commands.add_parser("merge", help="merge the reports of a run's shards into one report and verdict")
    shards.add_argument("out", type=Path, metavar="OUT", help="the merged report's folder")
    shards.add_argument("shards", type=Path, nargs="+", metavar="SHARD_DIR", help="each shard's --accuracy-report")
    shards.add_argument("--accuracy-baseline", metavar="FILE|auto",
                        help="gate the merged shards as one run ('auto': baselines/<backend>.json)")
    shards.add_argument("--require-baseline", action="store_true",
                        help="fail the gate for a kernel the baseline does not hold")
    args = parser.parse_args(argv)
    if args.command == "merge":
        return merge.main(args.out, args.shards, args.accuracy_baseline, args.require_baseline)
    if args.command == "league":
        bench = json.loads(args.bench.read_text()) if args.bench else None
        for path in league.write(args.out, json.loads(args.report.read_text()), bench):
            print(f"wrote {path}")
        return 0
    if len(args.reports) < 2:
        parser.error("compare needs two reports at least, oldest first")
    findings = []
    for old, new in zip(args.reports, args.reports[1:]):
        findings = pair(old, new)
        print()
    if len(args.reports) > 2:
        print("trend (what changed along the way):")
        for line in trend(args.reports):
            print("  " + line)
    return 1 if any(f.fails for f in findings) else 0


if __name__ == "__main__":
    sys.exit(main())
