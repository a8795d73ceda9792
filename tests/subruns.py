"""The environment every sub-run a suite test starts gets: this run's, without what belongs to this run alone.

Left out: ``TRITON_INTERPRET`` (each sub-run's backend decides it before Triton loads) and xdist's worker
variables (a sub-run is no worker of this run: under them a soak counts this run's workers and gives each test a
larger share of its round, and a sub-run takes this worker's share of the CPU threads as its whole).
"""

import os

LEFT_OUT = ("TRITON_INTERPRET", "PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT")


def environment(pythonpath: bool = True, **env: str) -> dict[str, str]:
    """This process's environment without :data:`LEFT_OUT`, with ``env`` added; ``pythonpath=False``: without
    ``PYTHONPATH`` too, as the shell that pastes a printed command has none."""
    left_out = LEFT_OUT if pythonpath else (*LEFT_OUT, "PYTHONPATH")
    return {**{k: v for k, v in os.environ.items() if k not in left_out}, **env}
