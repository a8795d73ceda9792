"""What changed from one accuracy report to the next: the rules ``python -m report compare`` and the nightly job
(:mod:`harness.nightly`) share.

Reports are compared under the regression gate's rules and slack (:mod:`report.baseline`), and only on inputs
both judged, since statistics of other inputs say nothing of a kernel:

* two reports of one run's draws (the same draws fingerprint: a pinned profile, ``ci`` or ``mutation``, the same
  seed base, suite, Hypothesis version and example database) are compared whole, every category;
* any two others (a ``dev`` run's random draws, which no other run draws again, as the README's runs of a kernel
  make them; a night, merged from rounds each seeded anew; runs of other profiles, seeds or suite versions) on
  their *fixed* records, those of the inputs every run draws alike (the coverage sweep and the regression
  catalog: ``"inputs": "fixed"``), matched by kernel, operation and recipe, of those both reports judged: a
  nightly round's time box, or a failure, ends a test's sweep early, and an input one report did not reach says
  nothing of a change in the kernel.  A kernel only one report holds keeps its fixed records there: it vanished,
  or it is new.

Two reports that have nothing to compare (no input judged alike, or a run that died before it wrote its report)
are refused with what each drew and what would compare.  A report whose run did not run to its end (its
verdict, or a round's of a night, FAILED, INTERRUPTED, or INCOMPLETE: tests a time box left unrun; a failed or
erred test ends its examples, ``-x`` the run) judged only the inputs it reached, so its numbers can look better than a whole run's: the comparison says
so before anything else and shows no improvement between the two; regressions are shown and still count.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from . import artifacts, baseline, files, invariances
from .summary import categorize
from .text import printable

FIXED = "fixed"  # a record's "inputs" for an input every run draws alike
GATE_PROFILE = baseline.PROFILE  # the pinned profile a run is told to rerun with when neither report gives one
# A verdict's parts saying that a run stopped before its end; a night's verdict joins its rounds' with "; ".
STOPPED = re.compile(r"(?:^|; )((?:FAILED|INTERRUPTED|INCOMPLETE)\b[^;]*)")  # INCOMPLETE: tests left unrun
SECTIONS = (("regressed", ("regressed", "disappeared", "lost")), ("improved", ("improved", "gained")),
            ("new", ("new", "not gated")))


class Refused(Exception):
    """What the command was given cannot be compared; the message says why."""


def load(path: Path) -> dict:
    """The report at ``path``: an ``accuracy.json`` (or a night's ``fixed.json``), or the folder holding one (an
    ``--accuracy-report`` folder, a night's ``--out``)."""
    file = path / "accuracy.json" if path.is_dir() else path
    try:
        document = files.read_json(file)
        categories(document)  # what every use reads: a document without it is no report
        return document
    except (OSError, files.UnreadableJSON, KeyError, TypeError) as error:
        raise Refused(f"{file}: not an accuracy.json report ({error}); give an accuracy.json, the --accuracy-report "
                      "folder holding one, or a night's folder (python -m harness.nightly --out)") from None


def categories(document: dict) -> tuple[dict, dict, dict]:
    """A report's run, categories and invariances held (reports older than the invariances have none)."""
    return document["run"], document["categories"], invariances.held(document.get("invariances", {}))


@dataclass(frozen=True)
class Pair:
    """Two reports as they are compared: ``old`` and ``new`` hold the records and categories compared, ``basis``
    says which, in words."""

    old: dict
    new: dict
    old_name: str
    new_name: str
    basis: str


def one_runs_draws(run: dict) -> bool:
    """Whether a report's draws fingerprint names the inputs all its statistics came from: a night merges rounds
    each seeded anew and keeps its first round's; a run of random draws has none."""
    return run.get("draws") is not None and "rounds" not in run


def drew_alike(old_run: dict, new_run: dict) -> bool:
    """Whether every statistic of both reports came from the same inputs."""
    return one_runs_draws(old_run) and one_runs_draws(new_run) and old_run["draws"] == new_run["draws"]


def drawn(run: dict) -> str:
    """How a report's inputs were drawn, in words."""
    profile = f"profile {run.get('profile')}"
    if "rounds" in run:
        return f"{profile}, a night of {run['rounds']} round(s) each seeded anew"
    if run.get("draws") is None:
        return f"{profile}, seeds not pinned"
    return f"{profile}, seeds {run.get('seed')}"


def fixed_inputs(document: dict) -> dict[tuple, dict]:
    """A report's records of the inputs every run draws alike, one per kernel, operation and recipe (a night's
    rounds each judge them)."""
    return {(r["kernel"], r["op"], r.get("replay")): r for r in document.get("records", [])
            if r.get("inputs") == FIXED}


def with_records(document: dict, records: list[dict]) -> dict:
    """``document`` holding only ``records``, and their categories."""
    return {**document, "records": records, "categories": categorize(records)}


def judged_alike(old_document: dict, new_document: dict) -> tuple[dict, dict]:
    """Both reports' fixed records on the inputs both judged, and the fixed records of a kernel only one of them
    holds (it vanished, or it is new), with their categories."""
    old, new = fixed_inputs(old_document), fixed_inputs(new_document)
    old_kernels, new_kernels = set(old_document["categories"]), set(new_document["categories"])
    kept_old = [r for key, r in sorted(old.items()) if key in new or key[0] not in new_kernels]
    kept_new = [r for key, r in sorted(new.items()) if key in old or key[0] not in old_kernels]
    return with_records(old_document, kept_old), with_records(new_document, kept_new)


def judged_by_all(documents: list[dict]) -> tuple[list[dict], str]:
    """The reports as a trend compares them, and on what, in words: whole when each drew the inputs of the one
    before it, else their fixed records of the inputs every one of them judged."""
    if all(drew_alike(a["run"], b["run"]) for a, b in zip(documents, documents[1:])):
        return documents, "every record"
    common = set.intersection(*(set(fixed_inputs(document)) for document in documents))
    return ([with_records(d, [r for key, r in sorted(fixed_inputs(d).items()) if key in common]) for d in documents],
            f"the {len(common)} fixed input(s) every report judged")


def comparable(old_document: dict, new_document: dict, old_name, new_name) -> Pair:
    """The two reports as they compare (whole when they drew the same inputs, else on the fixed inputs both
    judged); Refused, saying what would compare, when they have nothing to compare."""
    old_name, new_name = str(old_name), str(new_name)
    for name, document in ((old_name, old_document), (new_name, new_document)):
        if str(document.get("verdict", "")).startswith(artifacts.INCOMPLETE):
            raise Refused(f"{name}: its run has not finished, or died before it wrote its report (the INCOMPLETE "
                          "placeholder): nothing to compare; compare the report of a run that ended")
    old_run, new_run = old_document["run"], new_document["run"]
    if drew_alike(old_run, new_run):
        return Pair(old_document, new_document, old_name, new_name,
                    f"every record: both drew the same inputs ({drawn(old_run)})")
    old, new = judged_alike(old_document, new_document)
    if not (old["records"] or new["records"]):
        raise Refused(f"{old_name} and {new_name} cannot be compared: "
                      f"{drawn_apart(old_run, new_run, old_name, new_name)}, and "
                      f"{no_fixed_alike(old_document, new_document, old_name, new_name)}; comparable: "
                      f"{remedy(old_run, new_run, old_name, new_name)}")
    both = len(fixed_inputs(old_document).keys() & fixed_inputs(new_document).keys())
    return Pair(old, new, old_name, new_name,
                f"the {both} fixed input(s) both judged (the coverage sweep and regression catalog every run draws "
                f"alike), of {len(old_document.get('records', []))} record(s) in {old_name} and "
                f"{len(new_document.get('records', []))} in {new_name}; the others were drawn apart: "
                f"{drawn_apart(old_run, new_run, old_name, new_name)}")


def drawn_apart(old_run: dict, new_run: dict, old_name: str, new_name: str) -> str:
    """Why two reports' statistics came from other inputs, in words."""
    runs = ((old_name, old_run), (new_name, new_run))
    random = [f"{name} drew random inputs ({drawn(run)})" for name, run in runs if not one_runs_draws(run)]
    if random:
        return " and ".join(random) + ", which no other run draws again"
    return ("the suite draws other inputs in each (" + "; ".join(
        f"{name}: {drawn(run)}, draws fingerprint {run['draws']}" for name, run in runs)
        + ": other profiles, seeds, strategies, Hypothesis versions or example databases)")


def no_fixed_alike(old_document: dict, new_document: dict, old_name: str, new_name: str) -> str:
    """Why two reports judged no fixed input alike, in words."""
    without = [name for name, document in ((old_name, old_document), (new_name, new_document))
               if not fixed_inputs(document)]
    if without:
        return (f"{' and '.join(without)} {'hold' if len(without) > 1 else 'holds'} no record of a fixed input (the "
                "coverage sweep and regression catalog the accuracy tests open with: a report of other tests, or "
                "older than the records' \"inputs\")")
    old_backend, new_backend = old_document["run"].get("backend"), new_document["run"].get("backend")
    where = "" if old_backend == new_backend else f"{old_name} ran on {old_backend}, {new_name} on {new_backend}: "
    return f"they judged no fixed input alike ({where}other devices, kernels, operations or recipes)"


def remedy(old_run: dict, new_run: dict, old_name: str, new_name: str) -> str:
    """What would make two reports compare, in words: the run to repeat so that both draw the same inputs."""
    runs = ((old_name, old_run), (new_name, new_run))
    pinned = [one_runs_draws(run) for _, run in runs]
    if all(pinned) and old_run.get("profile") == new_run.get("profile"):
        return ("rerun both from one suite version and Hypothesis version, with the same seeds and example database "
                "(SOFTMAX_SUITE_EXAMPLES) or none: both then draw the same inputs and compare whole")
    kept = pinned.index(True) if any(pinned) else 0  # the report whose draws the other is to repeat
    profile = runs[kept][1].get("profile") if pinned[kept] else GATE_PROFILE
    rerun = [name for index, (name, _) in enumerate(runs) if index != kept or not pinned[index]]
    device = f" --device {runs[kept][1].get('backend')}" if old_run.get("backend") != new_run.get("backend") else ""
    return (f"rerun {' and '.join(rerun)} with --hypothesis-profile {profile}{device} (seeds pinned, as a gated run "
            "draws them): both then draw the same inputs and compare whole; or compare reports of the same kernels "
            "and device, which judge the same fixed inputs")


def stopped_short(document: dict) -> str | None:
    """How a report's run stopped before its end (its verdict's words, or a night's first round's that did), or
    None when it ran to its end."""
    stopped = STOPPED.findall(str(document.get("verdict", "")))
    if stopped:
        return stopped[0] + (f"; {len(stopped) - 1} more round(s) stopped so" if len(stopped) > 1 else "")
    return "interrupted" if document["run"].get("interrupted") else None


def changes(pair: Pair) -> list[baseline.Finding]:
    """Print what changed from one report to the next and on what inputs, after a warning for each that stopped
    before its end (then no improvement is shown); the findings."""
    stopped = {name: why for name, document in ((pair.old_name, pair.old), (pair.new_name, pair.new))
               if (why := stopped_short(document))}
    for name, why in stopped.items():
        print(f"WARNING: {name} did not run to its end ({why}): its categories are of the inputs it reached before "
              "it stopped, which can look better than a whole run's; improvements are not shown, regressions are")
    old_run, old, old_held = categories(pair.old)
    new_run, new, new_held = categories(pair.new)
    reference = baseline.build(old, backend=old_run.get("backend"), profile=old_run.get("profile"), run=old_run)
    findings = (baseline.compare(reference["kernels"], new) + baseline.vanished(reference["kernels"], new)
                + baseline.compare_invariances(old_held, new_held))
    print(f"old: {pair.old_name} ({old_run.get('git_commit')}, {old_run.get('started')})")
    print(f"new: {pair.new_name} ({new_run.get('git_commit')}, {new_run.get('started')})")
    print(f"compared on {pair.basis}")
    for title, verdicts in SECTIONS:
        if title == "improved" and stopped:
            print(f"\nimproved: not shown ({' and '.join(stopped)} did not run to its end)")
            continue
        rows = [f for f in findings if f.verdict in verdicts]
        print(f"\n{title}: {len(rows)}")
        for line in baseline.table(rows, only_failures=False):
            print(printable("  " + line))  # the kernels' names
    return findings


def trend(documents: list[dict]) -> list[str]:
    """A title, then rows kernel, category, metric and the metric in each report, for what changed along the way
    (on the inputs every report judged alike)."""
    compared, basis = judged_by_all(documents)
    series: dict[tuple[str, str, str], list[str]] = {}
    for index, document in enumerate(compared):
        for kernel, groups in document["categories"].items():
            for key, stats in groups.items():
                for metric in baseline.SLACK:
                    value = stats["kernel"][metric]
                    cells = series.setdefault((kernel, key, metric), ["-"] * len(compared))
                    cells[index] = "-" if value is None else f"{value:{baseline.SHOWN}}"
    stopped = [f"#{i + 1}" for i, document in enumerate(documents) if stopped_short(document)]
    caveat = f"; {', '.join(stopped)} did not run to its end: of the inputs it reached" if stopped else ""
    rows = [("kernel", "category", "metric", *(f"#{i + 1}" for i in range(len(compared))))]
    rows += [(*key, *cells) for key, cells in sorted(series.items()) if len(set(cells)) > 1]
    return [f"trend (what changed along the way, on {basis}{caveat}):",
            *("  " + line for line in baseline.aligned(rows))]
