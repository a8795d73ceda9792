"""``--shard K/N``: run shard K of the collected tests split N ways, so that N hosts share one gate or one night.

The split depends only on the tests selected (after ``-k``, ``-m`` and every
other deselection, so they compose) and on the recorded durations that order a
run under ``-n`` (:mod:`harness.plugins.scheduling`: ``--test-durations``, else
``baselines/<backend>-durations.json``; a test they do not name takes the
longest of its family): never on the host, its worker count or chance.  So N
hosts given the same checkout, options and durations file select disjoint
shards that together hold every test once.  Tests are dealt longest first,
each to the shard with the least expected time so far (:func:`split`).

The other tests are deselected (``pytest_deselected``).  Under xdist every
worker collects and splits alike, as xdist requires (it compares the workers'
lists of test ids); the controller learns the shard's tests from the workers'
collections and what they split from the workers' output at their end.  The
shard's report (``--accuracy-report``) says which shard it was, the tests it
selected and a fingerprint of the collection it split (:func:`metadata`), for
``python -m report merge`` (:mod:`report.merge`) to check that the shards of
one run cover it once.
"""

from __future__ import annotations

import hashlib

import pytest

from report.baseline import source_id
from report.merge import Shard

from .scheduling import durations_file, expected, read_durations

SELECTION = pytest.StashKey[dict]()  # on the controller: the shard's tests and the collection it split
SPLIT = "softmax_shard_split"  # the key of a worker's output holding what it split


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("softmax", "softmax accuracy suite")
    group.addoption("--shard", metavar="K/N",
                    help="run only shard K of the selected tests split N ways (1 <= K <= N), balanced by the "
                         "recorded durations; merge the shards' reports with python -m report merge")


def shard_of(config: pytest.Config) -> Shard | None:
    given = config.getoption("shard", None)
    return Shard.parse(given) if given is not None else None


def split(seconds: dict[str, float], count: int) -> list[list[str]]:
    """The tests of ``seconds`` (test id -> expected seconds) in ``count`` shards, each sorted.

    Longest first (ties by id), each test goes to the shard with the least expected time so far, and among
    those to the one with the fewest tests, then the first: so tests of unknown (zero) duration are dealt round
    the shards.  Bound: the largest shard's total exceeds the smallest's by at most the shortest test of the
    largest shard (its last test joined it when it was the least loaded), so by at most the longest test.
    """
    totals = [(0.0, 0, index) for index in range(count)]
    shards: list[list[str]] = [[] for _ in range(count)]
    for test in sorted(seconds, key=lambda test: (-seconds[test], test)):
        total, tests, index = min(totals)
        totals[index] = (total + seconds[test], tests + 1, index)
        shards[index].append(test)
    return [sorted(shard) for shard in shards]


def fingerprint(tests) -> str:
    """A digest of the tests split: shards that split the same collection share it."""
    return hashlib.sha256("\n".join(sorted(tests)).encode()).hexdigest()[:16]


def pytest_configure(config: pytest.Config) -> None:
    try:
        shard = shard_of(config)
    except ValueError as error:
        raise pytest.UsageError(f"--shard: {error}") from None
    if shard is not None and config.getoption("record_durations", False):
        raise pytest.UsageError("--record-durations with --shard would write the durations of one shard's tests "
                                "over the file every shard splits by; record them in an unsharded run")
    if shard is not None and not hasattr(config, "workerinput"):
        config.stash[SELECTION] = {"shard": shard.label, "tests": None, "collected": None, "collection": None}


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list):
    """After every other hook has selected and ordered the tests: keep this shard's, in their order."""
    result = yield
    shard = shard_of(config)
    if shard is None:
        return result
    seconds = expected({source_id(item.nodeid) for item in items}, read_durations(durations_file(config)))
    mine = set(split(seconds, shard.count)[shard.index - 1])
    kept = [item for item in items if source_id(item.nodeid) in mine]
    dropped = [item for item in items if source_id(item.nodeid) not in mine]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
    what = {"collected": len(seconds), "collection": fingerprint(seconds)}
    if hasattr(config, "workerinput"):
        config.workeroutput[SPLIT] = what
    else:
        config.stash[SELECTION].update(what, tests=sorted(mine))
    return result


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids: list[str]) -> None:
    """xdist's controller: a worker's collection is the shard's tests (xdist checks that all workers agree)."""
    selection = node.config.stash.get(SELECTION, None)
    if selection is not None:
        selection["tests"] = sorted({source_id(test) for test in ids})


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    """xdist's controller: a worker that ended tells what it split."""
    selection = node.config.stash.get(SELECTION, None)
    split_by_worker = getattr(node, "workeroutput", {}).get(SPLIT)
    if selection is not None and split_by_worker:
        selection.update(split_by_worker)


def metadata(config: pytest.Config) -> dict:
    """What a shard's report says of the shard (nothing for a run that is not one)."""
    selection = config.stash.get(SELECTION, None)
    if selection is None:
        return {}
    return {"shard": selection["shard"], "shard_tests": selection["tests"] or [],
            "shard_collection": {"tests": selection["collected"], "sha256": selection["collection"]}}


def pytest_report_header(config: pytest.Config) -> list[str]:
    shard = shard_of(config)
    return [f"shard {shard.label}: the selected tests split {shard.count} ways by the durations in "
            f"{durations_file(config)}"] if shard else []


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    selection = config.stash.get(SELECTION, None)
    if selection is None:
        return
    tests, collected = len(selection["tests"] or []), selection["collected"]
    if tests:
        of = f"of the {collected} selected" if collected is not None else "(the workers did not say of how many)"
        terminalreporter.write_line(f"shard {selection['shard']}: {tests} test(s) {of}")
    else:
        terminalreporter.write_line(f"shard {selection['shard']} holds no test: the split gave all {collected} "
                                    "selected test(s) to the other shards (fewer shards, or more tests, give each "
                                    "shard some)")
