"""A failed check told on one screen: what failed, on which input, and the command that replays it in one step.

pytest tells a failure by its traceback: the test's source, its arguments (a
KernelSpec's repr alone fills three lines), Hypothesis's frames, the falsifying
example spread over fifteen lines, the lines only failing examples ran: 37 to
92 lines before the message that names the bug.  Under pytest's default
traceback style (``--tb=long``, ``-l`` and ``--full-trace`` bring the whole
traceback back), a failed check of a test that judges a kernel (it takes the
``kernel`` fixture), and any failure the suite explains itself
(:class:`harness.guard.calls.SuiteFailure`, :class:`harness.guard.calls.KernelHang`), is
told instead as (:func:`one_screen`):

* the test's id;
* the exception's type and message: the suite's own (the worst element, its
  row's input, the input's recipe), or an assertion's message without the
  introspection pytest's assertion rewriting appends to it (the message names
  what it compares; an assertion without one keeps it);
* what the kernel raised, with its own traceback, where the failure is a
  broken call that it caused;
* the example the check failed on (``case=Case(...)``, the recipe, and the
  test's other arguments), as the test body saw it (:func:`name_example`); a
  recipe the message already holds is said to be above;
* Hypothesis's notes but its falsifying example (the line above), its
  explanation of which lines only failing examples ran, and its
  ``@reproduce_failure`` decorator (the replay line carries its blob);
* ``replay in one step: COMMAND``: the command the exception carries (the
  accuracy tests' and a broken call's ``python -m harness.replay ...``), else
  :func:`pytest_command`: pytest running that test alone, on that kernel,
  device and Hypothesis profile, with the failing example
  (``--replay-example``, :mod:`harness.plugins.seeding`).

What the kernel said is shown with its control characters written out
(:func:`report.text.printable`): a message cannot clear the terminal or
overwrite the failure with ``ALL PASSED``.

A group of failures (Hypothesis's "distinct failures") is told by its first,
after the group's own line.  An error that is no failed check (a
TypeError in the suite's own code, a Hypothesis error) keeps pytest's
traceback: it is the suite's to debug, not the kernel's.
"""

from __future__ import annotations

import shlex
import traceback

import pytest

from report.text import printable

from ..guard.calls import KernelHang, SuiteFailure
from ..guard.replay_command import PREFIX, PYTHON, RECIPES, from_checkout
from ..internals import hypothesis_internals
from .session import PINNED_PROFILES, session_of

EXAMPLE = "softmax_example"  # the attribute of a failure's exception: the example it failed on, argument -> repr
ASSERTION_INTROSPECTION = "\nassert "  # where pytest's rewritten assertion appends its explanation to the message
RECIPE_CALLS = tuple(f"{recipe}(" for recipe in RECIPES)  # an argument that is an input's recipe, as repr writes it
# The notes Hypothesis adds that the report says in its own lines ("Failing test case" is newer Hypothesis's wording).
HYPOTHESIS_NOTES_LEFT_OUT = ("Falsifying", "Failing test case", "Explanation:", "You can reproduce this example")


def name_example(error: BaseException, kwargs: dict) -> None:
    """Give ``error`` the example (a Hypothesis test body's keyword arguments) it was raised on, for its report."""
    if hasattr(error, EXAMPLE):  # raised in a nested body: the innermost example is the one that failed
        return
    try:
        setattr(error, EXAMPLE, {name: repr(value) for name, value in kwargs.items()})
    except AttributeError:  # an exception type without attributes of its own: told without its example
        pass


def is_failed_check(error: BaseException) -> bool:
    """Whether ``error`` is a check that failed (an assertion, the suite's own failures, ``pytest.fail``, a hung
    kernel call) or a group of them, as opposed to an error of the code that checks."""
    if isinstance(error, BaseExceptionGroup):
        return all(map(is_failed_check, error.exceptions))
    return isinstance(error, (AssertionError, pytest.fail.Exception, KernelHang))


def told_on_one_screen(item: pytest.Item, error: BaseException) -> bool:
    """Whether ``item``'s failure ``error`` gets :func:`one_screen` rather than pytest's traceback."""
    config = item.config
    default_style = (config.getoption("tbstyle", "auto") == "auto" and not config.getoption("showlocals", False)
                     and not config.getoption("fulltrace", False))
    judges = "kernel" in getattr(item, "fixturenames", ())
    return default_style and (isinstance(error, (SuiteFailure, KernelHang)) or judges and is_failed_check(error))


def first_failure(error: BaseException) -> BaseException:
    """The failure a group is told by: its first leaf (``error`` itself, where it is no group)."""
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    return error


def message(error: BaseException) -> str:
    """The exception's message; an assertion's without pytest's introspection when it has a message of its own."""
    text = str(error)
    if isinstance(error, AssertionError) and not isinstance(error, SuiteFailure):
        said, glue, _ = text.partition(ASSERTION_INTROSPECTION)
        if glue and said.strip():
            return said
    return text


def kept_notes(notes) -> list[str]:
    """The notes on a failure but Hypothesis's that the report leaves out, each with its indented continuation
    lines (Hypothesis notes its explanation a line a note)."""
    kept, leaving_out = [], False
    for note in map(str, notes):
        if not note[:1].isspace() or note.startswith("\n"):
            leaving_out = note.strip().startswith(HYPOTHESIS_NOTES_LEFT_OUT)
        if not leaving_out:
            kept.append(note)
    return kept


def one_screen(item: pytest.Item, error: BaseException, replay: str | None) -> str:
    """``error``, a failure of ``item``, told as the module docstring says; ``replay`` is its one-step command."""
    lines = [item.nodeid]
    if isinstance(error, BaseExceptionGroup):
        # Not "Type: message": the reports' headline is the first failure's.  A flaky failure's message holds its
        # example, over lines.
        said = " ".join(error.message.split()).rstrip(".")
        lines.append(f"{said} ({type(error).__name__} of {len(error.exceptions)}); the first, told here (--tb=long "
                     "tells them all):")
        error = first_failure(error)
    text = message(error)
    lines.append(f"{type(error).__name__}: {text}")
    cause = error.__cause__
    if cause is not None:
        lines += ["", "the kernel's own traceback:",
                  *"".join(traceback.format_exception(type(cause), cause, cause.__traceback__)).rstrip().split("\n")]
    example = getattr(error, EXAMPLE, {})
    above = {name for name, shown in example.items() if shown.startswith(RECIPE_CALLS) and shown in text}
    if set(example) - above:
        lines.append("example: " + ", ".join(f"{name} (above)" if name in above else f"{name}={shown}"
                                             for name, shown in example.items()))
    lines += kept_notes(getattr(error, "__notes__", ()))
    if replay and replay not in text:
        lines.append(PREFIX + replay)
    return printable("\n".join(lines))  # the kernel's message and traceback: its control characters shown, not obeyed


def pytest_command(item: pytest.Item, error: BaseException) -> str | None:
    """pytest running ``item`` alone, from the folder the run started in, as this run ran it (kernel, device, Hypothesis
    profile and seeds, the kernel call's limit), on the example ``error`` failed on: the blob of Hypothesis's
    ``@reproduce_failure`` (an explicit example, or a test without Hypothesis, fails again by itself).  None for a
    test that judges no kernel."""
    spec = getattr(item, "callspec", None) and item.callspec.params.get("kernel")
    if spec is None:
        return None
    config, run = item.config, session_of(item.config)
    # A kernel file named relative to where the run started is named by its absolute path, in the test's id too.
    selector = spec.replay_selector or spec.name
    words = [item.nodeid.replace(f"[{spec.name}", f"[{selector}", 1), "--kernel", selector,
             "--device", run.backend.name, "--hypothesis-profile", run.draws.profile]
    if run.draws.seed_base != (0 if run.draws.profile in PINNED_PROFILES else None):  # a soak round's seeds
        words += ["--soak-seed", str(run.draws.seed_base)]
    if config.getoption("call_timeout") is not None:
        words += ["--call-timeout", f"{config.getoption('call_timeout'):g}"]
    example = hypothesis_internals.failure_blob(first_failure(error)) or config.getoption("replay_example")
    if example:
        words += ["--replay-example", example]
    path = f"PYTHONPATH={shlex.quote(spec.pythonpath)} " if spec.pythonpath else ""
    return from_checkout(f"{path}{PYTHON} -m pytest {shlex.join(words)}", config.invocation_params.dir)
