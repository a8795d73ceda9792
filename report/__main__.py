"""``python -m report compare OLD.json NEW.json [NEWER.json ...]``: what improved and what regressed.
``python -m report league ACCURACY.json [--bench BANDWIDTH.json] [--out DIR] [--op OP]``: the league table
(:mod:`report.league`).
``python -m report merge OUT SHARD_DIR... [--accuracy-baseline FILE|auto]``: the reports of a run's shards
(``--shard K/N``) as one report in OUT and one gate verdict (:mod:`report.merge`; exit status 4 when the
folders are not the shards of one run, 1 when a shard failed a test or the merged gate failed).

From another folder: ``python PATH/TO/CHECKOUT/report compare ...``.

The reports are ``accuracy.json`` files or the folders holding them
(``--accuracy-report``), oldest first; each is compared with the one before it
under the regression gate's rules and slack (:mod:`report.baseline`), and a
trend table follows for three or more.  Bitwise invariances that held before
and broke after count as regressions, and so does a kernel that vanished.
Reports compare only when they drew the same inputs (the same draws
fingerprint): statistics of other inputs say nothing of a kernel.  Exit status
1 when the newest report regressed against the one before it, for nightly trend
jobs; 4 (pytest's usage error) when the command cannot compare what it is given,
or, for every command, cannot read it (a file that is no readable JSON, nested
too deeply among them).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if not __package__:  # run as ``python CHECKOUT/report compare ...`` from anywhere: the checkout holds the package
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from report import baseline, files, invariances, league, merge  # noqa: E402
from report.text import printable  # noqa: E402

REFUSED = merge.REFUSED


class Refused(Exception):
    """What the command was given cannot be compared; the message says why."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str):
        self.print_usage(sys.stderr)
        self.exit(REFUSED, f"{self.prog}: error: {message}\n")


def load(path: Path) -> dict:
    """The report at ``path``, an ``accuracy.json`` or the folder holding one."""
    file = path / "accuracy.json" if path.is_dir() else path
    try:
        document = files.read_json(file)
        categories(document)  # what every use reads: a document without it is no report
        return document
    except (OSError, files.UnreadableJSON, KeyError, TypeError) as error:
        raise Refused(f"{file}: not an accuracy.json report ({error})") from None


def read_bench(path: Path) -> dict:
    """The JSON of ``bench/softmax_bandwidth.py`` at ``path``."""
    try:
        return files.read_json(path)
    except (OSError, files.UnreadableJSON) as error:
        raise Refused(f"{path}: not a bandwidth.json ({error})") from None


def same_draws(old_run: dict, new_run: dict, old_name, new_name) -> None:
    """Refuse two reports whose statistics came from different inputs."""
    if old_run.get("draws") is None or new_run.get("draws") is None:
        random = [str(name) for name, run in ((old_name, old_run), (new_name, new_run)) if run.get("draws") is None]
        raise Refused(f"{', '.join(random)}: drew random inputs (no draws fingerprint: a run of the dev profile, or "
                      "one seeded at random), which no other run draws again; compare runs of one profile and seed")
    if why := baseline.other_draws(old_run, new_run):
        raise Refused(f"{old_name} and {new_name} cannot be compared: " + why.replace(
            "remake the baseline with --update-baseline", "run both with the same suite, profile and seed").replace(
            "the baseline's", "the older report's"))


def categories(document: dict) -> tuple[dict, dict, dict]:
    """A report's run, categories and invariances held (reports older than the invariances have none)."""
    return document["run"], document["categories"], invariances.held(document.get("invariances", {}))


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
            print(printable("  " + line))  # the kernels' names
    return findings


def trend(documents: list[dict]) -> list[str]:
    """Rows kernel, category, metric, then the metric in each report, for what changed along the way."""
    series: dict[tuple[str, str, str], list[str]] = {}
    for index, document in enumerate(documents):
        for kernel, groups in categories(document)[1].items():
            for key, stats in groups.items():
                for metric in baseline.SLACK:
                    value = stats["kernel"][metric]
                    cells = series.setdefault((kernel, key, metric), ["-"] * len(documents))
                    cells[index] = "-" if value is None else f"{value:{baseline.SHOWN}}"
    rows = [("kernel", "category", "metric", *(f"#{i + 1}" for i in range(len(documents))))]
    rows += [(*key, *cells) for key, cells in sorted(series.items()) if len(set(cells)) > 1]
    return baseline.aligned(rows)


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog="python -m report", description=__doc__.splitlines()[0],
                    epilog="exit status: 0 when nothing regressed; 1 when the newest report regressed (compare), or a "
                           "shard failed a test or the merged gate failed (merge); 4 (pytest's usage error) when a "
                           "command cannot read or use what it is given (a report, baseline or benchmark that is no "
                           "readable JSON among them); 5 when the merged shards tested nothing")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    compare = commands.add_parser("compare", help="compare accuracy.json reports, oldest first")
    compare.add_argument("reports", type=Path, nargs="+", metavar="REPORT",
                         help="an accuracy.json, or the --accuracy-report folder holding one")
    table = commands.add_parser("league", help="the league table of an accuracy.json report")
    table.add_argument("report", type=Path, metavar="REPORT")
    table.add_argument("--bench", type=Path, help="bench/softmax_bandwidth.py's bandwidth.json, same device")
    table.add_argument("--out", type=Path, default=Path("."), help="where league.md, league.json, plots go")
    table.add_argument("--op", default=league.OP, help="the operation tabled (records' op: softmax, softmax_backward...)")
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
        try:
            document, bench = load(args.report), read_bench(args.bench) if args.bench else None
        except Refused as why:
            print(f"python -m report league: {why}", file=sys.stderr)
            return REFUSED
        for path in league.write(args.out, document, bench, args.op):
            print(f"wrote {path}")
        return 0
    if len(args.reports) < 2:
        parser.error("compare needs two reports at least, oldest first")
    try:
        documents = [load(path) for path in args.reports]
        pairs = list(zip(zip(args.reports, documents), zip(args.reports[1:], documents[1:])))
        for (old, old_document), (new, new_document) in pairs:  # every pair is checked before any is printed
            same_draws(old_document["run"], new_document["run"], old, new)
        findings = []
        for (old, old_document), (new, new_document) in pairs:
            findings = changes(old_document, new_document, old, new)
            print()
        if len(documents) > 2:
            print("trend (what changed along the way):")
            for line in trend(documents):
                print(printable("  " + line))
    except Refused as why:
        print(f"python -m report compare: {why}", file=sys.stderr)
        return REFUSED
    return 1 if any(f.fails for f in findings) else 0


if __name__ == "__main__":
    sys.exit(main())
