"""Under ``pytest -n``, idle workers take tests queued on busy ones (xdist's ``worksteal``).

xdist's default, ``load``, hands each worker a share of the collection up front.
The suite's tests differ in length by a factor of a thousand (an accuracy test
with its coverage sweep and cold Triton compiles runs minutes, a bounds test
milliseconds), and on the H100 one worker was left running four accuracy tests
in a row while fifteen sat idle, for half the gate's time.  A ``--dist`` given
on the command line is kept.

``worksteal`` still starts each worker on a contiguous slice of the collection,
and a stolen test comes from the end of a queue: the first slice held every
accuracy test (their module comes first), and they ran one after another.  So
the collection is dealt like cards: the workers' first tests are the first
tests collected, the longest.
"""

from __future__ import annotations

import pytest


def explicit_dist(args: tuple[str, ...]) -> bool:
    return any(arg == "--dist" or arg.startswith("--dist=") or arg == "-d" for arg in args)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    if getattr(config.option, "dist", "no") == "load" and not explicit_dist(config.invocation_params.args):
        config.option.dist = "worksteal"


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
        items[:] = dealt(items, int(worker["workercount"]))
