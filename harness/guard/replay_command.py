"""The shell command that replays a case in one step (``python -m harness.replay ...``), as a failure prints it.

Apart from :mod:`harness.replay`, which runs the command: the kernel-call guard (:mod:`harness.guard.calls`) names the
command in its breadcrumbs and messages, and the replay imports the guard.
"""

from __future__ import annotations

import shlex
import shutil
import sys
from pathlib import Path

# The recipes a printed case is written in, by the names their reprs give them: the replay reads no other call.
RECIPES = ("Case", "Values", "Layout", "Specials", "Mask", "Seam", "Bias")
PREFIX = "replay in one step: "  # how a failure introduces the command; the reports find it by this
CHECKOUT = Path(__file__).resolve().parents[2]


def interpreter() -> str:
    """How a printed command names this Python: ``python`` where that is this interpreter and no virtual environment
    is active, else its absolute path, so that a line pasted in another shell (where the environment is not active:
    "No module named 'torch'") runs the Python that ran the suite."""
    found = shutil.which("python")
    if sys.prefix == sys.base_prefix and found and Path(found).resolve() == Path(sys.executable).resolve():
        return "python"
    return shlex.quote(sys.executable)


PYTHON = interpreter()


def command(kernel, device: str, op: str, case) -> str:
    """The shell command that replays ``case``, pasted in the folder the run started in (the case's repr holds no
    double quote).

    ``kernel`` is a KernelSpec (or a selector): a kernel given by file is named by its absolute path, and one
    imported from a folder outside the checkout brings the PYTHONPATH it needs, so the command runs as printed.
    """
    selector = kernel if isinstance(kernel, str) else kernel.replay_selector or kernel.name
    path = "" if isinstance(kernel, str) or not kernel.pythonpath else f"PYTHONPATH={shlex.quote(kernel.pythonpath)} "
    return from_checkout(
        f'{path}{PYTHON} -m harness.replay --kernel {shlex.quote(selector)} --device {device} --op {op} "{case!r}"')


def from_checkout(command: str, folder: Path | None = None) -> str:
    """``command``, which runs from the checkout's root (the suite's modules and test ids are found from there), as
    it runs when pasted in ``folder`` (default: this process's working folder, where the run started): as it is in
    the checkout's root, else in a subshell that goes there first, leaving the user's shell where it is."""
    folder = Path.cwd() if folder is None else folder
    if folder.resolve() == CHECKOUT:
        return command
    return f"(cd {shlex.quote(str(CHECKOUT))} && {command})"
