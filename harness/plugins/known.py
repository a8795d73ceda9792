"""Known findings (``specs/known_findings.py``) applied to a run's tests, as a pytest plugin.

* In a Hypothesis test's body (:func:`harness.plugins.timebox.timeboxed`), a failure
  each of whose parts matches the signature of an entry for that kernel, test,
  operation, dtype and special case is absorbed (:func:`absorbs`): that example
  passes, so that Hypothesis searches on (a failure would end the search, and
  hide a new bug of the same test behind the known one) and nothing known is
  kept in the example database; any other failure fails the test as new.
* A test whose call absorbed known failures and passed, or failed only with
  known failures (a test without a Hypothesis body), is a known failure: its
  report becomes pytest's xfailed with the finding as its reason (``wasxfail``)
  and carries the findings (``KNOWN``) to the controller, which counts them
  apart from new failures.
* A test's call that passed without a known failure, although an entry for it
  says that every run's fixed inputs show its bug, having run all of them (no
  soak time box or examples cap ended its examples, no ``--replay-example``),
  fails as FIXED (``FIXED``): as a strict xfail's unexpected pass.

Only entries about the installed version of their library apply.
"""

from __future__ import annotations

import functools
import importlib.metadata
import re

import pytest

from report.known import label

from ..internals import payload

KNOWN = "softmax_known"  # the report attribute listing the findings a known failure matched
FIXED = "softmax_fixed"  # the report attribute listing the findings whose test passed
CUT_SHORT = "cut_short"  # the payload kind saying that a soak's time box or examples cap ended a test's examples
_entries: list = []  # the known findings of the test this process runs
_absorbed: list = []  # those that explained failures its body absorbed


@functools.cache
def installed(distribution: str, version: str) -> bool:
    """Whether ``distribution`` is installed at ``version``: that version, or one of the versions ``version`` ends
    with a dot to stand for ("2.11." for 2.11.0, 2.11.1+cu130, ...; "" for any)."""
    try:
        found = importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return False
    return found == version or found.split("+")[0] == version or (version == "" or version.endswith(".")) and \
        found.startswith(version)


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


def known_failure(item: pytest.Item, call: pytest.CallInfo) -> list:
    """The entries that explain every failure of ``item``'s ``call`` (as :func:`pytest_runtest_makereport` finds them,
    for plugins that see the report before it is marked known); none where it raised nothing or one failure is new."""
    return matched(entries_for(item), call.excinfo.value) if call.excinfo is not None else []


def absorbs(error: BaseException) -> bool:
    """Whether ``error``, raised in the running test's Hypothesis body, is a known finding's failure; if so, noted
    for its report, and the body passes that example."""
    found = matched(_entries, error) if _entries else []
    _absorbed.extend(entry for entry in found if entry not in _absorbed)
    return bool(found)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item):
    global _entries, _absorbed
    _entries, _absorbed = entries_for(item), []
    try:
        yield
    finally:
        _entries = []


def mark_known(report: pytest.TestReport, known: list) -> None:
    report.outcome = "skipped"
    report.wasxfail = "known finding: " + "; ".join(entry.finding for entry in known)
    setattr(report, KNOWN, [label(entry.finding) for entry in known])


@pytest.hookimpl(hookwrapper=True, tryfirst=True)  # outermost: the report as the other plugins left it
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    entries = entries_for(item) if report.when == "call" else []
    if not entries:
        return
    if report.failed and call.excinfo is not None:
        if known := matched(entries, call.excinfo.value):
            mark_known(report, known)
    elif report.passed and _absorbed:
        mark_known(report, list(_absorbed))
    elif report.passed and not any(payload.of(report, CUT_SHORT)) and not item.config.getoption("replay_example"):
        fixed = [entry for entry in entries if entry.every_run]
        if fixed:
            report.outcome = "failed"
            report.longrepr = "\n".join(
                [f"FIXED: {entry.finding}: every run's fixed inputs showed it, and this run's passed; remove its "
                 "entry from specs/known_findings.py and say so in the document" for entry in fixed])
            setattr(report, FIXED, [label(entry.finding) for entry in fixed])
