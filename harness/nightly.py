"""The nightly job in one command: a time-boxed soak of every kernel present, its league table, and what changed.

    python -m harness.nightly --minutes 30 --out nightly/$(date +%F) \\
        [--previous nightly/LAST] [--bench docs/bench/bandwidth.json] [--resume] -- -n auto --device cuda

1. ``python -m harness.soak`` for the minutes given (randomised rounds of the
   ``nightly`` profile, failing examples kept for the next gate), with
   ``--kernel all`` (every registered kernel, the peers too, each skipped with
   its reason where its library is absent) unless the pytest arguments after
   ``--`` name kernels, into ``OUT/soak`` (where that holds rounds of an earlier
   run, ``OUT`` is refused unless ``--resume`` is given: the soak then goes on
   after them);
2. the records of the rounds ``OUT/soak/soak.json`` lists (this run's, and the
   earlier ones when resumed) merged into ``OUT/accuracy.json`` (the format of
   ``--accuracy-report``; an invariance held only if it held in every round);
3. the league table (:mod:`report.league`): ``OUT/league.md``, ``league.json``
   and, with ``--bench``, a plot of accuracy against speed per dtype;
4. with ``--previous`` (last night's folder), what got better and worse per
   kernel, under the regression gate's rules, on the inputs every night draws
   alike (the coverage sweep and the catalog: ``OUT/fixed.json``; statistics of
   the randomised search differ from night to night with its inputs), of those
   both nights reached within their time boxes (:mod:`report.comparison`, which
   ``python -m report compare`` shares): ``OUT/compare.txt``;
5. ``OUT/nightly.md``: the verdict, the comparison, the league, the soak's rounds.

A fleet shares one night: host K runs the night of shard K (``-- --shard K/N ...``,
:mod:`harness.plugins.sharding`) into a folder of its own, and ``--merge-shards NIGHT...``
then merges those N nights into ``OUT`` instead of soaking: steps 2 to 5 over their
records, with the previous night compared as for one host.  Nights that are not
the shards of one run (another commit, profile, backend or split, a shard missing
or twice, a test in two shards) are refused with exit status 4
(:mod:`report.merge`; the draws differ by design: every round seeds anew).

The headline counts the soak's failures as new and known (``specs/known_findings.py``:
"PASSED: 0 new, 5 known (flag_gems: flag-gems.md 1 x3, ...)"); only new failures, a
known finding fixed, or a regression make the night FAILED.  Exit status 1 when a round
failed or erred, no round wrote a report, or the night regressed against the previous
one; 3 (INCOMPLETE) when nothing failed but the soak left tests unrun in every round, or
drew no input (every example it ran a fixed one, the same every night).
A SIGINT or SIGTERM stops the soak's round
(:mod:`harness.soak`) and starts no other; the night's files are then written from
the rounds that wrote a report, under the verdict INTERRUPTED, and the exit status
is 128 plus the signal's number (130, 143).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
from pathlib import Path

from report import comparison, league
from report import merge as shards
from report.invariances import combine
from report.summary import Category, categorize

from . import soak


def merge(documents: list[dict], *, fixed: bool = False) -> dict:
    """The accuracy.json of several rounds as one: their records' categories (``fixed``: of the inputs every
    run draws alike only), invariances held in all."""
    records = [r for d in documents for r in d["records"] if not fixed or r.get("inputs") == comparison.FIXED]
    entries = [entry for d in documents for entry in shards.invariance_entries(d.get("invariances", {}))]
    run = {**documents[0]["run"], "rounds": len(documents), "seeds": [d["run"].get("seed") for d in documents]}
    return {"schema_version": documents[0]["schema_version"], "run": run,
            "verdict": "; ".join(d["verdict"] for d in documents), "failures": [f for d in documents
                                                                                for f in d["failures"]],
            "categories": categorize(records), "invariances": combine(entries), "records": records}


def compare(previous: Path, now: Path) -> tuple[str, bool]:
    """What changed from last night's fixed.json to tonight's, on the fixed inputs both judged
    (:func:`report.comparison.comparable`): its text, and whether tonight regressed."""
    last, tonight = comparison.load(previous), comparison.load(now)
    try:
        pair = comparison.comparable(last, tonight, previous, now)
    except comparison.Refused as why:  # the nights judged no fixed input alike: no change is known
        return f"not compared: {why}\n", False
    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        findings = comparison.changes(pair)
    return text.getvalue(), any(f.fails for f in findings)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ours, pytest_args = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
    parser = argparse.ArgumentParser(prog="python -m harness.nightly", description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=soak.positive_minutes,
                        help="the soak's time box: a finite number of minutes above 0")
    parser.add_argument("--merge-shards", type=Path, nargs="+", metavar="NIGHT",
                        help="instead of soaking: merge the nights N hosts ran as shards K/N of one night into OUT")
    parser.add_argument("--out", type=Path, required=True, help="tonight's folder")
    parser.add_argument("--previous", type=Path, help="last night's folder (its fixed.json), to compare with")
    parser.add_argument("--bench", type=Path, help="bench/softmax_bandwidth.py's bandwidth.json from this device")
    parser.add_argument("--resume", action="store_true",
                        help="soak on where OUT/soak holds an earlier run's rounds, and merge them with this run's; "
                             "without it, such an OUT is refused")
    parser.add_argument("--parallel", type=soak.positive_count, default=1, metavar="P",
                        help="the soak's rounds at once, each with its own seed (python -m harness.soak --parallel)")
    parser.add_argument("--examples-per-test", type=soak.positive_count, metavar="N",
                        help="N drawn examples for every test of a round (its fixed inputs apart, run in the "
                             "first round alone), not equal time (python -m harness.soak)")
    parser.add_argument("--rounds", type=soak.positive_count, metavar="R",
                        help="at most R rounds of the soak, however much of the time box is left "
                             "(python -m harness.soak)")
    args = parser.parse_args(ours)
    if args.merge_shards:
        return merged_night(args)
    if args.minutes is None:
        parser.error("the following arguments are required: --minutes (unless --merge-shards)")
    if args.previous is not None and not (args.previous / "fixed.json").is_file():
        parser.error(f"--previous {args.previous}: no fixed.json there (the folder of a night this driver wrote)")
    soak.refuse_earlier_rounds(parser, args.out / "soak", args.resume)
    if not any(a == "--kernel" or a.startswith("--kernel=") for a in pytest_args):
        pytest_args = ["--kernel", "all", *pytest_args]
    with soak.Interruption().handled() as interruption:
        resume = ["--resume"] if args.resume else []
        per_test = ["--examples-per-test", str(args.examples_per_test)] if args.examples_per_test else []
        rounds = ["--rounds", str(args.rounds)] if args.rounds else []
        soak.main(["--minutes", str(args.minutes), "--out", str(args.out / "soak"), "--parallel", str(args.parallel),
                   *per_test, *rounds, *resume, "--", *pytest_args],
                  interruption)
        return night(args, interruption)


def round_reports(soak_out: Path, summary: dict) -> list[dict]:
    """The accuracy.json of each round the soak's summary lists (this run's, and earlier ones when resumed; never
    another round folder that happens to be there), of those that wrote one."""
    paths = [soak.round_directory(soak_out, r["round"]) / "accuracy.json" for r in summary["rounds"]]
    return [json.loads(path.read_text()) for path in paths if path.exists()]


def night(args: argparse.Namespace, interruption: soak.Interruption) -> int:
    """The night's files from the soak's rounds; its exit status."""
    summary = soak.read_summary(args.out / "soak")
    documents = round_reports(args.out / "soak", summary)
    soaked = (args.out / "soak" / "soak.md").read_text().replace("# Soak", "## Soak", 1).splitlines()
    return write_night(args, documents, summary["verdict"], soaked, interruption,
                       lambda word, regressed: headline(word, interruption, summary, len(documents), args, regressed))


def merged_night(args: argparse.Namespace) -> int:
    """The nights of a fleet's shards (``--merge-shards``) as one night in ``args.out``; its exit status."""
    reports, problems = [], []
    for folder in args.merge_shards:
        try:
            reports.append(shards.ShardReport.of(folder, comparison.load(folder / "accuracy.json")))
        except shards.Refused as refused:
            problems += refused.problems
        except comparison.Refused as unreadable:  # no report, or not one
            problems.append(str(unreadable))
    problems = problems or shards.problems(reports, same_draws=False)
    if problems:
        for line in problems:
            print(f"nightly: merge refused: {line}", file=sys.stderr)
        return shards.REFUSED
    reports.sort(key=lambda r: r.shard.index)
    verdicts = {r.shard.label: soak.read_summary(r.folder / "soak").get("verdict", "no soak summary") for r in reports}
    listed = [f"- shard {r.shard.label}: `{r.folder}`, soak {verdicts[r.shard.label].lower()}, "
              f"{r.run.get('rounds', 1)} round(s)" for r in reports]
    args.out.mkdir(parents=True, exist_ok=True)

    def merged_headline(word: str, regressed: bool) -> str:
        compared = ("no previous night given" if args.previous is None else
                    f"{'regressed' if regressed else 'no regression'} against `{args.previous}`")
        failed = sorted(label for label, verdict in verdicts.items() if verdict != "PASSED")
        soaked = f"soaks of shard(s) {', '.join(failed)} did not pass" if failed else "every shard's soak passed"
        rounds = [r for folder in args.merge_shards for r in soak.read_summary(folder / "soak")["rounds"]]
        failures = soak.counted_failures(rounds)
        return f"**{word}**: {failures}; {len(reports)} shard nights merged, {soaked}; {compared}"

    return write_night(args, [r.document for r in reports], worst_verdict(verdicts.values()),
                       ["## Shards", "", *listed, ""], soak.Interruption(), merged_headline,
                       run={**shards.merged_run(reports), "rounds": sum(r.run.get("rounds", 1) for r in reports),
                            "seeds": [seed for r in reports for seed in r.run.get("seeds", [])]})


def operations_judged(categories: dict) -> list[str]:
    """The operations other than the softmax that the night judged, by name."""
    return sorted({Category.read(key).op for groups in categories.values() for key in groups} - {league.OP})


def worst_verdict(verdicts) -> str:
    """The soak verdict of several shards' nights: the worst of theirs."""
    order = ["PASSED", "INCOMPLETE", "FAILED"]
    return max(verdicts, key=lambda v: order.index(v) if v in order else len(order), default="FAILED")


def write_night(args: argparse.Namespace, documents: list[dict], soaked: str, tail: list[str],
                interruption: soak.Interruption, headline_of, run: dict | None = None) -> int:
    """OUT/accuracy.json, fixed.json, the league, the comparison with the previous night and nightly.md from the
    reports ``documents``; ``soaked``: their soak's verdict (PASSED, INCOMPLETE: tests left unrun, FAILED);
    ``tail``: nightly.md's last lines; ``run``: the merged report's run metadata, if not the first document's.
    The exit status."""
    tonight, written, changed, regressed = None, [], "", False
    bench = json.loads(args.bench.read_text()) if args.bench else None
    if documents:
        tonight, fixed = merge(documents), merge(documents, fixed=True)
        tonight["run"] = fixed["run"] = run or tonight["run"]
        (args.out / "accuracy.json").write_text(json.dumps(tonight, indent=1, sort_keys=True) + "\n")
        (args.out / "fixed.json").write_text(json.dumps(fixed, indent=1, sort_keys=True) + "\n")
        written = league.write(args.out, tonight, bench)
        if args.previous is not None:
            changed, regressed = compare(args.previous / "fixed.json", args.out / "fixed.json")
            (args.out / "compare.txt").write_text(changed)
    else:
        print("nightly: no round wrote a report; see the soak's logs", file=sys.stderr)
    failed = soaked not in ("PASSED", "INCOMPLETE") or regressed or tonight is None
    word = "INTERRUPTED" if interruption.signal else "FAILED" if failed else soaked
    lines = ["# Nightly run", "", headline_of(word, regressed), ""]
    if changed:
        lines += ["## Against the previous night", "", "```", changed.rstrip(), "```", ""]
    if tonight is not None:
        lines += league.markdown(tonight["categories"], tonight["invariances"], bench)
        lines += [f"![{p.stem}]({p.name})" for p in written if p.suffix == ".png"] + [""]
        for op in operations_judged(tonight["categories"]):  # a kernel's other operations: their own tables
            lines += league.markdown(tonight["categories"], {}, None, op)
    pages = sorted(args.out.glob("soak/round-*/index.html")) if not args.merge_shards else sorted(
        page for folder in args.merge_shards for page in folder.glob("soak/round-*/index.html"))
    lines += ["## The rounds' reports", "", *(f"- [{page.parent.name}]({page})" for page in pages), ""] if pages else []
    lines += tail
    (args.out / "nightly.md").write_text("\n".join(lines) + "\n")
    print(f"nightly: {word}; {args.out / 'nightly.md'}")
    for page in pages:
        print(f"nightly: a round's report: {page}")
    if interruption.signal:
        return interruption.exit_status()
    return 1 if failed else soak.INCOMPLETE if word == "INCOMPLETE" else 0


def headline(word: str, interruption: soak.Interruption, summary: dict, reports: int, args: argparse.Namespace,
             regressed: bool) -> str:
    """nightly.md's first line: the verdict, the soak's, and the comparison's."""
    soaked = f"soak {summary['verdict'].lower()} ({len(summary['rounds'])} round(s), {args.minutes:g} minutes"
    soaked += "" if reports == len(summary["rounds"]) else f", {reports} of them with a report"
    compared = ("no previous night given" if args.previous is None else
                "nothing to compare" if not reports else
                f"{'regressed' if regressed else 'no regression'} against `{args.previous}`")
    by = f" by {interruption.signal.name}" if interruption.signal else ""
    return f"**{word}**{by}: {soak.counted_failures(summary['rounds'])}; {soaked}; `soak/soak.md`); {compared}"


if __name__ == "__main__":
    sys.exit(main())
