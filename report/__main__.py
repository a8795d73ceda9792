"""``python -m report compare OLD.json NEW.json [NEWER.json ...]``: what improved and what regressed.
``python -m report league ACCURACY.json [--bench BANDWIDTH.json] [--out DIR] [--op OP]``: the league table
(:mod:`report.league`).
``python -m report merge OUT SHARD_DIR... [--accuracy-baseline FILE|auto]``: the reports of a run's shards
(``--shard K/N``) as one report in OUT and one gate verdict (:mod:`report.merge`; exit status 4 when the
folders are not the shards of one run, 1 when a shard failed a test or the merged gate failed).

From another folder: ``python PATH/TO/CHECKOUT/report compare ...``.

The reports are ``accuracy.json`` files or the folders holding them
(``--accuracy-report``, a night's ``--out`` of :mod:`harness.nightly`, or its
``fixed.json``), oldest first; each is compared with the one before it under the
regression gate's rules and slack (:mod:`report.baseline`), on the inputs both
judged (:mod:`report.comparison`: whole when they drew the same inputs, else on
the fixed inputs of the coverage sweep and catalog both judged), and a trend
table follows for three or more.  Bitwise invariances that held before and
broke after count as regressions, and so does a kernel that vanished.  A report
whose run failed or was interrupted is named first, and no improvement is shown
beside it.  Exit status 1 when the newest report regressed against the one
before it, for nightly trend jobs; 4 (pytest's usage error) when the command
cannot compare what it is given (two reports that judged no input alike: the
message says what would compare), or, for every command, cannot read it (a file
that is no readable JSON, nested too deeply among them).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if not __package__:  # run as ``python CHECKOUT/report compare ...`` from anywhere: the checkout holds the package
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from report import comparison, files, league, merge  # noqa: E402
from report.comparison import Refused, load  # noqa: E402
from report.text import printable  # noqa: E402

REFUSED = merge.REFUSED


class Parser(argparse.ArgumentParser):
    def error(self, message: str):
        self.print_usage(sys.stderr)
        self.exit(REFUSED, f"{self.prog}: error: {message}\n")


def read_bench(path: Path) -> dict:
    """The JSON of ``bench/softmax_bandwidth.py`` at ``path``."""
    try:
        return files.read_json(path)
    except (OSError, files.UnreadableJSON) as error:
        raise Refused(f"{path}: not a bandwidth.json ({error})") from None


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
        pairs = [comparison.comparable(old, new, old_name, new_name)  # every pair is checked before any is printed
                 for (old_name, old), (new_name, new) in zip(zip(args.reports, documents),
                                                             zip(args.reports[1:], documents[1:]))]
    except Refused as why:
        print(f"python -m report compare: {why}", file=sys.stderr)
        return REFUSED
    findings = []
    for pair in pairs:
        findings = comparison.changes(pair)
        print()
    if len(documents) > 2:
        for line in comparison.trend(documents):
            print(printable(line))  # the kernels' names
    return 1 if any(f.fails for f in findings) else 0


if __name__ == "__main__":
    sys.exit(main())
