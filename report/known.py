"""Known failures (``specs/known_findings.py``) counted apart from new ones, in the words every verdict uses."""

from __future__ import annotations

from collections import Counter


def label(finding: str) -> str:
    """A finding's short name: its document and section ("flag-gems.md 1"), the text before its colon."""
    return finding.split(":", 1)[0].rsplit("/", 1)[-1]


def counted(new: int, known: list[dict], fixed: list[dict] = ()) -> str:
    """"0 new, 5 known (flag_gems: flag-gems.md 1 x3, flag-gems.md 3 x2)": the failures of a run, from its known
    failures (each ``{"kernel", "findings"}``) and fixed findings (the same), new being the others."""
    said = f"{new} new, {len(known)} known{grouped(known)}"
    return said + (f", {len(fixed)} fixed{grouped(fixed)}" if fixed else "")


def grouped(entries: list[dict]) -> str:
    """" (kernel: finding xN, ...; kernel: ...)" over ``entries``; empty for none."""
    by_kernel: dict[str, Counter] = {}
    for entry in entries:
        by_kernel.setdefault(entry["kernel"], Counter()).update(entry["findings"])
    parts = ["{}: {}".format(kernel, ", ".join(f"{name} x{n}" if n > 1 else name for name, n in sorted(c.items())))
             for kernel, c in sorted(by_kernel.items())]
    return f" ({'; '.join(parts)})" if parts else ""
