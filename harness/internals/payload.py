"""Data that tests send to the end of the run, surviving ``pytest -n``.

A test adds JSON-safe values to its item's payload (:func:`add`).
``pytest_runtest_makereport`` attaches the payload to the call-phase report as
the attribute ``softmax_payload``: xdist serialises report attributes, so the
controller receives it in ``pytest_runtest_logreport`` whichever worker ran
the test.  Unlike ``user_properties`` it stays out of JUnit XML.  The other
report attributes the suite's plugins set, which xdist carries the same way,
are named here too.
"""

from __future__ import annotations

import pytest

PAYLOAD = pytest.StashKey[dict]()
ATTRIBUTE = "softmax_payload"
RECORDS = "records"  # the payload kind of a test's accuracy records
EXPECTS = "softmax_expects_records"  # the setup report's attribute: the test takes the accuracy_record fixture
REPLAY = "softmax_replay"  # the report attribute holding a failure's replay command
KERNEL = "softmax_kernel"  # the report attribute naming the kernel a test judges, if it judges one


def add(item: pytest.Item, kind: str, value) -> None:
    item.stash.setdefault(PAYLOAD, {}).setdefault(kind, []).append(value)


def of(report, kind: str) -> list:
    """The values of ``kind`` a report carries (none for reports without a payload)."""
    return getattr(report, ATTRIBUTE, {}).get(kind, [])


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    if report.when == "call":
        setattr(report, ATTRIBUTE, item.stash.get(PAYLOAD, {}))
