"""Known findings (``specs/known_findings.py``) applied to a run's test reports, as a pytest plugin.

* A test's call that failed, each of whose failures (one, or Hypothesis's
  distinct failures) matches the signature of an entry for that kernel, test,
  operation and dtype, is a known failure: its report becomes pytest's xfailed
  with the finding as its reason (``wasxfail``), and carries the findings
  (``KNOWN``) to the controller, which counts them apart from new failures.
* A test's call that passed, although an entry for it says that every run's
  fixed inputs show its bug, having run all of them (no soak time box ended its
  examples), fails as FIXED (``FIXED``): as a strict xfail's unexpected pass.

Only entries about the installed version of their library apply.
"""

from __future__ import annotations

import functools
import importlib.metadata
import re

import pytest

from report.known import label

from . import timebox

KNOWN = "softmax_known"  # the report attribute listing the findings a known failure matched
FIXED = "softmax_fixed"  # the report attribute listing the findings whose test passed


@functools.cache
def installed(distribution: str, version: str) -> bool:
    """Whether ``distribution`` is installed at ``version`` (or a version starting so)."""
    try:
        return importlib.metadata.version(distribution).startswith(version)
    except importlib.metadata.PackageNotFoundError:
        return False


def test_id_parts(item: pytest.Item) -> tuple[str | None, str, str | None, str | None, str | None]:
    """The kernel, test function, operation, dtype and special-case rule of a test's id (None where it has no such
    part)."""
    params = getattr(item, "callspec", None) and item.callspec.params or {}
    kernel, op, dtype, rule = params.get("kernel"), params.get("op"), params.get("dtype"), params.get("rule")
    return (getattr(kernel, "name", None), getattr(item, "originalname", item.name), getattr(op, "name", op),
            str(dtype).removeprefix("torch.") if dtype is not None else None, getattr(rule, "name", None))


def entries_for(item: pytest.Item) -> list:
    """The known findings that apply to this test, with its library's version installed."""
    from specs.known_findings import KNOWN_FINDINGS  # here: specs imports the kernels, after the backend's set-up

    kernel, test, op, dtype, rule = test_id_parts(item)
    return [entry for entry in KNOWN_FINDINGS
            if (entry.kernel, entry.test) == (kernel, test) and (not entry.ops or op in entry.ops)
            and (not entry.dtypes or dtype in entry.dtypes) and (not entry.rules or rule in entry.rules)
            and installed(*entry.version)]


def leaves(error: BaseException) -> list[BaseException]:
    """The failures in ``error``: itself, or each of a group's (Hypothesis's distinct failures)."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaves(inner)]
    return [error]


def matched(entries: list, error: BaseException) -> list:
    """The entries that explain every failure in ``error``; none if one failure is explained by none."""
    found = []
    for failure in leaves(error):
        said = f"{type(failure).__name__}: {failure}"
        entry = next((e for e in entries if re.search(e.signature, said)), None)
        if entry is None:
            return []
        found += [entry] if entry not in found else []
    return found


@pytest.hookimpl(hookwrapper=True, tryfirst=True)  # outermost: the report as the other plugins left it
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    entries = entries_for(item) if report.when == "call" else []
    if not entries:
        return
    if report.failed and call.excinfo is not None:
        known = matched(entries, call.excinfo.value)
        if known:
            report.outcome = "skipped"
            report.wasxfail = "known finding: " + "; ".join(entry.finding for entry in known)
            setattr(report, KNOWN, [label(entry.finding) for entry in known])
    elif report.passed and not timebox.cut_short():
        fixed = [entry for entry in entries if entry.every_run]
        if fixed:
            report.outcome = "failed"
            report.longrepr = "\n".join(
                [f"FIXED: {entry.finding}: every run's fixed inputs showed it, and this run's passed; remove its "
                 "entry from specs/known_findings.py and say so in the document" for entry in fixed])
            setattr(report, FIXED, [label(entry.finding) for entry in fixed])
