"""The league table: every kernel of a report side by side, per dtype and value class, with its speed.

A row per kernel, dtype and value class of the softmax: max and mean ULP to the
correctly rounded result, the share correctly rounded, the worst
error-to-bound ratio, the NaN or inf where the result is finite, the results
special values decide that were missed, the bitwise invariances held or
broken, and, given the JSON of ``bench/softmax_bandwidth.py`` from the same
device, the kernel's median GB/s and fraction of a copy's bandwidth over the
benchmark's shapes.
Each kernel is measured on the inputs its capabilities admit (torch.softmax
on the same inputs is in every report's category tables).  One plot per dtype
puts accuracy against speed: max ULP on ordinary logits (the benchmark's
inputs are ``randn``) against the fraction of copy bandwidth.

    python -m report league ACCURACY.json [--bench BANDWIDTH.json] [--out DIR] [--op OPERATION]

``--op`` tables another operation than the softmax (``softmax_backward``, say: there results that cancel to
near zero have large ULP distances by nature, and the worst error-to-bound ratio is the column to read).
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from . import columns
from . import invariances as invariance_table
from .figures import pyplot
from .summary import Category, combined
from .text import markdown_text

OP = "softmax"
ORDINARY = "normal"  # the value class of the benchmark's inputs


def speed(bench: dict | None, kernel: str, dtype: str) -> tuple[float, float] | None:
    """Median GB/s of ``kernel`` over the benchmark's shapes in ``dtype``, and its median fraction of a copy."""
    results = [r for r in (bench or {}).get("results", []) if r["dtype"] == dtype and kernel in r["gbps"]]
    if not results:
        return None
    return (statistics.median(r["gbps"][kernel] for r in results),
            statistics.median(r["gbps"][kernel] / r["gbps"]["copy"] for r in results))


def merged(groups: list[dict]) -> dict:
    """One row of statistics from several categories: maxima, element-weighted means, sums (report.summary)."""
    return {"elements": sum(g["elements"] for g in groups),
            **combined([g["kernel"] for g in groups], [g["elements"] for g in groups])}


def rows(categories: dict, bench: dict | None = None, op: str = OP) -> list[dict]:
    """Per kernel and dtype: a row over all value classes ("all") of ``op``, then one per value class."""
    table = []
    for kernel, groups in sorted(categories.items()):
        by_dtype: dict[str, dict[str, dict]] = {}
        for key, stats in groups.items():
            category = Category.read(key)
            if category.op == op:
                by_dtype.setdefault(category.dtype, {})[category.values] = stats
        for dtype, classes in sorted(by_dtype.items()):
            fast = speed(bench, kernel, dtype)
            for values, group in [("all", list(classes.values()))] + [(v, [s]) for v, s in sorted(classes.items())]:
                table.append({"kernel": kernel, "dtype": dtype, "values": values, **merged(group),
                              "gbps": fast[0] if fast else None, "copy_fraction": fast[1] if fast else None})
    return table


def line(row: dict) -> str:
    """A Markdown table row.  A league row holds the kernel's statistics merged over its categories, flat."""
    cells = (markdown_text(row["kernel"]), row["dtype"], row["values"], *columns.cells(columns.LEAGUE,
                                                                                      {**row, "kernel": row}))
    return "| " + " | ".join(str(c) for c in cells) + " |"


def promises(table: dict) -> list[str]:
    """A line per kernel: each invariance measured, held or broken, promised or not."""
    return [f"{kernel}: " + "; ".join(f"{name} {invariance_table.verdict(cell)}" for name, cell in sorted(cells.items()))
            for kernel, cells in sorted(table.items())]


def markdown(categories: dict, invariances: dict, bench: dict | None = None, op: str = OP) -> list[str]:
    """The league as Markdown: overall rows per kernel and dtype, then per value class, then the promises."""
    table = rows(categories, bench, op)
    headings = ["kernel", "dtype", "values", *(column.heading for column in columns.of(columns.LEAGUE))]
    header = ["| " + " | ".join(headings) + " |", "|" + "---|" * len(headings)]
    overall = [r for r in table if r["values"] == "all"]
    lines = [f"## League table ({op})", "",
             "Each kernel on the inputs its capabilities admit; GB/s and the fraction of a copy's bandwidth are "
             "medians over the benchmark's shapes" + (f" ({bench['device']['name']})" if bench else
                                                      " (no benchmark JSON given: not measured)") + ".", ""]
    lines += header + [line(r) for r in overall] + [""]
    lines += ["### Per value class", ""] + header + [line(r) for r in table if r["values"] != "all"] + [""]
    if invariances:
        lines += ["### Bitwise invariances", ""] + [f"- {markdown_text(line)}" for line in promises(invariances)] + [""]
    return lines


def plot(directory: Path, categories: dict, bench: dict) -> list[Path]:
    """Per dtype: max ULP on ordinary logits against the fraction of copy bandwidth, a point per kernel."""
    plt = pyplot()
    points = [r for r in rows(categories, bench) if r["values"] == ORDINARY and r["copy_fraction"] is not None]
    paths = []
    for dtype in sorted({r["dtype"] for r in points}):
        figure, axis = plt.subplots(figsize=(6.5, 4.5))
        for r in (r for r in points if r["dtype"] == dtype):
            axis.scatter(r["copy_fraction"], r["max_ulp"], s=40)
            axis.annotate(r["kernel"], (r["copy_fraction"], r["max_ulp"]), textcoords="offset points", xytext=(5, 4),
                          fontsize=8)
        axis.set_yscale("symlog", linthresh=1)
        axis.set(xlabel="fraction of copy bandwidth (median over the benchmark's shapes)",
                 ylabel="max ULP to the correctly rounded result", xlim=(0, 1.1),
                 title=f"{dtype} softmax, ordinary logits: accuracy against speed\n{bench['device']['name']}")
        figure.tight_layout()
        path = directory / f"league_{dtype}.png"
        figure.savefig(path, dpi=110)
        plt.close(figure)
        paths.append(path)
    return paths


def write(directory: Path, report: dict, bench: dict | None, op: str = OP) -> list[Path]:
    """league.md, league.json and, with a benchmark, the plots (of the softmax), from an accuracy.json document."""
    directory.mkdir(parents=True, exist_ok=True)
    categories, invariances = report["categories"], report.get("invariances", {})
    written = [directory / "league.md", directory / "league.json"]
    written[0].write_text("\n".join(["# League", ""] + markdown(categories, invariances, bench, op)))
    written[1].write_text(json.dumps({"run": report.get("run"), "bench_device": (bench or {}).get("device"),
                                      "op": op, "rows": rows(categories, bench, op), "invariances": invariances},
                                     indent=1) + "\n")
    return written + (plot(directory, categories, bench) if bench and op == OP else [])
