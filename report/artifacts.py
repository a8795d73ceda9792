"""The accuracy report on disk: accuracy.json, summary.md, PNG plots and an offline index.html.

The folder is checked when the run starts (:func:`prepare`): a report that
cannot be written fails the run before any test, not after the whole of it.
The artifacts an earlier run left there are removed, and placeholders say
INCOMPLETE until the run's own replace them, so that a run that dies leaves
no verdict of another behind.  Every file is written to a temporary name and
renamed into place (:func:`report.files.replace_file`): a reader never sees
half a report, a symbolic link planted under an artifact's name is replaced,
never followed, and the files are as readable as the umask allows.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from . import baseline, columns
from . import invariances as invariance_table
from . import known as known_failures
from . import league
from .figures import pyplot
from .files import replace_file, write_text
from .summary import BACKWARD_CANCELS, INTERPRETER_BF16, ULP_BUCKETS, Category, has_backward, interpreter_truncates_bf16
from .text import markdown_block, markdown_code, markdown_text

SCHEMA_VERSION = 1
PLOTS = ("ulp_histograms.png", "max_ulp_by_row_length.png", "kernel_vs_torch.png")
ARTIFACTS = ("accuracy.json", "summary.md", "index.html", *PLOTS)
INCOMPLETE = "INCOMPLETE: this run has not finished, or died before it could write its report"


class ReportError(ValueError):
    """The report folder cannot be written."""


def prepare(directory: Path, calls: Path | None = None) -> None:
    """Check that ``directory`` can take a report, remove an earlier run's artifacts, and leave placeholders."""
    if directory.exists() and not directory.is_dir():
        raise ReportError(f"--accuracy-report {directory}: not a folder")
    try:
        directory.mkdir(parents=True, exist_ok=True)
        write_text(directory / ".write-check", "")
        (directory / ".write-check").unlink()
        for name in ARTIFACTS:
            (directory / name).unlink(missing_ok=True)  # a link is removed, not its target
    except OSError as error:
        raise ReportError(f"--accuracy-report {directory}: cannot write there ({error})") from None
    where = f"; the breadcrumbs of the kernel calls in progress are in {calls}" if calls else ""
    line = INCOMPLETE + where
    write_text(directory / "summary.md", f"# Softmax accuracy report\n\n**{line}**\n")
    write_text(directory / "index.html", "<!doctype html><html><head><meta charset='utf-8'><title>Softmax accuracy "
                                         f"report</title></head><body><p>{html.escape(line)}</p></body></html>\n")
    write_text(directory / "accuracy.json", json.dumps({"schema_version": SCHEMA_VERSION, "run": {}, "verdict": line,
                                                        "failures": [], "categories": {}, "records": []}) + "\n")


def headings() -> list[str]:
    """The headings of summary.md's and index.html's tables of categories."""
    return ["category", *(column.heading for column in columns.of(columns.SUMMARY))]


def category_rows(groups: dict) -> list[list]:
    """A row per category: its key, then its statistics as summary.md and index.html show them."""
    return [[key, *columns.cells(columns.SUMMARY, stats)] for key, stats in groups.items()]


def failure(test: str, when: str, text: str, replay: str | None = None) -> dict:
    """A failed test for the reports: its id, the first line of what it said, and the replay command the suite
    attached to it (never one read from the text, which a kernel's own messages could forge)."""
    lines = [line.strip().removeprefix("E").strip() for line in text.splitlines()]
    lines = [line for line in lines if line and line != test  # the one-screen failure's first line is the test id
             and not (line.startswith("[gw") and " -- Python " in line)]  # xdist's
    said = [line for line in lines if re.match(r"[A-Z]\w*: ", line) or line.startswith("worker ")
            or "Error:" in line]
    return {"test": test, "when": when, "headline": (said or lines or [""])[0][:400], "replay": replay}


def not_run(outcomes: dict[str, str]) -> int:
    """The tests a soak round's time box ended before they started, of a run's outcomes (test id -> outcome)."""
    return sum(outcome == "not run" for outcome in outcomes.values())


def verdict(passed: int, failures: list[dict], findings: list, baseline: Path | None, interrupted: bool = False, *,
            known: list[dict] = (), fixed: list[dict] = (), not_run: int = 0, judged: set[str] | None = None) -> str:
    """The report's first line: did the run pass, and what did the gate say.  ``known``: the failures a known
    finding explains, ``fixed``: the known findings whose test passed (failures too), each ``{"test", "kernel",
    "findings"}``; ``not_run``: the tests a soak round's time box ended before they started; ``judged``: the kernels
    the gate judged (none: it says so, never "no regression")."""
    failing = sum(f.fails for f in findings)
    gate = ("no baseline given" if baseline is None else
            f"{failing} regression(s) against {baseline.name}" if failing else
            "no verdict (the run was interrupted)" if interrupted else
            f"nothing judged against {baseline.name}" if judged is not None and not judged else
            f"no regression against {baseline.name}")
    word = ("FAILED" if failures or failing else "INTERRUPTED" if interrupted else
            "NOTHING TESTED" if not (passed or known) else "INCOMPLETE" if not_run else "PASSED")
    counted = f" ({said})" if (said := known_failures.said(len(failures), known, fixed)) else ""
    unrun = f", {not_run} not run (the time box ended before they started)" if not_run else ""
    return f"{word}: {passed} test(s) passed, {len(failures)} failed{counted}{unrun}; accuracy gate: {gate}"


def slug(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text)


@dataclass(frozen=True)
class Report:
    """What a report's files say (accuracy.json, summary.md, index.html, the plots): a run's, or its shards'
    merged (:mod:`report.merge`)."""
    # The run's metadata: versions, device, profile, seeds, draws fingerprint, git commit, workers.
    run: dict
    # Its first line: the verdict (:func:`verdict`).
    verdict: str
    # The failed tests, each {test, when, headline, replay} (:func:`failure`).
    failures: list[dict]
    # kernel -> category key ("op/dtype/values") -> statistics (report.summary.categorize).
    categories: dict
    # Every record, sorted by test and example.
    records: list
    # The tests expected to record accuracy that left no record.
    missing: list
    # The gate's table of findings (report.baseline.table); empty where no baseline was given.
    gate: list[str]
    # kernel -> invariance -> {promised, held, counterexample, tests} (report.invariances.combine).
    invariances: dict
    # test id -> outcome: passed, failed, skipped, known, not run.
    outcomes: dict = field(default_factory=dict)
    # The kernel calls running when the run was interrupted.
    in_progress: list = field(default_factory=list)
    # The failures a known finding explains, and the known findings whose test passed, each {test, kernel, findings}.
    known: list = field(default_factory=list)
    fixed: list = field(default_factory=list)


def write_json(directory: Path, report: Report) -> Path:
    document = {"schema_version": SCHEMA_VERSION, "run": report.run, "verdict": report.verdict,
                "failures": report.failures, "categories": report.categories, "invariances": report.invariances,
                "missing_records": report.missing, "tests": report.outcomes, "in_progress": report.in_progress,
                "records": report.records, "known": list(report.known), "fixed": list(report.fixed)}
    return write_text(directory / "accuracy.json", json.dumps(document, indent=1, sort_keys=True) + "\n")


def write_markdown(directory: Path, report: Report) -> Path:
    run, verdict_line, failures, categories = report.run, report.verdict, report.failures, report.categories
    missing, gate, invariances, in_progress = report.missing, report.gate, report.invariances, report.in_progress
    lines = ["# Softmax accuracy report", "", f"**{verdict_line}**", "",
             f"{run['backend']} on {run['device']}; profile `{run['profile']}`; commit `{run['git_commit']}`; "
             f"{run['started']}", "",
             ", ".join(f"{name} {version}" for name, version in sorted(run["versions"].items())), ""]
    lines += [f"- {markdown_text(kernel)} declares {markdown_text(said)}" for kernel, said in
              sorted(run.get("declared", {}).items())] + ([""] if run.get("declared") else [])
    if in_progress:
        lines += ["## Kernel calls in progress when the run was interrupted", ""]
        lines += [f"- {markdown_text(call)}" for call in in_progress] + [""]
    if failures:
        lines += ["## Failed tests", ""]
        for f in failures:
            lines += [f"- {markdown_code(f['test'])} ({f['when']}): {markdown_text(f['headline'])}"]
            lines += [f"  replay: {markdown_code(f['replay'])}"] if f["replay"] else []
        lines.append("")
    lines += league.markdown(categories, invariances)
    for kernel, groups in categories.items():
        names = headings()
        lines += [f"## {markdown_text(kernel)}", "", "| " + " | ".join(names) + " |", "|" + "---|" * len(names)]
        lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in category_rows(groups)]
        lines.append("")
    if interpreter_truncates_bf16(run.get("backend"), categories):
        lines += [f"*{INTERPRETER_BF16}.*", ""]
    if has_backward(categories):
        lines += [f"*{BACKWARD_CANCELS}.*", ""]
    if invariances:
        table = invariance_table.rows(invariances)
        lines += ["## Bitwise invariances", "", "Only a broken promise fails a test.", "",
                  "| " + " | ".join(table[0]) + " |", "|" + "---|" * len(table[0])]
        lines += ["| " + " | ".join([markdown_text(row[0]), *row[1:]]) + " |" for row in table[1:]]
        lines += [""] + [f"- {markdown_text(line)}" for line in invariance_table.counterexamples(invariances)] + [""]
    if missing:
        lines += ["## Tests without a record", ""] + [f"- {markdown_code(test)}" for test in missing] + [""]
    if gate:
        lines += ["## Regression gate", "", *markdown_block(gate), ""]
    return write_text(directory / "summary.md", "\n".join(lines))


def plot_histograms(directory: Path, categories: dict) -> Path:
    """Share of elements per ULP bucket, per dtype: each kernel, and torch on the same inputs."""
    dtypes = sorted({Category.read(key).dtype for groups in categories.values() for key in groups})
    plt = pyplot()
    figure, axes = plt.subplots(len(dtypes), 1, figsize=(9, 2.8 * len(dtypes)), squeeze=False)
    positions = range(len(ULP_BUCKETS))
    for axis, dtype in zip(axes[:, 0], dtypes):
        series = {}
        for kernel, groups in categories.items():
            mine = [stats for key, stats in groups.items() if Category.read(key).dtype == dtype]
            sides = [("kernel", kernel)] + ([] if kernel == "torch" else [("torch", f"torch on {kernel}'s inputs")])
            for side, label in sides:
                series[label] = [sum(stats[side]["ulp_histogram"][i] for stats in mine) for i in positions]
        width = 0.8 / max(len(series), 1)
        for index, (label, counts) in enumerate(series.items()):
            total = sum(counts) or 1
            axis.bar([p + index * width for p in positions], [c / total for c in counts], width, label=label)
        axis.set_xticks([p + 0.4 - width / 2 for p in positions], ULP_BUCKETS, fontsize=8)
        axis.set_yscale("log")
        axis.set_ylim(top=1.5)
        axis.set_ylabel("share of elements")
        axis.set_title(f"{dtype}: ULP distance to the correctly rounded result")
        axis.legend(fontsize=8)
    figure.tight_layout()
    path = replace_file(directory / "ulp_histograms.png", lambda temporary: figure.savefig(temporary, dpi=110))
    plt.close(figure)
    return path


# A dtype's colour, the same in every plot; kernels are told apart by their markers.
DTYPE_COLOURS = {"float32": "tab:blue", "float16": "tab:orange", "bfloat16": "tab:green", "float64": "tab:purple"}
OTHER_COLOURS = ("tab:red", "tab:brown", "tab:pink", "tab:olive", "tab:cyan")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


def colours_of(dtypes: list[str]) -> dict[str, str]:
    """Each dtype's colour: its own where it has one, else one no other dtype of the plot has."""
    others = iter(OTHER_COLOURS * len(dtypes))
    return {dtype: DTYPE_COLOURS.get(dtype) or next(others) for dtype in dtypes}


def markers_of(kernels: list[str]) -> dict[str, str]:
    return {kernel: MARKERS[index % len(MARKERS)] for index, kernel in enumerate(kernels)}


def scatter_legend(axis, colours: dict[str, str], markers: dict[str, str]) -> None:
    """A legend naming each dtype by its colour and each kernel by its marker, after what the axis labels itself."""
    from matplotlib.lines import Line2D

    handles, _ = axis.get_legend_handles_labels()
    handles += [Line2D([], [], linestyle="", marker="o", color=colour, label=dtype)
                for dtype, colour in colours.items()]
    handles += [Line2D([], [], linestyle="", marker=marker, color="grey", label=kernel)
                for kernel, marker in markers.items()]
    axis.legend(handles=handles, fontsize=8)


def plot_scatter(directory: Path, records: list, name: str, x, y, xlabel: str, ylabel: str, title: str,
                 diagonal: bool = False) -> Path:
    """A point per record: its colour its dtype, its marker its kernel."""
    plt = pyplot()
    figure, axis = plt.subplots(figsize=(7, 4.5))
    colours = colours_of(sorted({r["dtype"] for r in records}))
    markers = markers_of(sorted({r["kernel"] for r in records}))
    for kernel, marker in markers.items():
        for dtype, colour in colours.items():
            mine = [r for r in records if r["kernel"] == kernel and r["dtype"] == dtype]
            if mine:
                axis.scatter([x(r) for r in mine], [y(r) for r in mine], s=10, alpha=0.6, color=colour, marker=marker)
    if diagonal:
        top = max([max(x(r), y(r)) for r in records] + [1])
        axis.plot([0.5, top], [0.5, top], color="grey", linewidth=0.8, label="kernel = torch")
    axis.set_xscale("symlog", linthresh=1)
    axis.set_yscale("symlog", linthresh=1)
    axis.set(xlabel=xlabel, ylabel=ylabel, title=title)
    scatter_legend(axis, colours, markers)
    figure.tight_layout()
    path = replace_file(directory / name, lambda temporary: figure.savefig(temporary, dpi=110))
    plt.close(figure)
    return path


def write_html(directory: Path, report: Report, images: list[Path]) -> Path:
    run, verdict_line, failures, categories = report.run, report.verdict, report.failures, report.categories
    missing, gate, invariances, in_progress = report.missing, report.gate, report.invariances, report.in_progress
    esc = html.escape
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>Softmax accuracy report</title>",
        "<style>body{font-family:sans-serif;margin:2em;max-width:80em}table{border-collapse:collapse;"
        "font-size:0.85em;margin-bottom:1.5em}td,th{border:1px solid #bbb;padding:0.2em 0.5em;text-align:right}"
        "td:first-child,th:first-child{text-align:left}th{background:#eee}.bad{background:#fdd}"
        "img{max-width:100%;border:1px solid #ddd;margin:0.5em 0}pre{background:#f6f6f6;padding:1em}"
        ".verdict{font-size:1.2em;font-weight:bold}</style>",
        "</head><body><h1>Softmax accuracy report</h1>",
        f"<p class='verdict{' bad' if verdict_line.startswith('FAILED') else ''}'>{esc(verdict_line)}</p>",
        f"<p>{esc(run['backend'])} on {esc(run['device'])}; profile <code>{esc(run['profile'])}</code>; "
        f"commit <code>{esc(str(run['git_commit']))}</code>; {esc(run['started'])}</p>",
        "<p>" + esc(", ".join(f"{n} {v}" for n, v in sorted(run["versions"].items()))) + "</p>",
        *(f"<p>{esc(kernel)} declares {esc(said)}</p>" for kernel, said in sorted(run.get("declared", {}).items())),
    ]
    if in_progress:
        parts.append("<h2>Kernel calls in progress when the run was interrupted</h2><ul>"
                     + "".join(f"<li><code>{esc(call)}</code></li>" for call in in_progress) + "</ul>")
    if failures:
        parts.append("<h2 id='failures'>Failed tests</h2><ul>")
        for f in failures:
            replay = f"<br>replay: <code>{esc(f['replay'])}</code>" if f["replay"] else ""
            parts.append(f"<li id='{slug(f['test'])}'><code>{esc(f['test'])}</code> ({esc(f['when'])}): "
                         f"{esc(f['headline'])}{replay}</li>")
        parts.append("</ul>")
    if gate:  # before the categories: a regression is the first thing to see after a failed test
        parts.append("<h2 id='gate'>Regression gate</h2>" + gate_table(gate))
    for kernel, groups in categories.items():
        parts.append(f"<h2>{esc(kernel)}</h2><table><tr>" + "".join(f"<th>{esc(c)}</th>" for c in headings()) + "</tr>")
        for key, row in zip(groups, category_rows(groups)):
            cells = [esc(str(cell)) for cell in row]
            violated = columns.BY_HEADING["violations"].value(groups[key])
            if violated:  # the row links to the failure of a test that measured this category
                sources = set(groups[key].get("tests", ()))
                failed = next((f["test"] for f in failures if f["test"] in sources), None)
                target = f"#{slug(failed)}" if failed else "#failures"
                cells[0] = f"<a href='{target}'>{cells[0]}</a>"
            parts.append(f"<tr{' class=bad' if violated else ''}>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
        parts.append("</table>")
    if invariances:
        header, *body = invariance_table.rows(invariances)
        parts.append("<h2>Bitwise invariances</h2><p>Only a broken promise fails a test.</p><table><tr>"
                     + "".join(f"<th>{esc(c)}</th>" for c in header) + "</tr>")
        for row in body:
            parts.append("<tr>" + "".join(f"<td{' class=bad' if 'BROKEN' in c else ''}>{esc(c)}</td>" for c in row)
                         + "</tr>")
        parts.append("</table><ul>" + "".join(f"<li>{esc(line)}</li>"
                                               for line in invariance_table.counterexamples(invariances)) + "</ul>")
    if missing:
        parts.append("<h2>Tests without a record</h2><ul>" + "".join(f"<li><code>{esc(t)}</code></li>"
                                                                      for t in missing) + "</ul>")
    if interpreter_truncates_bf16(run.get("backend"), categories):
        parts.append(f"<p><em>{esc(INTERPRETER_BF16)}.</em></p>")
    if has_backward(categories):
        parts.append(f"<p><em>{esc(BACKWARD_CANCELS)}.</em></p>")
    parts.append("<h2>Plots</h2>" + "".join(f"<p><img src='{esc(p.name)}' alt='{esc(p.stem)}'></p>" for p in images))
    parts.append("</body></html>")
    return write_text(directory / "index.html", "\n".join(parts))


def gate_table(lines: list[str]) -> str:
    """The gate's text table (report.baseline.table: failing rows first) as HTML, failing rows marked."""
    esc = html.escape
    header, *rows = (re.split(r"\s{2,}", line.strip()) for line in lines)
    body = "".join(f"<tr{' class=bad' if row[-1] in baseline.FAILING else ''}>"
                   + "".join(f"<td>{esc(cell)}</td>" for cell in row) + "</tr>" for row in rows)
    return "<table><tr>" + "".join(f"<th>{esc(cell)}</th>" for cell in header) + "</tr>" + body + "</table>"


def write_all(directory: Path, report: Report) -> list[Path]:
    """The report's files; accuracy.json keeps the known and fixed findings of :func:`verdict`, for a shard merge."""
    images = []
    if report.records:
        images = [
            plot_histograms(directory, report.categories),
            plot_scatter(directory, report.records, "max_ulp_by_row_length.png", lambda r: r["row_length"],
                         lambda r: r["kernel_errors"]["max_ulp"], "row length", "max ULP of the input",
                         "Largest ULP error against row length"),
            plot_scatter(directory, report.records, "kernel_vs_torch.png", lambda r: r["torch_errors"]["max_ulp"],
                         lambda r: r["kernel_errors"]["max_ulp"], "torch.softmax max ULP (same input)",
                         "kernel max ULP", "Kernel against torch, per input", diagonal=True),
        ]
    return [write_json(directory, report), write_markdown(directory, report), *images,
            write_html(directory, report, images)]