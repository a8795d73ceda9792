"""The suite's installed pytest plugin (pyproject's ``pytest11`` entry point): a run given the suite's options where
pytest does not know them is told the command that runs them.

The suite's options are declared by its own plugins, which its checkout's ``conftest.py`` registers: pytest knows
them in a run whose root is the checkout, one started there or given the checkout's path first
(``python -m pytest CHECKOUT --kernel mine/k.py:softmax``).  Started in another folder without it, or given a path
that moves pytest's root out of the checkout (a kernel file without its ``:function``, taken by pytest for where the
tests are), pytest says no more than "unrecognized arguments".  Loaded in every pytest run of the environment, this
plugin does nothing unless some of those arguments are the suite's options; then it stops the run with a usage
error that names the command to run from there.  It registers none of the suite's plugins (the checkout's
``conftest.py`` does) and imports nothing of the suite's.
"""

from __future__ import annotations

import json
import shlex
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

DISTRIBUTION = "softmax-accuracy-suite"
# The options the suite's plugins declare (harness/plugins/*.py); tests/suite/test_another_folder.py holds this to them.
OPTIONS = frozenset({
    "--device", "--workers-per-device", "--kernel", "--maxfail-per-kernel", "--self-tests",  # harness/plugins/plugin.py
    "--accuracy-report", "--accuracy-baseline", "--update-baseline", "--prune-baseline", "--require-baseline",
    "--soak-seed", "--call-timeout", "--kernel-processes",  # harness/plugins/session.py
    "--replay-example", "--shard", "--test-durations", "--record-durations",  # seeding, sharding, scheduling
    "--soak-deadline", "--soak-minutes", "--soak-examples-per-test", "--soak-fixed", "--soak-log",  # timebox, soak_log
    "--progress-every",  # timebox
})
FUNCTION = "FUNCTION"  # what stands for a kernel's function where a file was named without it


@pytest.hookimpl(wrapper=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]):
    """Once the initial conftests are loaded (the checkout's declares the suite's options): a usage error naming the
    command that runs them, where some of ``args`` are the suite's options and still unknown."""
    loaded = yield
    if not early_config.known_args_namespace.help:
        _, unknown = parser.parse_known_and_unknown_args(args)
        suites = [arg for arg in unknown if arg.partition("=")[0] in OPTIONS]
        if suites:
            raise pytest.UsageError(told(suites, early_config))
    return loaded


def told(suites: list[str], config: pytest.Config) -> str:
    """What a run given the suite's options ``suites`` that pytest does not know is told: why, and the command."""
    args, files = functions_named(list(config.invocation_params.args))
    found = checkout()
    command = shlex.join(["python", "-m", "pytest", str(found or "CHECKOUT"), *args])
    missing = "".join(f"  {file}, a kernel file named without its function, was taken by pytest for where the "
                      f"tests are: name the function too, as path/to/file.py:function." for file in files)
    where = "" if found else " (CHECKOUT: the folder of the suite's checkout)"
    return (f"unrecognized arguments: {' '.join(suites)}: options of the softmax accuracy suite, which pytest knows "
            f"only in a run of the suite's checkout (its conftest.py declares them); this run's root is "
            f"{config.rootpath}.{missing}  From this folder, name the checkout first{where}:\n  {command}")


def functions_named(args: list[str]) -> tuple[list[str], list[str]]:
    """``args`` with each ``--kernel`` value that names a file without its function given ``:FUNCTION``, and
    those files."""
    named, files = [], []
    for i, arg in enumerate(args):
        option, equals, value = arg.partition("=")
        if equals and option == "--kernel" and is_file_without_function(value):
            named.append(f"{arg}:{FUNCTION}")
            files.append(value)
        elif i and args[i - 1] == "--kernel" and is_file_without_function(arg):
            named.append(f"{arg}:{FUNCTION}")
            files.append(arg)
        else:
            named.append(arg)
    return named, files


def is_file_without_function(selector: str) -> bool:
    """Whether a ``--kernel`` value names a file but not the kernel's function in it (as specs/registry.py tells)."""
    return ":" not in selector and (selector.endswith(".py") or "/" in selector)


def checkout() -> Path | None:
    """The suite's checkout: this file's folder where it is one (a run with the checkout on the import path, an
    editable install), else the folder pip installed the suite from (its direct_url.json, PEP 610) while it holds
    the suite; None where neither does."""
    for folder in (Path(__file__).resolve().parent, installed_from()):
        if folder is not None and (folder / "conftest.py").is_file() and \
                (folder / "harness" / "plugins" / "plugin.py").is_file():
            return folder
    return None


def installed_from() -> Path | None:
    """The local folder the suite's distribution was installed from, if it was (not from an index or a VCS URL)."""
    try:
        url = json.loads(metadata.distribution(DISTRIBUTION).read_text("direct_url.json") or "{}").get("url", "")
    except (metadata.PackageNotFoundError, ValueError, AttributeError):  # not installed, or unreadable metadata
        return None
    parsed = urlparse(url)
    return Path(unquote(parsed.path)) if parsed.scheme == "file" else None
