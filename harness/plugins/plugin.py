"""The suite's pytest plugin: device and kernel selection, header, fixtures.

Each hook does one job:

* ``pytest_addoption``: ``--device`` and ``--kernel`` (decided, with the rest
  of the run's settings, by :mod:`harness.plugins.session`'s configure step, which
  activates the backend before any kernel import);
* ``pytest_report_header``: what ran where, with versions;
* ``pytest_xdist_auto_num_workers``: ``-n auto`` on GPUs and NPUs counts devices;
* ``pytest_generate_tests``: one test per kernel for tests that take ``kernel``;
* ``pytest_collection_modifyitems``: with ``--kernel``, only those tests (the
  suite's tests of itself with ``--self-tests``);
* fixtures ``backend``, ``note`` and ``invariance``;
* ``pytest_runtest_protocol``: tells the kernel-call guard which test runs
  (:mod:`harness.guard.calls`), for its breadcrumbs;
* ``pytest_handlecrashitem`` (xdist): a worker that died inside a kernel call
  left a breadcrumb; the crash's report names that call;
* ``pytest_terminal_summary``: figures that tests report with the ``note``
  fixture (they travel on test reports, see :mod:`harness.internals.payload`), and the
  coverage matrix of the accuracy tests (:mod:`harness.inputs.coverage`).
"""

from __future__ import annotations

import os

import hypothesis
import mpmath
import numpy
import pytest
import torch

from report.text import printable

from ..device import pinning
from ..device.backend import CHOICES, Backend, BackendError, resolve_name, runtime, stack
from ..guard import calls, sandbox
from ..internals import payload
from ..internals.payload import REPLAY
from ..judging.invariance import Invariance
from . import known, session

NOTES = "notes"
# Said of a kernel without a precision model: a run passing it says less (the example kernel's fp16 sum, its
# planted bug, passes these bounds and fails its declared model's).
LOOSEST = " (declares no precision: judged by the loosest known arithmetic's bounds, which a precision model tightens)"
DECLARED = (" (declares a precision model: judged by its own profiles' bounds, each refused in its test if looser "
            "than the loosest known arithmetic summed in any order, folding tiles as a known construction does)")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("softmax", "softmax accuracy suite")
    group.addoption(
        "--device", default="auto", choices=CHOICES,
        help="where kernels run: auto (npu, else cuda, else cpu), cpu (Triton interpreter), cuda, npu",
    )
    group.addoption(
        "--workers-per-device", type=int, default=None, metavar="N",
        help="with -n auto on GPUs or NPUs: N xdist workers per device (default: the CPU cores shared out)",
    )
    group.addoption(
        "--kernel", action="append", default=[], metavar="NAME|module:function|file.py:function",
        help="kernel to validate (repeatable): a registered name, 'torch', 'all' (every registered kernel, the "
             "peers too), or a callable with torch.softmax's signature given as package.module:function or "
             "path/to/file.py:function; runs the tests that judge kernels (add --self-tests for the suite's own); "
             "default: the registered kernels but the peers, and every test",
    )
    group.addoption(
        "--maxfail-per-kernel", type=int, default=0, metavar="N",
        help="stop judging a kernel after N failed tests: its later tests are skipped, saying so (each xdist worker "
             "counts its own); for many kernels at once, as the mutation test's planted bugs",
    )
    group.addoption(
        "--self-tests", action="store_true",
        help="with --kernel: also run the suite's tests of itself (oracle, bounds, reports, drivers, mutation score), "
             "which a run without --kernel always runs",
    )


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto`` on a device backend: workers per device times devices; on the CPU, xdist's own count."""
    try:
        name = resolve_name(config.getoption("device"))
        if name == "cpu":
            return None
        devices = pinning.visible_list(name, os.environ)
        count = len(devices) if devices else runtime(name).device_count()
    except BackendError:
        return None  # the configure step reports it
    return pinning.workers(count, config.getoption("workers_per_device"), os.cpu_count() or 1)


def precision_said(spec, unknown_profile) -> str:
    """Beside a kernel's name: where its bounds come from ("" for a registered kernel's reviewed record; only kernels
    named by a path carry a replay selector)."""
    if spec.precision is unknown_profile:
        return LOOSEST
    return DECLARED if spec.replay_selector else ""


def pytest_report_header(config: pytest.Config) -> list[str]:
    import triton  # after the configure step: the backend must be active before triton loads

    from specs.registry import unknown_profile

    run = session.session_of(config)
    names = ", ".join(spec.name + precision_said(spec, unknown_profile) for spec in run.kernels)
    limit = f"{run.call_timeout:g} s" if run.call_timeout else "none"
    return [
        f"softmax suite backend: {run.backend.describe()}",
        printable(f"kernels: {names}"),  # names a user's kernel files gave
        *(printable(f"  {spec.name} declares {said}") for spec in run.kernels
          if (said := spec.capabilities.said(run.backend.name))),
        *kernel_processes_said(run),
        f"draws: {run.draws.describe()}; {caps_said(run.backend.name)}; kernel call watchdog: {limit}",
        f"torch {torch.__version__}, triton {triton.__version__}, hypothesis {hypothesis.__version__}, "
        f"mpmath {mpmath.__version__} ({mpmath.libmp.BACKEND} backend), numpy {numpy.__version__}",
        *([f"{run.backend.name} stack: {stack_said(said)}"] if (said := stack(run.backend.name)) else []),
    ]


def stack_said(stack: dict[str, str]) -> str:
    """"torch_npu 2.7.1, CANN 8.5, INF_NAN_MODE_FORCE_DISABLE=1": versions, then the settings (environment variables)."""
    return ", ".join(f"{name}={value}" if "_" in name and name.isupper() else f"{name} {value}"
                     for name, value in stack.items())


def kernel_processes_said(run) -> list[str]:
    """The line on the kernels named by path: how many processes they may hold alive at once, the run over."""
    from ..guard.host import is_hosted

    hosted = sum(is_hosted(spec) for spec in run.kernels)
    if not hosted:
        return []
    context = "" if run.backend.name == "cpu" else f", each with a {run.backend.name} context of its own from its first call"
    return [f"kernel processes: {hosted} kernel(s) named by path, each run in a process of its own started at its "
            f"first call; each process of the run (each xdist worker) keeps at most {run.pool.cap} alive "
            f"(--kernel-processes){context}; {sandbox.protection()}"]


def caps_said(backend: str) -> str:
    """The size caps of the drawn inputs, said: a code path a kernel takes only on longer rows is not judged
    (a declared path boundary past them is refused: ``harness/plugins/session.py``)."""
    from ..inputs.strategies import SIZE_CAPS

    caps = SIZE_CAPS[backend]
    return (f"rows drawn up to {caps.max_row} elements ({caps.max_elements} for seams and the sides of declared "
            f"boundaries), {caps.max_elements} an input")


def pytest_collection_modifyitems(config: pytest.Config, items: list) -> None:
    """``--kernel``: the tests that judge a kernel (they take the ``kernel`` fixture), unless ``--self-tests``."""
    if not config.getoption("kernel") or config.getoption("self_tests"):
        return
    judging = [item for item in items if "kernel" in getattr(item, "fixturenames", ())]
    if len(judging) < len(items):
        config.hook.pytest_deselected(items=[item for item in items if item not in judging])
        items[:] = judging


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "kernel" in metafunc.fixturenames:
        run = session.session_of(metafunc.config)
        backend = run.backend.name
        params = []
        for spec in run.kernels:
            why = spec.skip_reason(backend) if spec.skip_reason else None
            params.append(pytest.param(spec, id=spec.name, marks=[pytest.mark.skip(reason=f"{spec.name}: {why}")]
                                       if why else []))
        metafunc.parametrize("kernel", params)


@pytest.fixture(scope="session")
def backend(request: pytest.FixtureRequest) -> Backend:
    return session.session_of(request.config).backend


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem):
    calls.CONTEXT.test, calls.CONTEXT.example, calls.CONTEXT.case = item.nodeid, "", None
    yield
    calls.CONTEXT.test = ""


def judged_kernel(item: pytest.Item) -> str | None:
    """The name of the kernel ``item`` judges, if it takes one."""
    spec = getattr(item, "callspec", None) and item.callspec.params.get("kernel")
    return getattr(spec, "name", None)


KERNEL_FAILURES = pytest.StashKey[dict]()  # kernel name -> the tests of it that failed in this process


def pytest_runtest_setup(item: pytest.Item) -> None:
    limit, kernel = item.config.getoption("maxfail_per_kernel"), judged_kernel(item)
    failed = item.config.stash.setdefault(KERNEL_FAILURES, {}).get(kernel, [])
    if limit > 0 and kernel and len(failed) >= limit:
        pytest.skip(f"{kernel} failed {len(failed)} test(s) already, first {failed[0]} (--maxfail-per-kernel {limit})")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call):
    report = (yield).get_result()
    # A known finding's failure (harness/plugins/known.py marks its report later) is none of the kernel's failures.
    if report.failed and (kernel := judged_kernel(item)) and not known.known_failure(item, call):
        failed = item.config.stash.setdefault(KERNEL_FAILURES, {}).setdefault(kernel, [])
        if item.nodeid not in failed:
            failed.append(item.nodeid)


@pytest.hookimpl(optionalhook=True)
def pytest_handlecrashitem(crashitem: str, report, sched) -> None:
    """A worker died: if it died inside a kernel call, its breadcrumb says which, on what input."""
    crumb = calls.read_breadcrumb(session.session_of(report.node.config).calls, report.node.gateway.id)
    if crumb and crumb.get("state") in ("running", "killed") and crumb.get("test") == crashitem:
        why = crumb.get("why", "the process died during the call")
        report.longrepr = printable(f"{report.longrepr}: {why}; the call: {calls.describe_call(crumb)}")
        setattr(report, REPLAY, crumb.get("replay"))


@pytest.fixture
def note(request: pytest.FixtureRequest):
    """Record a line for the end-of-run summary: ``note("escalation rate 1e-5")``."""

    def record(text: str) -> None:
        payload.add(request.node, NOTES, f"{request.node.nodeid}: {text}")

    return record


@pytest.fixture
def invariance(kernel, backend: Backend, request: pytest.FixtureRequest):
    """``with invariance("batch") as batch: ... batch.check(a, b, what)``: measure one of the kernel's
    bitwise invariances, failing only if the kernel promised it on this backend."""

    def measure(name: str) -> Invariance:
        return Invariance(request.node, kernel.name, name, name in kernel.capabilities.promised(backend.name))

    return measure


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    lines = sorted(
        line
        for reports in terminalreporter.stats.values()
        for report in reports
        for line in payload.of(report, NOTES)
    )
    if lines:
        terminalreporter.write_sep("-", "softmax suite figures")
        for line in lines:
            terminalreporter.write_line(printable(line))
    from ..inputs.coverage import write_matrices  # imports the kernels, which wait for the configure step's backend

    write_matrices(terminalreporter)
