"""Under ``pytest -n``, idle workers take tests queued on busy ones (xdist's ``worksteal``).

xdist's default, ``load``, hands each worker a share of the collection up front.
The suite's tests differ in length by a factor of a thousand (an accuracy test
with its coverage sweep and cold Triton compiles runs minutes, a bounds test
milliseconds), and on the H100 one worker was left running four accuracy tests
in a row while fifteen sat idle, for half the gate's time.  A ``--dist`` given
on the command line is kept.
"""

from __future__ import annotations

import pytest


def explicit_dist(args: tuple[str, ...]) -> bool:
    return any(arg == "--dist" or arg.startswith("--dist=") or arg == "-d" for arg in args)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    if getattr(config.option, "dist", "no") == "load" and not explicit_dist(config.invocation_params.args):
        config.option.dist = "worksteal"
