"""Every call of a kernel under test goes through a guard: the input is sacred, the output fresh, a hang stopped.

A kernel can defeat an oracle that trusts it: one that zeroes its input and
returns uniform rows would be judged against the softmax of zeros, and one
that returns the same buffer on every call makes two calls compare a tensor
with itself.  :func:`guarded` wraps a kernel's callables so that each call

* leaves its inputs as it found them, their views (shape, strides, offset,
  dtype, storage) and their storage bit for bit (a copy of every byte is
  taken before the call and compared after it), unless the kernel declares
  itself in place (``Capabilities.in_place``): it then works on a copy, and
  the input the suite judges against is never touched;
* returns a tensor on the input's device that shares no memory with its inputs
  nor with an output it returned earlier that is still alive (the storages of
  earlier outputs are tracked by weak reference: memory freed and reused by
  the allocator is no alarm);
* leaves this thread's floating-point mode as it found it, subnormal numbers
  kept (``harness/internals/subnormals.py``: the suite's own arithmetic shares it);
* leaves torch as it found it: its softmax (the suite's torch control and
  every verdict's torch call it) and its global settings (default dtype and
  device, autocast, modes entered: ``harness/internals/torch_state.py``);
* returns within the watchdog's limit (:class:`Watchdog`).

A broken rule fails the test with :class:`ContractBroken`, naming the call.

Before each call the guard writes a *breadcrumb* (:class:`Breadcrumbs`): the
test, the kernel, the input, the Hypothesis example being run and its replay
command.  A process that dies inside a kernel (a segfault, ``os._exit``, the
watchdog's last resort) leaves it behind, and the controller names that input
in the crash's report; an interrupted run names the calls in progress.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from ..device import tiling
from ..internals import torch_state
from ..internals.subnormals import flushing, restore
from . import replay_command as replay_commands

if TYPE_CHECKING:  # this module is imported before the backend is chosen, so before any kernel (and triton)
    from specs.registry import KernelSpec


def describe_input(x: torch.Tensor, dim: int, grad: torch.Tensor | None = None, bias: torch.Tensor | None = None) -> str:
    """x's view (a backward's y), and a backward's gradient's and a biased call's bias's, whose strides are the clue to
    a stride bug, said apart from the recipe."""
    said = (f"shape={tuple(x.shape)} strides={tuple(x.stride())} offset={x.storage_offset()} "
            f"dtype={x.dtype} dim={dim} device={x.device}")
    for name, t in (("grad", grad), ("bias", bias)):
        if t is not None:
            said += f"; {name} shape={tuple(t.shape)} strides={tuple(t.stride())} offset={t.storage_offset()}"
    return said


class SuiteFailure(AssertionError):
    """A failure the suite explains itself, in a few lines: the report shows its message, not a traceback."""

    def __init__(self, message: str, replay: str | None = None) -> None:
        super().__init__(message)
        self.replay = replay  # the one-step replay command, for the reports


class ContractBroken(SuiteFailure):
    """A kernel call broke a rule every kernel must keep (its input unchanged, a fresh output...)."""


class KernelHang(BaseException):
    """A kernel call outlived the watchdog's limit.

    A BaseException, not an Exception: Hypothesis treats an Exception as a
    failure to shrink, and shrinking a hang would cost the limit per step; this
    one ends the test at once (pytest reports it as a failure) and the run goes on.
    """

    def __init__(self, message: str, replay: str | None = None) -> None:
        super().__init__(message)
        self.replay = replay


# ---------------------------------------------------------------------------- what is running


@dataclass
class Context:
    """What this process is doing, for breadcrumbs and messages: set by the plugin and the test bodies."""

    test: str = ""
    example: str = ""  # the Hypothesis example being run, as keyword arguments
    case: object = None  # its Case, if it has one: then the call has a replay command
    backend: str = ""


CONTEXT = Context()


def set_example(kwargs: dict) -> None:
    """The example a Hypothesis test body is about to run (``timebox.timeboxed`` calls this)."""
    from ..inputs.strategies import Case

    CONTEXT.example = ", ".join(f"{name}={value!r}" for name, value in kwargs.items())
    CONTEXT.case = next((value for value in kwargs.values() if isinstance(value, Case)), None)


def described(spec: KernelSpec, op: str, x: torch.Tensor, dim: int, replay: str | None = None) -> dict:
    """A call of ``spec``'s ``op`` on ``x`` in the test and example running now: what breadcrumbs and messages say;
    ``replay``: the command that replays it, as its caller gave it, else the one of the example running now."""
    return {"test": CONTEXT.test, "kernel": spec.name, "op": op, "input": describe_input(x, dim),
            "example": CONTEXT.example, "replay": replay or replay_command(spec, op),
            "inside": spec.capabilities.refusal(x, dim) is None, "rows": tiling.rows_of(op, x, dim)}


def replay_command(kernel: KernelSpec, op: str) -> str | None:
    """The one-step replay of the example in progress, when it has a Case (for a call whose caller gave none: a
    test calling the kernel's callable itself)."""
    if CONTEXT.case is None or not CONTEXT.backend:
        return None
    return replay_commands.command(kernel, CONTEXT.backend, op, CONTEXT.case)


# ---------------------------------------------------------------------------- breadcrumbs


class Breadcrumbs:
    """One JSON file per process in a run's folder: the kernel call in progress, if any.

    Rewritten twice a call, so kept open and overwritten in place (a rename per write cost a millisecond
    here); a reader meeting a torn write reads no breadcrumb, never a wrong one."""

    def __init__(self, folder: Path | None, process: str) -> None:
        self.path = None if folder is None else Path(folder) / f"{process}.json"
        self._fd: int | None = None

    def started(self, call: dict) -> None:
        self._write({**call, "state": "running", "since": time.time()})

    def finished(self) -> None:
        self._write({"state": "idle"})

    def killed(self, call: dict, why: str) -> None:
        self._write({**call, "state": "killed", "why": why})

    def _write(self, entry: dict) -> None:
        if self.path is None:
            return
        try:
            if self._fd is None:
                self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
            data = json.dumps(entry).encode()
            os.ftruncate(self._fd, 0)
            os.pwrite(self._fd, data, 0)
        except OSError:
            pass  # a breadcrumb is a courtesy for post-mortems: never fail a call for it


def read_breadcrumb(folder: Path | None, process: str) -> dict | None:
    """The last breadcrumb ``process`` left in ``folder``, if any."""
    if folder is None:
        return None
    try:
        return json.loads((Path(folder) / f"{process}.json").read_text())
    except (OSError, ValueError):
        return None


def in_progress(folder: Path | None) -> list[str]:
    """The kernel calls that were running, per the breadcrumbs in ``folder``, as sentences."""
    if folder is None or not Path(folder).is_dir():
        return []
    entries = [read_breadcrumb(folder, path.stem) for path in sorted(Path(folder).glob("*.json"))]
    return [f"{entry.get('test')}: {describe_call(entry)}" for entry in entries
            if entry and entry.get("state") in ("running", "killed")]


def describe_call(entry: dict) -> str:
    """A breadcrumb as a sentence: what was running, on what, and how to replay it."""
    text = f"{entry.get('kernel')} {entry.get('op')} on {entry.get('input')}"
    if entry.get("example"):
        text += f"; example: {entry['example']}"
    if entry.get("replay"):
        text += f"; replay: {entry['replay']}"
    return text


# ---------------------------------------------------------------------------- the watchdog


class Watchdog:
    """A time limit on each kernel call.

    In the main thread an alarm (``SIGALRM``) raises :class:`KernelHang` inside
    the call when the limit passes: a kernel looping in Python, sleeping or
    running in Triton's interpreter stops there, its test fails and the run
    goes on.  A call stuck inside C code (a GPU kernel that never finishes, a
    lock) does not see the alarm; a thread then ends the process ``grace``
    seconds later, after leaving its breadcrumb: under ``pytest -n`` the
    worker's crash fails that test, names its input, and xdist starts a new
    worker.
    """

    EXIT_STATUS = 70  # the status a process ended by the watchdog exits with

    def __init__(self, limit: float | None, grace: float, breadcrumbs: Breadcrumbs) -> None:
        self.limit, self.grace, self.breadcrumbs = limit, grace, breadcrumbs
        self._deadline: float | None = None
        self._call: dict = {}
        self._thread: threading.Thread | None = None

    def watch(self, call: dict, run: Callable[[], object]):
        """``run()`` under the limit."""
        if not self.limit:
            return run()
        in_main = threading.current_thread() is threading.main_thread()
        if in_main:
            previous = signal.signal(signal.SIGALRM, self._alarm)
            signal.setitimer(signal.ITIMER_REAL, self.limit)
        self._call, self._deadline = call, time.monotonic() + self.limit + self.grace
        self._start_thread()
        try:
            return run()
        finally:
            self._deadline = None
            if in_main:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, previous)

    def _alarm(self, signum, frame) -> None:
        signal.setitimer(signal.ITIMER_REAL, 0)
        raise KernelHang(f"{describe_call(self._call)}: the call did not return within {self.limit:g} s "
                         f"(the watchdog's limit, --call-timeout)", self._call.get("replay"))

    def _start_thread(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._last_resort, name="softmax-suite-watchdog", daemon=True)
            self._thread.start()

    def _last_resort(self) -> None:
        while True:
            time.sleep(0.5)
            deadline = self._deadline
            if deadline is not None and time.monotonic() > deadline:
                why = (f"the call did not return within {self.limit:g} s nor stop at the alarm within {self.grace:g} s "
                       "more: the watchdog ended this process")
                self.breadcrumbs.killed(self._call, why)
                sys.stderr.write(f"\nsoftmax suite watchdog: {describe_call(self._call)}: {why}\n")
                sys.stderr.flush()
                os._exit(self.EXIT_STATUS)


# ---------------------------------------------------------------------------- the guard


def storage_bytes(t: torch.Tensor) -> torch.Tensor:
    """The whole storage under ``t`` as a flat uint8 tensor (no copy)."""
    return torch.empty(0, dtype=torch.uint8, device=t.device).set_(t.untyped_storage())


def has_storage(t) -> bool:
    """Whether ``t`` is a dense tensor with memory to snapshot (not meta, sparse or nested)."""
    return (isinstance(t, torch.Tensor) and t.layout == torch.strided and not t.is_nested
            and t.device.type != "meta" and t.untyped_storage().nbytes() > 0)


def undo_flushing() -> str:
    """Turn the flushing of subnormals off, and say whether that worked."""
    still = restore()
    return f"the suite could not undo it ({still})" if still else "the suite turned it off again"


def view_of(t: torch.Tensor) -> tuple:
    """What a tensor's elements are, besides its storage's bytes: which storage, and how it is read."""
    return (tuple(t.shape), t.stride(), t.storage_offset(), t.dtype, t.untyped_storage().data_ptr())


def span(t: torch.Tensor) -> tuple[int, int]:
    storage = t.untyped_storage()
    return storage.data_ptr(), storage.data_ptr() + storage.nbytes()


def overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def working_copy(x: torch.Tensor) -> torch.Tensor:
    """A copy of ``x`` in its own storage, with the same strides and offset (for a kernel that works in place)."""
    return torch.empty(0, dtype=x.dtype, device=x.device).set_(
        x.untyped_storage().clone(), x.storage_offset(), x.shape, x.stride())


class Outputs:
    """Weak references to the storages of the outputs returned so far: one still alive must not come back."""

    def __init__(self, keep: int = 256) -> None:
        self.storages: deque = deque(maxlen=keep)

    def earlier_alive(self, y: torch.Tensor) -> bool:
        mine = span(y)
        return any((s := ref()) is not None and overlap(mine, (s.data_ptr(), s.data_ptr() + s.nbytes()))
                   for ref in self.storages)

    def add(self, y: torch.Tensor) -> None:
        self.storages.append(weakref.ref(y.untyped_storage()))


@dataclass
class Guard:
    """What every guarded call shares in this process: the watchdog, the breadcrumbs, earlier outputs."""

    watchdog: Watchdog
    breadcrumbs: Breadcrumbs
    outputs: Outputs

    def call(self, spec: KernelSpec, op: str, function: Callable, x, dim, args: tuple, kwargs: dict,
             replay: str | None = None):
        if not has_storage(x):  # refused inputs without memory (meta, sparse, nested): nothing to guard
            return function(x, *args, **kwargs)
        named = [(name, t) for name, t in (*zip(argument_names(op), (x, *args)), *kwargs.items()) if has_storage(t)]
        inputs = [t for _, t in named]
        call = self.describe(spec, op, x, dim, replay)
        call["inputs"] = [name for name, _ in named]
        mode = flushing()
        if mode:  # left by an import, or by a call the watchdog stopped before its checks
            raise ContractBroken(f"{describe_call(call)}: before the call, this process's CPU arithmetic {mode}, "
                                 f"left by an earlier call or an import; {undo_flushing()}, and this call is not "
                                 "judged (harness/internals/subnormals.py)", call["replay"])
        left = torch_state.changed()
        if left:  # a registration no one can undo, or a call the watchdog stopped before its checks
            raise ContractBroken(f"{describe_call(call)}: before the call, torch was changed ({', '.join(left)}) by an "
                                 f"earlier call or an import; {torch_state.restore()}, and this call is not judged: "
                                 f"{torch_state.WHY}", call["replay"])
        work = working_copy(x) if spec.capabilities.in_place else x
        before = [(view_of(t), storage_bytes(t).clone()) for t in inputs]
        self.breadcrumbs.started(call)
        try:
            y = self.watchdog.watch(call, lambda: self._checked(call, function, work, inputs, before, args, kwargs))
        except KeyboardInterrupt:
            raise  # the breadcrumb stays: an interrupted run names the calls in progress
        except BaseException:
            self.breadcrumbs.finished()
            raise
        self.breadcrumbs.finished()
        self.outputs.add(y)
        return y

    def describe(self, spec: KernelSpec, op: str, x: torch.Tensor, dim: int, replay: str | None = None) -> dict:
        """The call about to run, as breadcrumbs and messages name it."""
        return described(spec, op, x, dim, replay)

    def _checked(self, call: dict, function, work, inputs, before, args, kwargs):
        """The call, then its rules; inside the watchdog's time, since the checks wait for the device.  How wide the
        call's sums were is noted for its judge (:mod:`harness.device.tiling`)."""
        tiling.starting()
        try:
            y = function(work, *args, **kwargs)
        except Exception as error:
            self._check_inputs(call, inputs, before)
            self._check_subnormals(call)
            if call["inside"] and not isinstance(error, ContractBroken):
                raise ContractBroken(f"{describe_call(call)}: the kernel raised {type(error).__name__}: {error}\n"
                                     "on an input inside its declared capabilities: a kernel refuses only what it "
                                     "does not declare (narrow its capabilities to exclude this input, or handle it)",
                                     call["replay"]) from error
            raise
        self._check_inputs(call, inputs, before)
        self._check_subnormals(call)
        self._check_torch_state(call)
        problem = self._output_problem(y, work, inputs)
        if problem:
            raise ContractBroken(f"{describe_call(call)}: the kernel {problem}", call["replay"])
        tiling.ended(call["kernel"], call["rows"])
        return y

    @staticmethod
    def _check_inputs(call: dict, inputs: list, before: list) -> None:
        def which(k: int) -> str:
            return f"its input {call['inputs'][k]}"

        for k, (t, (view, _)) in enumerate(zip(inputs, before)):
            if view_of(t) != view:
                raise ContractBroken(f"{describe_call(call)}: the kernel changed the view of {which(k)} in place "
                                     f"(shape, strides, offset, dtype: {view} before the call, {view_of(t)} after): "
                                     "the suite would judge the result against another input", call["replay"])
        changed = [k for k, (t, (_, copy)) in enumerate(zip(inputs, before)) if not torch.equal(storage_bytes(t), copy)]
        if changed:
            raise ContractBroken(f"{describe_call(call)}: the kernel changed {which(changed[0])} (its storage differs "
                                 "bit for bit after the call); a kernel that works in place must declare it "
                                 "(Capabilities(in_place=True)), and is then handed a copy", call["replay"])

    @staticmethod
    def _check_subnormals(call: dict) -> None:
        mode = flushing()
        if mode:
            raise ContractBroken(f"{describe_call(call)}: the call left this process's CPU arithmetic flushing: it "
                                 f"{mode} (torch.set_flush_denormal(True), or a library built with -ffast-math "
                                 f"loaded); the suite's own arithmetic would then read subnormal values as zeros. "
                                 f"A kernel must leave the floating-point mode as it found it; {undo_flushing()}",
                                 call["replay"])

    @staticmethod
    def _check_torch_state(call: dict) -> None:
        changed = torch_state.changed()
        if changed:
            raise ContractBroken(f"{describe_call(call)}: the call changed torch ({', '.join(changed)}); a kernel "
                                 f"must leave torch as it found it: {torch_state.WHY}; {torch_state.restore()}",
                                 call["replay"])

    def _output_problem(self, y, work: torch.Tensor, inputs: list) -> str | None:
        if not isinstance(y, torch.Tensor):
            return f"returned a {type(y).__name__}, not a torch.Tensor"
        if y.device != work.device:
            return f"returned its result on {y.device} for an input on {work.device}"
        if not (y.numel() and has_storage(y)):
            return None
        if any(overlap(span(y), span(t)) for t in inputs):
            return "returned a tensor that shares memory with its input"
        if self.outputs.earlier_alive(y):
            return ("returned memory it returned before, still in use: an output buffer reused across calls "
                    "(cached per shape?) overwrites the caller's earlier result")
        return None


def argument_names(op: str) -> tuple[str, ...]:
    """The names of the values operation ``op``'s callable takes, in order (``Declared.arguments``: x, grad, bias...)."""
    from specs.operations import OPERATIONS  # here: the kernels import triton, which the backend sets up first

    return OPERATIONS[op].arguments


def operation_named(runs: str, kwargs: dict) -> str:
    """The operation a call of the callable ``runs`` makes where the caller did not name it (a test calling
    ``kernel.softmax(x, dim)`` itself), by the out_dtype it asks for: the entry asking for that out_dtype, else the
    one asking for none."""
    from specs.operations import OPERATIONS  # here: the kernels import triton, which the backend sets up first

    named = {op.out_dtype: op.name for op in OPERATIONS.values() if op.runs == runs}
    return named.get(kwargs.get("out_dtype"), named[None])


def dim_of(op: str, args: tuple, kwargs: dict) -> int:
    """The dim of a call ``f(x, *args, **kwargs)`` of the operation ``op``: where its entry's arguments put it after
    the first (masked: ``(mask, dim)``), or as a keyword; the last dim for an operation that takes none (causal)."""
    from specs.operations import OPERATIONS

    arguments = OPERATIONS[op].arguments
    at = arguments.index("dim") - 1 if "dim" in arguments else None
    return args[at] if at is not None and at < len(args) else kwargs.get("dim", -1)


def guarded(spec: KernelSpec, guard: Guard) -> KernelSpec:
    """``spec`` with each of its callables (those of ``specs.operations``) going through ``guard``."""
    from specs.operations import OPERATIONS
    from specs.registry import NAMES_ITS_CALL

    def wrap(runs: str, function):
        if function is None:
            return None

        def call(x, *args, operation: str | None = None, replay: str | None = None, **kwargs):
            op = operation or operation_named(runs, kwargs)
            return guard.call(spec, op, function, x, dim_of(op, args, kwargs), args, kwargs, replay)

        call.__wrapped__ = function
        setattr(call, NAMES_ITS_CALL, True)  # KernelSpec.run names the call; a test calling it itself need not
        return call

    return replace(spec, **{runs: wrap(runs, getattr(spec, runs)) for runs in {op.runs for op in OPERATIONS.values()}})
