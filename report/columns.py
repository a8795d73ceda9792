"""The statistics the reports' tables show of a category, one record per column, read by every table that shows them.

The tables: the terminal's at the end of a run (``TERMINAL``, harness/plugins/reporting.py), summary.md and
index.html (``SUMMARY``, report/artifacts.py) and the league (``LEAGUE``, report/league.py).  Each writes its own
leading columns, which name the row (kernel, category; dtype, value class), then :func:`of` its table, in this order.
A new column is one entry here and the statistic it shows (report/summary.py, from the record's field).
"""

from __future__ import annotations

from dataclasses import dataclass

from .summary import shown, shown_ratio

TERMINAL, SUMMARY, LEAGUE = "terminal", "summary", "league"


@dataclass(frozen=True)
class Column:
    # The heading in summary.md, index.html and the league.
    heading: str
    # The heading in the terminal's table, narrower where the heading is long.
    short: str
    # Whose statistic: the kernel's ("kernel") or torch's on the same inputs ("torch") in a category's statistics
    # (report/summary.py's categorize); None for the row's own (records, elements; the league's speed).
    side: str | None
    # The statistic's key.
    key: str
    # How it is shown: a format spec for summary.shown, "ratio" for an error-to-bound ratio (summary.shown_ratio),
    # "" for a count as it is.
    spec: str
    # The tables that show it.
    tables: tuple[str, ...]
    # What the statistic is multiplied by when shown (100: a fraction shown as a percentage).
    scale: float = 1.0

    def value(self, stats: dict):
        return (stats[self.side] if self.side else stats).get(self.key)

    def cell(self, stats: dict) -> str:
        """The statistic as the table shows it; "-" where it is undefined or the row predates it."""
        value = self.value(stats)
        if value is None:
            return "-"
        if self.spec == "ratio":
            return shown_ratio(value)
        return str(value) if not self.spec else shown(value, self.spec, self.scale)


COLUMNS = (
    Column("records", "records", None, "records", "", (TERMINAL, SUMMARY)),
    Column("elements", "elements", None, "elements", "", (SUMMARY, LEAGUE)),
    Column("max ULP", "max ULP", "kernel", "max_ulp", ".0f", (TERMINAL, SUMMARY, LEAGUE)),
    Column("mean ULP", "mean ULP", "kernel", "mean_ulp", ".3f", (TERMINAL, SUMMARY, LEAGUE)),
    Column("% correctly rounded", "% CR", "kernel", "correctly_rounded", ".1f", (TERMINAL, SUMMARY, LEAGUE), 100),
    Column("worst ratio", "worst ratio", "kernel", "worst_ratio", "ratio", (SUMMARY, LEAGUE)),
    # Every element that broke its test: those judged by a bound ("NaN/inf" among them) and the special misses.
    Column("violations", "violations", "kernel", "violations", "", (SUMMARY,)),
    # NaN or inf where the oracle's result is finite (or the reverse).
    Column("NaN/inf", "NaN/inf", "kernel", "non_finite", "", (TERMINAL, SUMMARY, LEAGUE)),
    # Results special values decide (NaN rows, zeros at -inf) that are not it: no ULP figure shows them.
    Column("special misses", "special misses", "kernel", "special_misses", ".0f", (TERMINAL, SUMMARY, LEAGUE)),
    Column("torch max ULP", "torch max", "torch", "max_ulp", ".0f", (TERMINAL, SUMMARY)),
    Column("torch mean ULP", "torch mean", "torch", "mean_ulp", ".3f", (TERMINAL, SUMMARY)),
    Column("torch % CR", "torch % CR", "torch", "correctly_rounded", ".1f", (SUMMARY,), 100),
    # The league's speed: medians over the benchmark's shapes.
    Column("GB/s", "GB/s", None, "gbps", ".0f", (LEAGUE,)),
    Column("of copy", "of copy", None, "copy_fraction", ".2f", (LEAGUE,)),
)
BY_HEADING = {column.heading: column for column in COLUMNS}


def of(table: str) -> tuple[Column, ...]:
    """The columns ``table`` shows, in the table's order."""
    return tuple(column for column in COLUMNS if table in column.tables)


def cells(table: str, stats: dict) -> list[str]:
    """A row's statistics as ``table`` shows them."""
    return [column.cell(stats) for column in of(table)]
