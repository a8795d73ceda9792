"""A time-boxed soak: randomised rounds of the suite, each with a new seed, until the time is spent.

Driver (what a nightly job runs)::

    python -m harness.soak --minutes 20 [--out DIR] [--examples DIR] [--resume] [--rounds R] -- -n auto --device cuda --kernel torch

Each round is ``python -m pytest --hypothesis-profile nightly --soak-seed SEED`` with
the pytest arguments after ``--``, a fresh random seed, and the round's report in
``OUT/round-K``.  Failing examples go to Hypothesis's directory database
(``SOFTMAX_SUITE_EXAMPLES``, default ``OUT/examples``), which every profile replays
first: the next gate run with the same variable replays what the soak found.  The
end writes ``OUT/soak.json`` and ``OUT/soak.md`` (the verdict; rounds, seeds,
minutes, examples per test, every failure with its replay) and exits 1 if any
round failed or erred.  A round errs where a test erred, where its pytest broke
(an exit status other than 0, 1 or 5), and where it tested nothing (no test
passed or failed: all skipped, or none collected).  A failure that a known
finding explains (``specs/known_findings.py``, :mod:`harness.plugins.known`) is counted
as known, not failed; a known finding fixed fails.  A test whose round's time
box ended before it started is NOT RUN; where a test was not run in any round,
and nothing failed, the verdict is INCOMPLETE and the exit status 3.

Seed shards.  A round is parallel over tests: with fewer tests than workers, the
workers left idle.  ``--parallel P`` runs P rounds at once, each with its own seed
(give each ``-n W/P``): the examples a minute grow with the workers.  Every test
gets an equal share of a round's time; ``--examples-per-test N`` gives each N
examples instead, so that a slow kernel is searched as deep as a fast one.  ``soak.md``
says per kernel the tests run, examples, elements judged and test-seconds.

An ``OUT`` that holds rounds of an earlier run is refused (a usage error, exit
status 2), unless ``--resume`` is given: then the summary lists the earlier rounds
(those of its soak.json) and this run's, numbered after every round folder there.

Stopping.  Each round's pytest runs in a session of its own: a terminal's Ctrl-C
reaches the driver alone, which forwards SIGINT or SIGTERM to the round's pytest
once, gives it ``GRACE_SECONDS`` to write its soak-log and report, then kills it
if it is still there.  The summary then lists the rounds done, the stopped one
with what its soak-log holds, under the verdict INTERRUPTED (``"interrupted"`` in
soak.json), and the exit status is 128 plus the signal's number (130, 143).  A
round's pytest still running ``ROUND_MARGIN_SECONDS`` after the soak's end is
stopped so too (SIGTERM), and the round errs: it exceeded its time box.  Once a
round's pytest has ended, what is left of its process group (xdist workers whose
controller a signal ended at once) is killed.

Seeds.  A round's seed is the base of every test's pinned seed
(:mod:`harness.plugins.seeding`), which keeps the example database in use: a round
replays what earlier rounds stored, and its replay line draws the same
examples again (tests/suite/test_soak.py checks both).

The processes of a round keep its time box with :mod:`harness.plugins.timebox` (a pytest plugin).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import json
import math
import os
import re
import secrets
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

from report import known

from .device import pinning

GRACE_SECONDS = 30.0  # a round's pytest, once signalled, has this long to write its soak-log and report
# How long a round's pytest may run past the soak's end before the driver stops it as hung: its minutes count
# from the end of its collection (start-up, tens of seconds on a loaded host: docs/timings.md), the test running
# at the end finishes its example, and a failure found by then is shrunk, for up to Hypothesis's 5 minutes.
ROUND_MARGIN_SECONDS = 10 * 60.0
POLL_SECONDS = 0.2  # how often the driver looks for a signal or an overrun while a round runs
# A round's counts (soak.json's keys) of its tests' outcomes (harness/plugins/soak_log.py's words).
OUTCOMES = {"passed": "passed", "failed": "failed", "error": "error", "known": "known", "skipped": "skipped",
            "not_run": "not run"}
INCOMPLETE = 3  # the exit status of a soak that passed but left tests unrun in every round


class Interruption:
    """The first SIGINT or SIGTERM the driver got, while it handles them (``with interruption.handled():``).

    The handler only notes the signal: :func:`wait_for_round` forwards it to the round's pytest, once (that
    pytest runs in a session of its own, so that a terminal's Ctrl-C reaches the driver alone), and no round
    starts after it.
    """

    def __init__(self) -> None:
        self.signal: signal.Signals | None = None

    def __call__(self, signum: int, frame) -> None:
        self.signal = self.signal or signal.Signals(signum)

    @contextlib.contextmanager
    def handled(self):
        previous = {signum: signal.signal(signum, self) for signum in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield self
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    def exit_status(self) -> int:
        """A shell's status for a process the signal ended: 130 for SIGINT, 143 for SIGTERM."""
        return 128 + self.signal


def wait_for_round(child: subprocess.Popen, deadline: float, interruption: Interruption) -> tuple[str | None, list]:
    """Wait for a round's pytest to end by itself, or stop it: with the driver's signal, or with SIGTERM once
    it runs ROUND_MARGIN_SECONDS past the soak's end.  How it was stopped (None: it was not), and the round's
    problems that follow (each an error of the round)."""
    while True:
        try:
            child.wait(timeout=POLL_SECONDS)
            return None, []
        except subprocess.TimeoutExpired:
            pass
        if interruption.signal is not None:
            return f"interrupted: {stop(child, interruption.signal)}", []
        overrun = time.time() - deadline
        if overrun >= ROUND_MARGIN_SECONDS:
            return "time box", [f"exceeded its time box by {overrun:.0f} s: {stop(child, signal.SIGTERM)}"]


def stop(child: subprocess.Popen, signum: signal.Signals) -> str:
    """Send a round's pytest ``signum``; kill it with its process group if it is still there GRACE_SECONDS
    later.  What was done."""
    child.send_signal(signum)
    try:
        child.wait(timeout=GRACE_SECONDS)
        return f"stopped with {signum.name}"
    except subprocess.TimeoutExpired:
        kill_group(child)
        child.wait()
        return f"stopped with {signum.name}, then SIGKILL {GRACE_SECONDS:g} s later"


def kill_group(child: subprocess.Popen) -> None:
    """SIGKILL to a round's process group: its pytest and xdist workers, or what is left of them (workers
    outlive a controller that a signal ended at once)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(child.pid, signal.SIGKILL)


ROUND_FOLDER = re.compile(r"round-(\d+)")


def round_directory(out: Path, number: int) -> Path:
    return out / f"round-{number}"


def round_numbers(out: Path) -> list[int]:
    """The numbers of the round folders in ``out``, listed in its soak.json or not (a killed run's)."""
    names = [path.name for path in out.iterdir() if path.is_dir()] if out.is_dir() else []
    return sorted(int(match[1]) for match in map(ROUND_FOLDER.fullmatch, names) if match)


def refuse_earlier_rounds(parser: argparse.ArgumentParser, out: Path, resume: bool) -> None:
    """A usage error where ``out`` holds an earlier run's rounds and ``--resume`` is not given: their folders
    would be overwritten, or mixed with this run's."""
    numbers = round_numbers(out)
    if numbers and not resume:
        parser.error(f"--out: {out} holds {len(numbers)} round(s) of an earlier run (round-{numbers[0]} to "
                     f"round-{numbers[-1]}); add --resume to keep them in this run's summary and number this "
                     "run's rounds after them, or give another --out")


def read_summary(out: Path) -> dict:
    """The soak.json in ``out``: the rounds it lists; none where there is no soak.json."""
    path = out / "soak.json"
    return json.loads(path.read_text()) if path.exists() else {"rounds": []}


def run_round(number: int, args: argparse.Namespace, pytest_args: list[str], deadline: float, env: dict,
              interruption: Interruption, fixed: bool = True) -> dict:
    """Round ``number``: a pytest of the nightly profile with a seed of its own, its fixed inputs run only where
    ``fixed`` (a night's first round: the later ones draw, and judge no input the first judged alike)."""
    directory = round_directory(args.out, number)
    directory.mkdir(parents=True, exist_ok=True)
    round_seed = secrets.randbelow(2**32)
    minutes = (deadline - time.time()) / 60
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--hypothesis-profile", "nightly",
               f"--soak-seed={round_seed}", f"--soak-deadline={deadline}", f"--soak-minutes={minutes:.3f}",
               # option=value: pytest finds its rootdir before it knows the suite's options, and would take a
               # folder given as a separate argument, outside the checkout, for the tests' own
               f"--soak-log={directory / 'soak-log.json'}", f"--accuracy-report={directory}",
               *([f"--soak-examples-per-test={args.examples_per_test}"] if args.examples_per_test else []),
               f"--soak-fixed={'run' if fixed else 'skip'}", *pytest_args]
    started = time.time()
    with open(directory / "pytest.log", "w") as log:
        child = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        stopped, problems = wait_for_round(child, deadline, interruption)
    kill_group(child)  # nothing of the round outlives it
    code = child.returncode
    tests = {}
    if (directory / "soak-log.json").exists():
        tests = json.loads((directory / "soak-log.json").read_text())["tests"]
    counts = {key: sum(t["outcome"] == outcome for t in tests.values()) for key, outcome in OUTCOMES.items()}
    if stopped is None:
        problems = round_problems(code, counts, directory / "pytest.log")
    counts["error"] += len(problems)
    return {"round": number, "seed": round_seed, "started": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(started)),
            "minutes": round((time.time() - started) / 60, 2), "exit_code": code, "stopped": stopped, **counts,
            "problems": problems,
            "examples": sum(t["examples"] for t in tests.values()),
            "examples_per_test": {test: t["examples"] for test, t in sorted(tests.items())},
            # Of those, the inputs drawn (the rest are fixed: the same every night), per test.
            "drawn": sum(t.get("drawn", 0) for t in tests.values()),
            "drawn_per_test": {test: t.get("drawn", 0) for test, t in sorted(tests.items())},
            "per_kernel": per_kernel(tests, directory / "accuracy.json"),
            "failures": [{"test": test, "outcome": t["outcome"], "report": excerpt(t.get("failure", ""))}
                         for test, t in sorted(tests.items()) if t["outcome"] in ("failed", "error")],
            "known_failures": [{"test": test, "kernel": t.get("kernel"), "findings": t["findings"]}
                               for test, t in sorted(tests.items()) if t["outcome"] == "known"],
            "fixed_findings": [{"test": test, "kernel": t.get("kernel"), "findings": t["fixed"]}
                               for test, t in sorted(tests.items()) if t.get("fixed")],
            "tests_reached": sorted(test for test, t in tests.items() if t["outcome"] != "not run"),
            "tests_not_run": sorted(test for test, t in tests.items() if t["outcome"] == "not run"),
            "replay": f"SOFTMAX_SUITE_EXAMPLES={shlex.quote(env['SOFTMAX_SUITE_EXAMPLES'])} " + shlex.join(
                [sys.executable, "-m", "pytest", "--hypothesis-profile", "nightly", f"--soak-seed={round_seed}",
                 *pytest_args]),
            "log": str(directory / "pytest.log")}


def no_depth() -> dict:
    """A kernel's depth in a soak before any test of it ran: tests run, examples, test-seconds, elements judged."""
    return {"tests": 0, "examples": 0, "seconds": 0.0, "elements": 0}


def per_kernel(tests: dict, report: Path) -> dict:
    """Per kernel judged in a round: its tests that ran, their examples and seconds, and the elements its accuracy
    records judged (the round's report)."""
    kernels: dict[str, dict] = {}
    for t in tests.values():
        if t.get("kernel") and t["outcome"] not in ("skipped", "not run"):
            k = kernels.setdefault(t["kernel"], no_depth())
            k["tests"] += 1
            k["examples"] += t["examples"]
            k["seconds"] = round(k["seconds"] + t["duration"], 2)
    records = json.loads(report.read_text())["records"] if report.exists() else []
    for record in records:
        if record["kernel"] in kernels:
            kernels[record["kernel"]]["elements"] += math.prod(record["shape"])
    return dict(sorted(kernels.items()))


def round_problems(code: int, counts: dict, log: Path) -> list[str]:
    """What made a round err beyond its tests' own failures and errors (each counts as an error of the round)."""
    if code not in (0, 1, 5):  # 1: tests failed (counted); 5: no test ran, or a kernel none judged (below)
        return [f"broke: pytest ended with exit status {code}; see {log}"]
    if not (counts["passed"] or counts["failed"] or counts["error"] or counts["known"]):
        why = f"all {counts['skipped']} of its tests were skipped" if counts["skipped"] else \
            f"pytest ran no test (exit status {code})"
        return [f"tested nothing: {why}; see {log}"]
    if code == 5:
        return [f"tested nothing of a kernel it named: every test of it was skipped (NOTHING TESTED of it in {log})"]
    return []


def notes(record: dict) -> list[str]:
    """What the summary says of a round beside its counts: its problems, else how the driver stopped it (a round
    resumed from an older driver's soak.json has neither)."""
    return record.get("problems") or ([record["stopped"]] if record.get("stopped") else [])


def excerpt(text: str) -> str:
    """The lines of a failure report that say what failed: pytest's E lines, and the end."""
    lines = text.splitlines()
    errors = [line for line in lines if line.startswith("E ")][:40]
    return "\n".join(errors + ["..."] + lines[-15:])


def verdict(rounds: list[dict], interrupted: signal.Signals | None) -> tuple[str, str]:
    """The soak's verdict word, and the line that explains it."""
    if interrupted is not None:
        return "INTERRUPTED", (f"by {interrupted.name} after {len(rounds)} round(s), listed below with what they "
                               "ran: not a verdict on the time box")
    failed = sum(bool(r["failed"] or r["error"]) for r in rounds)
    failures = f"failures: {said}" if (said := known.said(*failures_of(rounds))) else ""
    if failed:
        return "FAILED", f"{failed} of {len(rounds)} round(s) failed or erred" + (f"; {failures}" if failures else "")
    unrun = never_run(rounds)
    if not sum(r.get("drawn", 0) for r in rounds) and any(r.get("examples") for r in rounds):
        return "INCOMPLETE", (f"{len(rounds)} round(s) drew no input: every example run was a fixed one, the same "
                              f"every night; {failures or 'nothing failed or erred'} of what ran; give the tests "
                              "more examples (--examples-per-test counts those drawn) or the soak more minutes")
    if unrun:
        return "INCOMPLETE", (f"{len(unrun)} test(s) not run in any of {len(rounds)} round(s): the time box ended "
                              f"before they started ({', '.join(unrun[:3])}{', ...' if len(unrun) > 3 else ''}); "
                              f"{failures or 'nothing failed or erred'} of what ran; give the soak more minutes")
    return "PASSED", f"{len(rounds)} round(s), {failures or 'nothing failed or erred'}{fewest_examples(rounds)}"


def failures_of(rounds: list[dict]) -> tuple[int, list[dict], list[dict]]:
    """The rounds' failed and erred tests, their known failures and their fixed findings (:func:`report.known.counted`
    takes them)."""
    return (sum(r["failed"] + r["error"] for r in rounds), [k for r in rounds for k in r.get("known_failures", [])],
            [f for r in rounds for f in r.get("fixed_findings", [])])


def counted_failures(rounds: list[dict]) -> str:
    """"1 new, 5 known (...), 1 fixed (...)": the rounds' failures, known findings' and fixed ones apart."""
    return known.counted(*failures_of(rounds))


def never_run(rounds: list[dict]) -> list[str]:
    """The tests that a round's time box ended before they started, in every round that collected them (a test
    that a round reached, and that skipped itself there, was run)."""
    reached = {test for r in rounds for test in r.get("tests_reached", [])}
    return sorted({test for r in rounds for test in r.get("tests_not_run", [])} - reached)


def fewest_examples(rounds: list[dict]) -> str:
    """How thin the search went: the fewest inputs a Hypothesis test drew in a round (a time box that ends a slow
    kernel's tests after an example or two still passes, and says so here), beside the fixed ones it ran."""
    ran = [(r.get("drawn_per_test", {}).get(test, 0), count, test, r["round"]) for r in rounds
           for test, count in r.get("examples_per_test", {}).items() if count]
    if not ran:
        return ""
    drawn, count, test, number = min(ran)
    return (f"; the fewest inputs a test drew in a round: {drawn}, beside {count - drawn} fixed ({test}, round "
            f"{number})")


def write_summary(out: Path, rounds: list[dict], examples_dir: Path, pytest_args: list[str],
                  interrupted: signal.Signals | None) -> str:
    """soak.json and soak.md; the verdict word."""
    totals = {key: sum(r.get(key, 0) for r in rounds) for key in (*OUTCOMES, "examples", "drawn")}
    word, why = verdict(rounds, interrupted)
    out.mkdir(parents=True, exist_ok=True)
    (out / "soak.json").write_text(json.dumps({"verdict": word, "interrupted": interrupted and interrupted.name,
                                               "rounds": rounds, "totals": totals,
                                               "examples_dir": str(examples_dir)}, indent=1) + "\n")
    lines = ["# Soak", "", f"**{word}** {why}.", "",
             f"pytest arguments: `{shlex.join(pytest_args)}`; examples database: `{examples_dir}`", "",
             "| round | seed | minutes | exit | passed | failed | errors | known | skipped | not run | examples | drawn |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['round']} | {r['seed']} | {r['minutes']} | {r['exit_code']} | {r['passed']} | {r['failed']} | "
              f"{r['error']} | {r.get('known', 0)} | {r['skipped']} | {r.get('not_run', 0)} | {r['examples']} | "
              f"{r.get('drawn', 0)} |" for r in rounds]
    lines += ["", f"Totals: {totals['passed']} passed, {totals['failed']} failed, {totals['error']} errors, "
                  f"{totals['known']} known failures, {totals['skipped']} skipped, {totals['not_run']} not run "
                  f"(the time box ended before they started); {totals['examples']} examples run, {totals['drawn']} "
                  "of them drawn (the others fixed: the same every night).", ""]
    lines += drawn_table(rounds)
    lines += kernel_table(rounds)
    noted = [f"* round {r['round']} {note}" for r in rounds for note in notes(r)]
    noted += [f"* round {r['round']}: NOT RUN (the time box ended before they started): {', '.join(r['tests_not_run'])}"
              for r in rounds if r.get("tests_not_run")]
    noted += [f"* round {r['round']}: known failure: `{k['test']}`: {', '.join(k['findings'])}"
              for r in rounds for k in r.get("known_failures", [])]
    lines += (noted + [""]) if noted else []
    for r in rounds:
        for failure in r["failures"]:
            lines += [f"## {failure['outcome']}: `{failure['test']}` (round {r['round']}, seed {r['seed']})", "",
                      f"Replay: `{r['replay']}`", "", "```", failure["report"], "```", ""]
    lines += [f"The next gate replays what this soak found: `SOFTMAX_SUITE_EXAMPLES={examples_dir} "
              "python -m pytest ...`", ""]
    (out / "soak.md").write_text("\n".join(lines))
    return word


def drawn_table(rounds: list[dict]) -> list[str]:
    """soak.md's inputs per test over the rounds: how many it drew, and how many fixed ones it ran."""
    tests: dict[str, list[int]] = {}
    for r in rounds:
        for test, count in r.get("examples_per_test", {}).items():
            drawn = r.get("drawn_per_test", {}).get(test, 0)
            tally = tests.setdefault(test, [0, 0])
            tally[0], tally[1] = tally[0] + drawn, tally[1] + count - drawn
    ran = {test: tally for test, tally in tests.items() if sum(tally)}
    if not ran:
        return []
    return ["| test | drawn | fixed |", "|---|---|---|",
            *(f"| `{test}` | {drawn} | {fixed} |" for test, (drawn, fixed) in sorted(ran.items())), ""]


def kernel_table(rounds: list[dict]) -> list[str]:
    """soak.md's depth per kernel over the rounds: tests run, examples, elements judged, test-seconds, and examples
    per test-minute (the time share goes to compiling and to large inputs as well as to examples)."""
    totals: dict[str, dict] = {}
    for r in rounds:
        for kernel, k in r.get("per_kernel", {}).items():
            total = totals.setdefault(kernel, no_depth())
            for key in total:
                total[key] += k[key]
    if not totals:
        return []
    lines = ["| kernel | tests run | examples | elements judged | test-seconds | examples per test-minute |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {kernel} | {k['tests']} | {k['examples']} | {k['elements']} | {k['seconds']:.0f} | "
              f"{60 * k['examples'] / k['seconds'] if k['seconds'] else 0:.1f} |" for kernel, k in totals.items()]
    return [*lines, ""]


def positive_minutes(text: str) -> float:
    """The type of ``--minutes``: a time box of a finite number of minutes above 0."""
    try:
        minutes = float(text)
    except ValueError:
        minutes = math.nan
    if not (math.isfinite(minutes) and minutes > 0):
        raise argparse.ArgumentTypeError(f"the time box must be a finite number of minutes above 0, not {text!r}")
    return minutes


def positive_count(text: str) -> int:
    """The type of ``--parallel``: a whole number above 0."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"a whole number above 0, not {text!r}")
    return int(text)


def main(argv: list[str] | None = None, interruption: Interruption | None = None) -> int:
    """The driver; ``interruption``: one its caller already handles (else it handles SIGINT and SIGTERM itself)."""
    argv = sys.argv[1:] if argv is None else argv
    ours, pytest_args = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
    parser = argparse.ArgumentParser(prog="python -m harness.soak", description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=positive_minutes, required=True,
                        help="the time box: a finite number of minutes above 0")
    parser.add_argument("--out", type=Path, default=Path("soak"), help="where rounds and the summary go")
    parser.add_argument("--examples", type=Path, help="Hypothesis's example database (default: "
                                                       "$SOFTMAX_SUITE_EXAMPLES, else OUT/examples)")
    parser.add_argument("--resume", action="store_true",
                        help="add rounds to those OUT holds from an earlier run (their summary lists them all); "
                             "without it, such an OUT is refused")
    parser.add_argument("--examples-per-test", type=positive_count, metavar="N",
                        help="every Hypothesis test of a round draws N examples (its fixed inputs, which the first "
                             "round runs and the others do not, apart), the round's end its only time limit: equal "
                             "examples per kernel, not equal time (default: equal shares of the round's time)")
    parser.add_argument("--parallel", type=positive_count, default=1, metavar="P",
                        help="run P rounds at once, each with its own seed (seed shards): where the tests are fewer "
                             "than the workers, P rounds of -n W/P keep all W busy (default 1)")
    parser.add_argument("--rounds", type=positive_count, metavar="R",
                        help="at most R rounds, however much of the time box is left (with --examples-per-test: "
                             "a fixed amount of search, the minutes only its limit on a slow host; default: rounds "
                             "until the time box is spent)")
    args = parser.parse_args(ours)
    refuse_earlier_rounds(parser, args.out, args.resume)
    if interruption is None:
        with Interruption().handled() as interruption:
            return run_soak(args, pytest_args, interruption)
    return run_soak(args, pytest_args, interruption)


def run_soak(args: argparse.Namespace, pytest_args: list[str], interruption: Interruption) -> int:
    """Rounds until the time box is spent or a signal comes, their summary, and the exit status."""
    examples_dir = args.examples or Path(os.environ.get("SOFTMAX_SUITE_EXAMPLES") or args.out / "examples")
    env = {**os.environ, "SOFTMAX_SUITE_EXAMPLES": str(examples_dir.resolve())}
    env.pop("CI", None)  # the nightly profile, not the ci one
    if args.parallel > 1:  # rounds at once share the CPU threads, as each round's workers share its own
        env["OMP_NUM_THREADS"] = str(max(1, pinning.cpu_threads(env) // args.parallel))
    deadline = time.time() + args.minutes * 60
    earlier = read_summary(args.out)["rounds"] if args.resume else []
    first = max(round_numbers(args.out) + [r["round"] for r in earlier], default=0) + 1
    done = []
    rounds = args.rounds or math.inf
    # A round needs a minute.
    while interruption.signal is None and len(done) < rounds and (not done or deadline - time.time() >= 60):
        numbers = range(first + len(done), first + len(done) + min(args.parallel, rounds - len(done)))
        with concurrent.futures.ThreadPoolExecutor(len(numbers)) as pool:
            batch = list(pool.map(lambda n: run_round(n, args, pytest_args, deadline, env, interruption,
                                                      fixed=n == first), numbers))
        for r in batch:
            print(f"round {r['round']}: seed {r['seed']}, {r['minutes']} min, {r['passed']} passed, {r['failed']} "
                  f"failed, {r['error']} errors, {r['examples']} examples ({r['drawn']} drawn)",
                  *(f"; {note}" for note in notes(r)),
                  sep="", flush=True)
        done += batch
    word = write_summary(args.out, earlier + done, examples_dir, pytest_args, interruption.signal)
    print(f"soak: {word}, {len(done)} round(s)" + (f" after {len(earlier)} earlier" if earlier else "")
          + f"; summary in {args.out / 'soak.md'}; examples in {examples_dir}")
    if interruption.signal is not None:
        return interruption.exit_status()
    return 1 if word == "FAILED" else INCOMPLETE if word == "INCOMPLETE" else 0


if __name__ == "__main__":
    sys.exit(main())
