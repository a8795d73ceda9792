"""The table kernel x bitwise invariance: held, broken, promised or not.

Tests report one entry per invariance they measured (:mod:`harness.judging.invariance`):
``{"kernel", "property", "promised", "held", "counterexample", "test"}``.  Several tests
may measure the same invariance (batch invariance at several batch sizes); the
invariance held only if it held in all of them.  A broken promise has already
failed its test; the table shows the rest, and the baseline remembers what held
so that the gate fails a kernel that loses an invariance it had.
"""

from __future__ import annotations

from .baseline import source_id


def combine(entries: list[dict]) -> dict[str, dict[str, dict]]:
    """kernel -> invariance -> {promised, held, counterexample, tests}, whatever order the entries came in."""
    table: dict[str, dict[str, dict]] = {}
    for entry in sorted(entries, key=lambda e: (e["kernel"], e["property"], e["counterexample"] or "")):
        cell = table.setdefault(entry["kernel"], {}).setdefault(
            entry["property"], {"promised": False, "held": True, "counterexample": None, "tests": []})
        cell["promised"] |= entry["promised"]
        cell["held"] &= entry["held"]
        cell["counterexample"] = cell["counterexample"] or entry["counterexample"]
        test = source_id(entry.get("test", ""))
        cell["tests"] = sorted(set(cell.get("tests", [])) | ({test} if test else set()))
    return table


def verdict(cell: dict | None) -> str:
    if cell is None:
        return "not measured"
    if cell["promised"]:
        return "held" if cell["held"] else "BROKEN (promised)"
    return "held, not promised" if cell["held"] else "broken, not promised"


def rows(table: dict[str, dict[str, dict]]) -> list[tuple[str, ...]]:
    """A header and one row per kernel, a column per invariance measured."""
    names = sorted({name for cells in table.values() for name in cells})
    return [("kernel", *names)] + [(kernel, *(verdict(cells.get(name)) for name in names))
                                   for kernel, cells in sorted(table.items())]


def text_table(table: dict[str, dict[str, dict]]) -> list[str]:
    if not table:
        return []
    lines = rows(table)
    widths = [max(len(row[i]) for row in lines) for i in range(len(lines[0]))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in lines]


def counterexamples(table: dict[str, dict[str, dict]]) -> list[str]:
    """The first counterexample of each broken invariance, for the report and the terminal."""
    return [f"{kernel} / {name}: {cell['counterexample']}"
            for kernel, cells in sorted(table.items()) for name, cell in sorted(cells.items())
            if not cell["held"] and cell["counterexample"]]


def held(table: dict[str, dict[str, dict]]) -> dict[str, dict[str, bool]]:
    """What a baseline keeps: kernel -> invariance -> held."""
    return {kernel: {name: cell["held"] for name, cell in cells.items()} for kernel, cells in table.items()}


def sources(table: dict[str, dict[str, dict]]) -> dict[str, dict[str, list[str]]]:
    """kernel -> invariance -> the tests that measured it (a baseline keeps them beside what held)."""
    return {kernel: {name: cell.get("tests", []) for name, cell in cells.items()} for kernel, cells in table.items()}
