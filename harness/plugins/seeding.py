"""Which seed each Hypothesis test draws from, and a fingerprint of what the gate draws.

A gate run (profile ``ci``) and every soak round pin each test's seed: a base (0 under
``ci``, the round's ``--soak-seed`` in a soak) plus a hash of the test's qualified name.
Not ``derandomize``: it hashes the test's source, so an edit of a test moved its draws and
the gate compared other inputs with its baseline's (it flagged torch's own softmax).  Not
``--hypothesis-seed`` nor ``@seed``: Hypothesis then reads no example database, and what a
soak stored would never be replayed (:func:`harness.internals.hypothesis_internals.pin_seed`).  The
seed is pinned on the test functions at collection and, by :func:`harness.plugins.timebox.timeboxed`,
on the bodies that tests define inside themselves.

Which base a run pins (if any) is decided with its profile by :mod:`harness.plugins.session`.

``--replay-example VERSION:BLOB``, which a failure's replay line carries
(:mod:`harness.plugins.failures`), makes every Hypothesis test of the run run only that
example, the one Hypothesis's ``@reproduce_failure`` names: the replay fails as
the failure did, and passes once the example passes (where Hypothesis would
fail it for not reproducing).

A baseline's statistics hold for the inputs they came from.  :func:`draws_fingerprint`
digests what decides a run's draws (the seeding scheme and base, the profile's
budget, whether an example database is replayed), the first cases a pinned
test draws on the backend, and the fixed inputs every run judges alike (the
regression catalog, and the coverage sweep of every operation for a kernel
declaring them all); the baseline keeps it, and the gate judges no kernel
against a baseline drawn from other inputs (other strategies or sweeps, another
Hypothesis, another seeding or profile).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import zlib
from collections.abc import Mapping

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from ..device.backend import CHOICES
from ..internals import hypothesis_internals
from . import profiles
from .session import GATE_PROFILE, Draws, draws_of

SCHEME = "base + crc32(module.qualname), accuracy tests per dtype"  # in the fingerprint: a new scheme draws other inputs
_base: int | None = None  # this process's base seed, if seeds are pinned
_example: str | None = None  # --replay-example: the one example every Hypothesis test of this process runs
BACKENDS = tuple(name for name in CHOICES if name != "auto")  # the device types a declaration maps


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("softmax", "softmax accuracy suite")
    group.addoption("--replay-example", metavar="VERSION:BLOB",
                    help="run only this example in each Hypothesis test (Hypothesis's @reproduce_failure): what a "
                         "failure's replay line names")


def seed_of(name: str, base: int) -> int:
    return (base + zlib.crc32(name.encode())) % 2**32


def pin_seed(test):
    """Give a test (or the body ``@given`` wraps) its pinned seed, if this run pins seeds, and the one example it
    replays, if the run replays one."""
    if _base is not None:
        hypothesis_internals.pin_seed(test, seed_of(f"{test.__module__}.{test.__qualname__}", _base))
    if _example is not None:
        hypothesis_internals.reproduced(test, _example)
    return test


GATE_DRAWS = Draws(GATE_PROFILE, 0, None)  # what every gate and baseline draws


def draws_fingerprint(backend: str, draws: Draws = GATE_DRAWS, examples: int = 40) -> str | None:
    """A digest of what decides a run's draws and of the first ``examples`` cases a pinned test draws on ``backend``;
    None when seeds are not pinned (the draws are random: no two runs compare).

    The backend's own: each has its size caps (a CUDA baseline taken before its row cap was
    raised flagged torch.softmax, which had not changed, when drawn with the CPU's caps).
    """
    if draws.seed_base is None:
        return None
    # Imported here: the kernels import triton, which the backend must first set up.
    from specs.registry import Capabilities

    from ..inputs.strategies import cases

    drawn = []

    @settings(max_examples=examples, database=None, phases=[Phase.generate], deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(case=cases(Capabilities(), backend))
    def draw(case):
        drawn.append(repr(case))

    hypothesis_internals.pin_seed(draw, seed_of("draws_fingerprint", draws.seed_base))
    draw()
    profile = profiles.registered(draws.profile)
    decided = [SCHEME, f"base {draws.seed_base}", f"max_examples {profile.max_examples}",
               f"phases {sorted(phase.name for phase in profile.phases)}", f"database {draws.database is not None}"]
    return hashlib.sha256("\n".join([*decided, *drawn, *fixed_inputs(backend)]).encode()).hexdigest()[:16]


@functools.cache
def fixed_inputs(backend: str) -> tuple[str, ...]:
    """The inputs every run judges alike on ``backend``, as recipes: the regression catalog, and the coverage sweep of
    each operation for a kernel declaring every operation (a sweep's rows beside a kernel's own boundaries are its
    declaration's: :func:`kernel_fingerprint`)."""
    from specs.operations import OPERATIONS
    from specs.registry import Capabilities

    from ..inputs import coverage
    from ..inputs.catalog import CATALOG
    from ..inputs.strategies import for_operation

    every = Capabilities(**{flag: True for op in OPERATIONS.values() for flag in op.flags})
    swept = [case for op in OPERATIONS.values()
             for case in coverage.sweep(for_operation(every, op), backend, op.dtypes, masked=op.masked,
                                        backward=op.backward, scaled=op.scaled, biased=op.biased)]
    return tuple(repr(case) for case in [*CATALOG.values(), *swept])


def kernel_fingerprint(capabilities, backend: str) -> str:
    """A digest of what in a kernel's declaration decides the inputs drawn for it on ``backend``: its capabilities
    but its promises, and of the per-device ones (row limits, code-path boundaries) the backend's alone.

    :func:`draws_fingerprint` draws for no kernel in particular; a kernel's strategies and its coverage sweep
    follow its own declaration (rows beside each declared boundary, up to its longest row).  New boundaries on
    CUDA drew other inputs for full_softmax, and with them a row none had drawn, which the gate, unaware, took for
    a regression (docs/gate.md): a baseline keeps each kernel's digest, and the gate judges no kernel whose
    declaration draws other inputs.
    """
    chosen = {f.name: getattr(capabilities, f.name) for f in dataclasses.fields(capabilities)
              if f.name not in ("promises", "promises_by_device")}
    return hashlib.sha256(json.dumps(_canonical(chosen, backend), sort_keys=True).encode()).hexdigest()[:16]


def _canonical(value, backend: str):
    """``value`` as JSON data that is the same in every process (sets and mappings sorted); a mapping by device
    type reduced to ``backend``'s entry."""
    if isinstance(value, Mapping):
        if value and set(value) <= set(BACKENDS):
            return _canonical(value.get(backend), backend)
        return sorted([repr(k), _canonical(v, backend)] for k, v in value.items())
    if isinstance(value, (set, frozenset)):
        return sorted(repr(v) for v in value)
    if isinstance(value, (tuple, list)):
        return [_canonical(v, backend) for v in value]
    return value if value is None or isinstance(value, (bool, int, float, str)) else repr(value)


def pytest_configure(config: pytest.Config) -> None:
    """The base the session decided (:func:`harness.plugins.session.draws_of`), and the example replayed, checked."""
    global _base, _example
    _base = draws_of(config).seed_base
    _example = config.getoption("replay_example", None)
    if _example is not None:
        try:
            hypothesis_internals.reproduced(lambda: None, _example)
        except ValueError as error:
            raise pytest.UsageError(f"--replay-example: {error}") from None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """Under ``--replay-example``: a replayed example that passes passes its test (the failure it replays is gone);
    what Hypothesis says of one that fails goes on the failure as notes, as for an example it found."""
    if _example is None:
        return (yield)
    said: list[str] = []
    try:
        with hypothesis_internals.reports_kept(said):
            return (yield)
    except Exception as error:
        if hypothesis_internals.replay_passed(error):
            return None
        for text in said:
            error.add_note(text)
        raise


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list) -> None:
    for item in items:
        if getattr(getattr(item, "obj", None), "is_hypothesis_test", False):
            pin_seed(item.obj)
