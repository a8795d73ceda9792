"""Known failures (``specs/known_findings.py``) counted apart from new ones, in the words every verdict uses."""

from __future__ import annotations

from collections import Counter


def label(finding: str) -> str:
    """A finding's short name: its document and section ("flag-gems.md 1"), the text before its colon."""
    return finding.split(":", 1)[0].rsplit("/", 1)[-1]


def counted(failures: int, known: list[dict], fixed: list[dict] = ()) -> str:
    """"0 new, 5 known (flag_gems: flag-gems.md 1 x3, flag-gems.md 3 x2)": a run's ``failures`` (its failed and
    erred tests, the fixed findings among them), its known failures (each ``{"kernel", "findings"}``, not among the
    failures) and its fixed findings (the same); new failures are the failures less the fixed findings."""
    said = f"{failures - len(fixed)} new, {len(known)} known{grouped(known)}"
    return said + (f", {len(fixed)} fixed{grouped(fixed)}" if fixed else "")


def said(failures: int, known: list[dict], fixed: list[dict] = ()) -> str:
    """:func:`counted` where a known finding failed or was fixed; empty where none did (no count to tell apart)."""
    return counted(failures, known, fixed) if known or fixed else ""


def grouped(entries: list[dict]) -> str:
    """" (kernel: finding xN, ...; kernel: ...)" over ``entries``; empty for none."""
    by_kernel: dict[str, Counter] = {}
    for entry in entries:
        by_kernel.setdefault(entry["kernel"], Counter()).update(entry["findings"])
    parts = ["{}: {}".format(kernel, ", ".join(f"{name} x{n}" if n > 1 else name for name, n in sorted(c.items())))
             for kernel, c in sorted(by_kernel.items())]
    return f" ({'; '.join(parts)})" if parts else ""
