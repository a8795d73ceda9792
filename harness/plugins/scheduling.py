"""Under ``pytest -n``: idle workers take tests queued on busy ones, and the longest tests start first.

xdist's default, ``load``, hands each worker a share of the collection up front.
The suite's tests differ in length by a factor of a thousand (an accuracy test
with its coverage sweep and cold Triton compiles runs minutes, a bounds test
milliseconds): a worker dealt several long tests in a row runs them while the
others sit idle (docs/timings.md measures it).  So idle workers
steal (xdist's ``worksteal``); a ``--dist`` given on the command line is kept.

``worksteal`` still starts each worker on a contiguous slice of the collection,
and a stolen test comes from the end of a queue.  So the collection is sorted
longest first and dealt like cards: the workers' first tests are the longest,
and what is stolen at the end is short.  A test's expected length is its
duration in the file ``--test-durations`` names (``baselines/<backend>-durations.json``
by default, written by a run given ``--record-durations``); a test the file
does not name (a user's kernel, say) takes the longest of its family, the same
test function with other parameters, else nothing (collection order): a long
test started last would keep the gate's last minutes to itself.

A test's seconds spent waiting for work that another test does for both (a
sub-run several tests read, made by whichever asks first: :func:`waited`) are
not its own, and are recorded without it: else every test of such a group
would be recorded as long as the work, all would start first and wait on one
worker's sub-run, most workers idle.  The
tests marked ``last`` read sub-runs that many other tests make (the mutants',
the reported bugs'): where the workers are few (LAST_WORKERS or fewer) they run
after all others, when those are made, instead of waiting for another worker
to make them, half the machine idle (on the CPU's two workers, 80 of a gate's
1000 seconds, docs/timings.md); where they are many, a wait idles a small share
and run last the longest of them (100 s on an H100) would make the run's tail,
so they keep their place by duration.

Before them come the tests marked ``first``, shortest first: each kernel's
cheap checks and the accuracy tests that open with the regression catalog's
inputs, so that a broken kernel fails (and ``-x`` stops the run) within a
minute instead of behind the suite's own long tests.  Of these, the tests that
judge every element against the oracle (they record accuracy: the
``accuracy_record`` fixture) come first of all: their failure names the bug
(its worst element, its input, its replay), where a cheap check's is often its
side effect (a special case's +inf rule, the bias of outputs already wrong),
and under ``-x`` the first failure is the one told.  Without ``-n`` the tests
run in collection order, where ``tests/kernel/test_accuracy.py`` comes first.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path

import pytest

from report import files

from ..internals import payload
from .session import session_of

ROOT = Path(__file__).resolve().parents[2]
FIRST = "first"  # the marker of the tests that run before the others
LAST = "last"  # the marker of the tests that run after the others, where the workers are few
LAST_WORKERS = 4
NAMES_THE_BUG = "accuracy_record"  # the fixture of the tests whose failure names the worst element: first of all
WAITED = "waited"  # the payload kind: seconds a test waited for work another test did for both


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("softmax", "softmax accuracy suite")
    group.addoption("--test-durations", metavar="FILE",
                    help="each test's duration, which orders the tests under -n (longest first); default "
                         "baselines/<backend>-durations.json")
    group.addoption("--record-durations", action="store_true",
                    help="write this run's durations (setup, call and teardown of each test) to that file")


def durations_file(config: pytest.Config) -> Path:
    given = config.getoption("test_durations")
    return Path(given) if given else ROOT / "baselines" / f"{session_of(config).backend.name}-durations.json"


def explicit_dist(args: tuple[str, ...]) -> bool:
    return any(arg == "--dist" or arg.startswith("--dist=") or arg == "-d" for arg in args)


class Recorder:
    """On the controller: sums each test's phases, writes them all at the end of the run."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.seconds: dict[str, float] = defaultdict(float)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # A wait in the setup of a test's fixtures rides on its call's report: the test's phases are summed first.
        self.seconds[report.nodeid] += report.duration - sum(payload.of(report, WAITED))

    def pytest_sessionfinish(self) -> None:
        path = durations_file(self.config)
        seconds = {k: round(max(v, 0.0), 2) for k, v in sorted(self.seconds.items())}
        files.write_text(path, json.dumps(seconds, indent=0) + "\n")  # whole, as readable as the umask allows


def waited(item: pytest.Item, seconds: float) -> None:
    """``item`` spent ``seconds`` waiting for work another test did for both: not its own time."""
    payload.add(item, WAITED, seconds)


def read_durations(path: Path) -> dict[str, float]:
    """The durations file (test id -> seconds), none where there is no file; UsageError for one that is not that."""
    if not path.exists():
        return {}
    try:
        durations = files.read_json(path)
    except (OSError, files.UnreadableJSON) as error:
        raise pytest.UsageError(f"--test-durations {path}: not readable JSON ({error})") from None
    if not (isinstance(durations, dict) and all(isinstance(k, str) and isinstance(v, (int, float))
                                                and not isinstance(v, bool) and math.isfinite(v) and v >= 0
                                                for k, v in durations.items())):
        raise pytest.UsageError(f"--test-durations {path}: must map test ids to seconds (finite numbers >= 0)")
    return durations


def pytest_configure(config: pytest.Config) -> None:
    """Before xdist's configure (trylast) starts workers."""
    if getattr(config.option, "dist", "no") == "load" and not explicit_dist(config.invocation_params.args):
        config.option.dist = "worksteal"
    if not hasattr(config, "workerinput"):
        read_durations(durations_file(config))  # a bad file stops the run here, before any worker
        if config.getoption("record_durations"):
            config.pluginmanager.register(Recorder(config), "softmax-suite-durations")


def family(nodeid: str) -> str:
    return nodeid.split("[", 1)[0]


def expected(nodeids, durations: dict[str, float]) -> dict[str, float]:
    """Each test's expected seconds: its recorded duration, else the longest of its family, else 0."""
    longest: dict[str, float] = {}
    for nodeid, seconds in durations.items():
        longest[family(nodeid)] = max(seconds, longest.get(family(nodeid), 0.0))
    return {nodeid: durations.get(nodeid, longest.get(family(nodeid), 0.0)) for nodeid in nodeids}


def first_looks_then_longest(items: list, durations: dict[str, float], workers: int = 1) -> list:
    """The tests marked ``first`` by expected duration, shortest first, those that record accuracy before the
    others; then the others longest first, those marked ``last`` after all where ``workers`` are LAST_WORKERS or
    fewer; ties (unknown tests) keep their collection order."""
    seconds = expected([item.nodeid for item in items], durations)
    first = [item for item in items if item.get_closest_marker(FIRST) is not None]
    rest = [item for item in items if item.get_closest_marker(FIRST) is None]
    return (sorted(first, key=lambda item: (NAMES_THE_BUG not in getattr(item, "fixturenames", ()),
                                            seconds[item.nodeid]))
            + sorted(rest, key=lambda item: (workers <= LAST_WORKERS and item.get_closest_marker(LAST) is not None,
                                             -seconds[item.nodeid])))


def dealt(items: list, hands: int) -> list:
    """``items`` reordered so that cutting them into ``hands`` contiguous slices deals them round-robin.

    worksteal cuts the shorter slices first (``len // hands`` of what is left), so the hands that take one
    card more (the first ones dealt) go last."""
    return [item for hand in reversed(range(hands)) for item in items[hand::hands]]


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list) -> None:
    """On each xdist worker (workers collect, and must agree on the order), when the run steals work by this
    module's choice."""
    worker = getattr(config, "workerinput", None)
    if worker and not explicit_dist(tuple(worker.get("mainargv", ()))):
        path = durations_file(config)
        durations = read_durations(path)
        workers = int(worker["workercount"])
        items[:] = dealt(first_looks_then_longest(items, durations, workers), workers)
