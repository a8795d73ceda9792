"""Hostile kernels that reach for the suite's process from inside a call: each must fail, or pass where
it is right, whatever it does there.

Each takes fp32 only and is judged as a user's kernel of unknown construction, in a process of its own
(``harness/guard/host.py``):

* ``detach_trick``: a temperature bug (softmax of x / 2, 9e7 ULP off) that sets its input's ``detach`` to return
  x / 2, so that a judge reading the input through the kernel's object would judge the bug right: the suite keeps
  its own input, and the bug fails.
* ``attribute_on_output``: the same bug, its output carrying a ``detach`` that returns the right softmax: a
  tensor with attributes does not cross.
* ``subclass_output``: a right softmax returned as a tensor subclass: it does not cross.
* ``skips`` / ``xfails``: raise pytest's skip or xfail inside the call, which would read as a skipped or an
  expected failure: a kernel's call must return or raise an Exception.
* ``exits_zero``: ends its process with status 0 inside the call, which would end a run without ``-n`` "passed".
* ``holds_the_gil``: loops in C holding the GIL (``sum(range(1 << 62))``), deaf to every signal: its process is
  killed at the call's limit.
* ``sleeps_in_precision``: a right softmax whose ``precision(call)`` never returns: stopped as a call is.
* ``leaves_a_thread``: a right softmax that leaves a thread running forever: it passes, and the run ends.
* ``undoes_its_guard``: replaces the call guard in its process by a bare call, then raises on every later input,
  its declared ones too: the suite's process holds it to the guard's rule all the same.
* ``floods_its_answer``: returns a tensor of a hundred times its input's bytes and more than 1 MiB, which the
  suite's process would read whole: an answer's tensors are capped by its call's.
* ``refuses_at_length``: an ordinary kernel raising a ValueError that prints its input, 5 MiB of message past the
  4 MiB a header may hold: the suite's read failed and it then waited on the live process for good; now the message
  is cut in the kernel's process and the error told.
* ``names_its_arithmetic_at_length``: a right softmax whose precision model names its arithmetic in 6 MiB: no
  such answer crosses; its process is killed and the test fails, naming the input.
* ``cuts_its_answer``: sends the length of an answer and not its bytes, then loops holding the GIL: the suite's
  read blocked for good; the exchange's deadline kills it at the call's limit.
"""

import gc
import os
import struct
import sys
import threading
import time
from dataclasses import replace
from multiprocessing.connection import Connection

import pytest
import torch

from oracles.bounds import PrecisionProfile
from specs.registry import Capabilities, unknown_profile

CAPABILITIES = Capabilities(dtypes=frozenset({torch.float32}))


class Marked(torch.Tensor):
    """A tensor subclass: what it does when read is its own code."""


def detach_trick(x: torch.Tensor, dim: int) -> torch.Tensor:
    CAPABILITIES.check(x, dim)
    hot = torch.softmax(x / 2, dim)
    x.detach = lambda: x / 2
    return hot


def attribute_on_output(x: torch.Tensor, dim: int) -> torch.Tensor:
    CAPABILITIES.check(x, dim)
    y = torch.softmax(x / 2, dim)
    y.detach = lambda: torch.softmax(x, dim)
    return y


def subclass_output(x: torch.Tensor, dim: int) -> torch.Tensor:
    CAPABILITIES.check(x, dim)
    return torch.softmax(x, dim).as_subclass(Marked)


def skips(x: torch.Tensor, dim: int) -> torch.Tensor:
    CAPABILITIES.check(x, dim)
    pytest.skip("nothing to see here")


def xfails(x: torch.Tensor, dim: int) -> torch.Tensor:
    CAPABILITIES.check(x, dim)
    pytest.xfail("known")


def exits_zero(x: torch.Tensor, dim: int) -> torch.Tensor:
    CAPABILITIES.check(x, dim)
    print("exits_zero: leaving with status 0", file=sys.stderr, flush=True)
    os._exit(0)


def holds_the_gil(x: torch.Tensor, dim: int) -> torch.Tensor:
    CAPABILITIES.check(x, dim)
    sum(range(1 << 62))
    return torch.softmax(x, dim)


def sleeps_in_precision(x: torch.Tensor, dim: int) -> torch.Tensor:
    CAPABILITIES.check(x, dim)
    return torch.softmax(x, dim)


def never_answers(call) -> PrecisionProfile:
    time.sleep(3600)
    return unknown_profile(call)


def leaves_a_thread(x: torch.Tensor, dim: int) -> torch.Tensor:
    CAPABILITIES.check(x, dim)
    threading.Thread(target=time.sleep, args=(3600,), daemon=False).start()
    return torch.softmax(x, dim)


def undoes_its_guard(x: torch.Tensor, dim: int) -> torch.Tensor:
    from harness.guard import calls

    if getattr(calls.Guard.call, "undone", False):
        raise ValueError("x: not today")
    calls.Guard.call = lambda self, spec, op, function, x, dim, args, kwargs: function(x, *args, **kwargs)
    calls.Guard.call.undone = True
    return torch.softmax(x, dim)


def floods_its_answer(x: torch.Tensor, dim: int) -> torch.Tensor:
    return torch.zeros(100 * x.numel() + (1 << 18), dtype=x.dtype, device=x.device)


def refuses_at_length(x: torch.Tensor, dim: int) -> torch.Tensor:
    raise ValueError(f"x: I do not like this input: {'x' * (5 << 20)}")


def names_its_arithmetic_at_length(x: torch.Tensor, dim: int) -> torch.Tensor:
    CAPABILITIES.check(x, dim)
    return torch.softmax(x, dim)


def at_length(call) -> PrecisionProfile:
    profile = unknown_profile(call)
    return PrecisionProfile(replace(profile.arithmetic, name="a" * (6 << 20)), profile.reduction)


def cuts_its_answer(x: torch.Tensor, dim: int) -> torch.Tensor:
    CAPABILITIES.check(x, dim)
    for found in gc.get_objects():  # the kernel process's end of the pipe to the suite
        if isinstance(found, Connection) and not found.closed:
            found._send(struct.pack("!i", 1000))  # the length of an answer, and never its bytes
    sum(range(1 << 62))  # deaf to its process's alarm, which would tell the suite of a hang after those four bytes
    return torch.softmax(x, dim)


for _kernel in (undoes_its_guard, detach_trick, attribute_on_output, subclass_output, skips, xfails, exits_zero, holds_the_gil,
                sleeps_in_precision, leaves_a_thread, floods_its_answer, refuses_at_length, names_its_arithmetic_at_length,
                cuts_its_answer):
    _kernel.capabilities = CAPABILITIES
sleeps_in_precision.precision = never_answers
names_its_arithmetic_at_length.precision = at_length
