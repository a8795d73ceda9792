"""The run's settings, decided once and in one place: where kernels run, which, what is drawn, gated and reported.

One configure step, :func:`build`, decides them and stores the frozen
:class:`Session` on the config; every plugin reads it with :func:`session_of`,
which builds it on the first ask: the session is the same whichever plugin's
hook asks first, and no hook depends on another having run.  This module's
``pytest_configure`` asks first of all (``tryfirst``): before Hypothesis's own
plugin loads ``--hypothesis-profile`` (and its verbosity variant) on top of the
profile decided here.  Options are declared by the module that reads them
(``--device`` and ``--kernel``: :mod:`harness.plugins.plugin`; the gate's, the report's
and the seed's: here), and decided here.

A gate compares the statistics of a run with a baseline's: it means something
only if the run drew the baseline's inputs.  Which inputs a test draws follows
from its Hypothesis profile, its seed and the example database, so these are
decided here, once, by :func:`decide_draws`, and every consumer (the seed
pinning, the draws fingerprint, the report, the soak's progress lines) reads
them from the session:

* a run given ``--accuracy-baseline`` or ``--update-baseline`` draws the gate's
  inputs: the ``ci`` profile with pinned seeds (base 0), whatever the
  environment says (``CI``, ``HYPOTHESIS_PROFILE``); asking for another
  profile, ``--soak-seed`` or ``--hypothesis-seed`` with it is a usage error;
* any other run takes ``--hypothesis-profile``, else ``$HYPOTHESIS_PROFILE``,
  else ``ci`` where ``CI`` is set, else ``dev``;
* seeds are pinned to a base (``--soak-seed``, else 0 under ``ci`` and
  ``mutation``) plus a hash of the test's name (:mod:`harness.plugins.seeding`), else
  left to Hypothesis.

The configure step also registers the Hypothesis profiles (:mod:`harness.plugins.profiles`)
with the decided example database, loads the decided one, and applies the
Hypothesis internals the draws rely on (:mod:`harness.internals.hypothesis_internals`).

Under ``pytest -n`` each worker also takes its share of the CPU threads:
workers each running torch with every core would oversubscribe the machine.
The run's share is ``OMP_NUM_THREADS`` where set, else every core; each
process passes its own share on to its children (the suite's sub-runs), so a
sub-run inside a loaded gate does not start a thread per core again.
"""

from __future__ import annotations

import gc
import json
import math
import os
import shutil
import signal
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
import torch
from hypothesis import settings
from hypothesis.errors import InvalidArgument

from ..device import pinning
from ..device.backend import Backend, BackendError, activate
from ..internals import hypothesis_internals, subnormals, torch_state
from . import profiles

SESSION = pytest.StashKey["Session"]()
GATE_PROFILE = "ci"  # the profile every baseline is made with, and every gate draws from
PINNED_PROFILES = ("ci", "mutation")  # profiles whose seeds are pinned (the mutation test draws the gate's examples)
# Seconds a kernel call may take before the watchdog stops it.  Under the interpreter a call of the
# largest example (2^15 elements) takes seconds; on devices the first call of a shape compiles its
# Triton kernel, which took up to 60 s alone on an H100 (docs/h100-precision-probe.log) and takes
# longer among a loaded gate's compiles.
CALL_TIMEOUT = {"cpu": 120.0, "cuda": 600.0, "npu": 900.0}
CALL_GRACE = 30.0  # at most this long past the limit (at most the limit again) a call deaf to the alarm may run on
# Kernel processes (kernels named by path) a process of the run keeps alive at once.  On a device each holds a
# context of its own (about 0.7 GB on an H100, and what its allocator keeps): sixty kernels, a process each in each of
# seventeen processes of a run, ran an H100 out of memory.  On the CPU they hold only memory.
KERNEL_PROCESSES = {"cpu": 4, "cuda": 2, "npu": 1}


@dataclass(frozen=True)
class Draws:
    """What decides the inputs Hypothesis draws."""

    profile: str
    seed_base: int | None  # pinned seeds' base; None: Hypothesis's own
    database: str | None  # the example database replayed first ($SOFTMAX_SUITE_EXAMPLES), if any

    def seeds(self) -> str:
        return f"pinned: {self.seed_base} + crc32(test name)" if self.seed_base is not None else "not pinned"

    def describe(self) -> str:
        replayed = f"; replays the example database {self.database}" if self.database else ""
        return f"profile {self.profile}, seeds {self.seeds()}{replayed}"


@dataclass(frozen=True)
class Gate:
    """The accuracy gate asked for: the baseline file and what to do with it."""

    path: Path
    update: bool  # write the run's categories into the baseline instead of judging
    require: bool  # a kernel the baseline does not hold fails
    prune: bool  # with update: drop what the run did not measure
    # `auto` on a device with no committed baseline yet (a first run on an NPU): this run records it, judging nothing,
    # and says so; the next run gates against it.
    first: bool = False


@dataclass(frozen=True)
class Session:
    backend: Backend
    kernels: tuple  # the KernelSpecs under test, each call guarded (harness.guard.calls)
    draws: Draws
    gate: Gate | None
    report: Path | None  # --accuracy-report DIR
    call_timeout: float | None  # seconds; None: no watchdog
    calls: Path  # where each process leaves the breadcrumb of the kernel call in progress
    pool: object  # harness.guard.host.Pool: the kernel processes this process keeps alive, at most --kernel-processes
    # Where kernel processes can write the suite's files (no Landlock: harness.guard.sandbox), a digest of each before
    # any kernel ran, which the end of the run compares; None where they cannot, or no kernel runs in a process.
    files: dict | None = None


GROUP = ("softmax accuracy suite.  Hypothesis profiles (--hypothesis-profile, else $HYPOTHESIS_PROFILE): dev, the "
         "default, a quick randomised look; ci, the gate's pinned draws (chosen when CI is set, and always with "
         "--accuracy-baseline); nightly, ten times ci's examples, randomised, climbing toward the worst error; "
         "mutation, ci's draws stopping at the first failure")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("softmax", GROUP)
    group.addoption("--accuracy-report", metavar="DIR", help="write accuracy.json, summary.md, plots, index.html")
    group.addoption("--accuracy-baseline", metavar="FILE|auto",
                    help="fail when a category's accuracy regresses against this baseline ('auto': "
                         "baselines/<backend>.json); the run draws the baseline's inputs (profile ci, pinned seeds)")
    group.addoption("--update-baseline", action="store_true",
                    help="merge this run's categories into the --accuracy-baseline file instead of gating "
                         "(what the run did not measure is kept)")
    group.addoption("--prune-baseline", action="store_true",
                    help="with --update-baseline: drop from the baseline what this run did not measure")
    group.addoption("--require-baseline", action="store_true",
                    help="fail the gate for a kernel the baseline does not hold (default: named, not gated)")
    group.addoption("--soak-seed", type=int, metavar="N",
                    help="base of every Hypothesis test's pinned seed (a soak round's), keeping the example "
                         "database in use")
    group.addoption("--kernel-processes", type=int, metavar="N",
                    help="kernel processes (kernels named by path) each process of the run keeps alive at once; "
                         "starting another stops the one used least recently (default: "
                         f"{', '.join(f'{k} {v}' for k, v in KERNEL_PROCESSES.items())})")
    group.addoption("--call-timeout", type=float, metavar="SECONDS",
                    help="the watchdog: a kernel call running longer fails its test, naming its input "
                         f"(default: {', '.join(f'{k} {v:g}' for k, v in CALL_TIMEOUT.items())}; 0: no limit)")


def session_of(config: pytest.Config) -> Session:
    """The run's session, built by the first caller."""
    if SESSION not in config.stash:
        config.stash[SESSION] = build(config)
    return config.stash[SESSION]


def draws_of(config: pytest.Config) -> Draws:
    """The run's draws: the session's, else (:mod:`harness.plugins.seeding` loaded as a plugin of its own, without the
    suite's) the same rules for a run without a gate."""
    if config.pluginmanager.has_plugin(__name__):
        return session_of(config).draws
    return decide_draws(config, None)


def gate_of(config: pytest.Config, backend: str) -> Gate | None:
    option = config.getoption("accuracy_baseline")
    update, prune = config.getoption("update_baseline"), config.getoption("prune_baseline")
    if option is None:
        if update or prune:
            raise pytest.UsageError("--update-baseline and --prune-baseline need --accuracy-baseline FILE|auto")
        return None
    if prune and not update:
        raise pytest.UsageError("--prune-baseline goes with --update-baseline")
    root = Path(__file__).resolve().parents[2]
    path = root / "baselines" / f"{backend}.json" if option == "auto" else Path(option)
    first = option == "auto" and not update and not path.exists()
    return Gate(path, update or first, config.getoption("require_baseline"), prune, first)


def decide_draws(config: pytest.Config, gate: Gate | None) -> Draws:
    """The profile, seed base and example database of this run (the rules in the module docstring)."""
    chosen = config.getoption("hypothesis_profile", None)
    soak_seed = config.getoption("soak_seed", None)  # None also where this module is not a plugin of the run
    database = os.environ.get("SOFTMAX_SUITE_EXAMPLES") or None
    if gate is not None:
        clashes = [f"--hypothesis-profile {chosen}" if chosen not in (None, GATE_PROFILE) else None,
                   "--soak-seed" if soak_seed is not None else None,
                   "--hypothesis-seed" if config.getoption("hypothesis_seed", None) is not None else None]
        clashes = [c for c in clashes if c]
        if clashes:
            raise pytest.UsageError(f"--accuracy-baseline draws the baseline's inputs (profile {GATE_PROFILE}, seeds "
                                    f"pinned at 0); {' and '.join(clashes)} would draw others")
        return Draws(GATE_PROFILE, 0, database)
    profile = chosen or profiles.default_profile()
    base = soak_seed if soak_seed is not None else 0 if profile in PINNED_PROFILES else None
    return Draws(profile, base, database)


def load_profile(draws: Draws) -> None:
    """Register the suite's profiles with the run's example database, and load the run's, with its bound on
    shrinking."""
    profiles.register(draws.database)
    try:
        settings.load_profile(draws.profile)
    except InvalidArgument:
        raise pytest.UsageError(f"--hypothesis-profile {draws.profile!r}: no such profile; the suite registers "
                                f"{', '.join(profiles.NAMES)} (harness/plugins/profiles.py)") from None
    hypothesis_internals.bound_shrinking(profiles.SHRINKING_SECONDS.get(draws.profile))


def call_timeout(config: pytest.Config, backend: str) -> float | None:
    given = config.getoption("call_timeout")
    limit = CALL_TIMEOUT[backend] if given is None else given
    if not math.isfinite(limit) or limit < 0:
        raise pytest.UsageError(f"--call-timeout must be a finite number of seconds >= 0 (0: no limit); got {given}")
    return limit or None


def calls_folder(config: pytest.Config) -> Path:
    """Where each process leaves its breadcrumb: a folder the controller makes (and removes at the end of a run that
    finished); xdist workers get the controller's."""
    worker = getattr(config, "workerinput", None)
    if worker is not None:
        return Path(worker["softmax_calls"])
    return Path(tempfile.mkdtemp(prefix="softmax-suite-calls-"))


def interrupt_on_sigterm() -> None:
    """SIGTERM as Ctrl-C: pytest then finishes the session, and the report says INTERRUPTED and names the calls
    in progress, where the default action would end the run without a word."""
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        def interrupt(signum, frame):
            raise KeyboardInterrupt("SIGTERM")

        signal.signal(signal.SIGTERM, interrupt)


def thread_share() -> int:
    """This process's CPU threads: the run's (:func:`harness.device.pinning.cpu_threads`) shared among xdist workers."""
    return max(1, pinning.cpu_threads(os.environ) // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))


def kernels_under_test(config: pytest.Config, backend: Backend, host) -> list:
    """The KernelSpecs ``--kernel`` names (default: the registered kernels but the peers), each checked against the
    suite's size caps: a registered kernel imported here, any other run in its own process by ``host(selector)``
    (:mod:`harness.guard.host`)."""
    refuse_flushing("before any kernel was imported (set by the environment or a module loaded at start-up)")
    torch_state.remember()
    import specs  # only now: the backend decides how @triton.jit decorates the kernels

    from ..inputs.coverage import boundaries_beyond_caps
    from ..guard.host import import_refusal

    names = config.getoption("kernel")
    registered = {spec.name for spec in specs.registered()}
    try:
        selected = [specs.resolve(name) if name in registered or ":" not in name else host(name)
                    for name in names if name != "all"]
    except (ValueError, ImportError) as error:
        raise pytest.UsageError(str(error)) from None
    refusal = import_refusal(', '.join(names) or 'the registered ones')
    if refusal:
        raise pytest.UsageError(refusal)
    if "all" in names:  # every registered kernel, peers included (skipped where their library is absent)
        selected = specs.registered() + [spec for spec in selected if spec not in specs.registered()]
    selected = selected or [spec for spec in specs.registered() if spec.by_default]
    for spec in selected:
        beyond = boundaries_beyond_caps(spec.capabilities, backend.name)
        if beyond:
            raise pytest.UsageError(f"{spec.name} declares code-path boundaries at row lengths {beyond} on "
                                    f"{backend.name}, past the suite's size caps (harness/inputs/strategies.py "
                                    f"SIZE_CAPS): one side of each would never be tested")
    return selected


def refuse_flushing(when: str) -> None:
    """UsageError where this process's CPU arithmetic flushes subnormal numbers: the suite judges nothing so."""
    mode = subnormals.flushing()
    if mode:
        raise pytest.UsageError(subnormals.refusal(mode, when))


def kernel_pool(config: pytest.Config, backend: str):
    """This process's pool of kernel processes, of ``--kernel-processes`` (else the backend's default)."""
    from ..guard.host import Pool

    given = config.getoption("kernel_processes")
    try:
        return Pool(KERNEL_PROCESSES[backend] if given is None else given)
    except ValueError as error:
        raise pytest.UsageError(str(error)) from None


def declared_by_the_run(config: pytest.Config) -> dict[str, dict]:
    """An xdist worker's: the declarations of the kernels named by path, as the controller read them (each worker
    starts a kernel's process at its first call, not at configure); {} elsewhere."""
    from ..guard import crossing

    given = getattr(config, "workerinput", {}).get("softmax_declarations")
    return crossing.decode(json.loads(given), []) if given else {}


def suite_files(config: pytest.Config, gate: Gate | None) -> dict | None:
    """The run's first process's digest of the suite's files and baseline, taken before any kernel process starts,
    where a kernel named by path could write them (:mod:`harness.guard.sandbox`: no Landlock here); else None."""
    from ..guard import sandbox

    if hasattr(config, "workerinput") or sandbox.abi() or not any(":" in name for name in config.getoption("kernel")):
        return None
    return sandbox.fingerprint(Path(__file__).resolve().parents[2], gate.path if gate else None)


def build(config: pytest.Config) -> Session:
    """The configure step: decide the run's settings (the module docstring) and set this process up for them."""
    from ..guard.calls import CONTEXT, Breadcrumbs, Guard, Outputs, Watchdog, guarded
    from ..guard.host import hosted, is_hosted

    torch.set_num_threads(thread_share())
    os.environ["OMP_NUM_THREADS"] = str(torch.get_num_threads())
    try:
        backend = activate(config.getoption("device"), os.environ.get("PYTEST_XDIST_WORKER"))
    except BackendError as error:
        raise pytest.UsageError(str(error)) from None
    calls = calls_folder(config)
    limit = call_timeout(config, backend.name)
    grace = min(CALL_GRACE, limit or CALL_GRACE)
    crumbs = Breadcrumbs(calls, os.environ.get("PYTEST_XDIST_WORKER", "main"))
    guard = Guard(Watchdog(limit, grace, crumbs), crumbs, Outputs())
    CONTEXT.backend = backend.name
    pool = kernel_pool(config, backend.name)
    declared = declared_by_the_run(config)
    gate = gate_of(config, backend.name)
    files = suite_files(config, gate)
    kernels = kernels_under_test(config, backend, lambda selector: hosted(selector, backend, limit, grace, crumbs, pool,
                                                                          declared.get(selector)))
    draws = decide_draws(config, gate)
    hypothesis_internals.use_own_home()
    hypothesis_internals.mine_no_constants()
    load_profile(draws)
    report = Path(config.getoption("accuracy_report")) if config.getoption("accuracy_report") else None
    if not hasattr(config, "workerinput"):
        interrupt_on_sigterm()
    # A hosted kernel's calls are guarded in its own process (harness.guard.host).
    kernels = tuple(spec if is_hosted(spec) else guarded(spec, guard) for spec in kernels)
    return Session(backend, kernels, draws, gate, report, limit, calls, pool, files)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    session_of(config)
    freeze_what_is_loaded(config)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """Before xdist starts the workers (its own hook runs last), with the report's folder made."""
    config = session.config
    if not hasattr(config, "workerinput"):
        config.invocation_params = replace(config.invocation_params, args=paths_joined(config))


def paths_joined(config: pytest.Config) -> tuple[str, ...]:
    """The run's arguments, each option's value that names an existing path joined to its option
    (``--accuracy-report=/tmp/run``).

    xdist starts every worker with these arguments, which it parses anew, before any plugin is
    loaded: pytest then takes a lone argument naming an existing path for where to look for
    pytest.ini.  A report folder outside the checkout, which the controller has just made, sent
    every worker to look there: none found the suite's options, all crashed, and nothing was
    tested.  Joined to its option, a value is no longer such an argument.  (The controller's own
    parse is pytest's: a path outside the checkout that exists before the run must be written
    so by the user, as the README says.)
    """
    args = list(config.invocation_params.args)
    joined: list[str] = []
    while args:
        arg = args.pop(0)
        if args and arg.startswith("--") and "=" not in arg and takes(config, arg, args[0]):
            arg = f"{arg}={args.pop(0)}"
        joined.append(arg)
    return tuple(joined)


def takes(config: pytest.Config, option: str, value: str) -> bool:
    """Whether ``option`` took ``value`` as its value, and ``value`` names an existing path."""
    try:
        taken = config.getoption(option[2:].replace("-", "_"))
    except ValueError:  # not an option of this run's parser
        return False
    values = taken if isinstance(taken, list) else [taken]
    return value in [str(v) for v in values] and (config.invocation_params.dir / value).exists()


def freeze_what_is_loaded(config: pytest.Config) -> None:
    """Keep the garbage collector off the objects loaded so far (torch's, Triton's, Hypothesis's: garbage none
    of them) until the run ends: each full collection walked them all, and pytest collects five times at
    exit, about a second of every process's start and stop, the suite's sub-runs included (docs/timings.md).
    Registered before pytest's own clean-ups, the thaw runs after them."""
    gc.freeze()
    config.add_cleanup(gc.unfreeze)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """xdist: each worker leaves its breadcrumbs in the controller's folder, and is given the declarations of the
    kernels named by path."""
    from ..guard import crossing
    from ..guard.host import declarations_of

    run = session_of(node.config)
    node.workerinput["softmax_calls"] = str(run.calls)
    declared = {spec.name: declarations_of(spec) for spec in run.kernels if declarations_of(spec) is not None}
    node.workerinput["softmax_declarations"] = json.dumps(crossing.encode(declared, []))


def pytest_unconfigure(config: pytest.Config) -> None:
    """The controller removes the breadcrumbs of a run that ended; a process that died never gets here, and its
    breadcrumb stays for the post-mortem its report's placeholder points to."""
    run = config.stash.get(SESSION, None)
    if run is not None and not hasattr(config, "workerinput"):
        shutil.rmtree(run.calls, ignore_errors=True)
