"""Time from a gate's start to its first reported failure, for planted bugs.

    python bench/first_failure.py [--device cpu|cuda|npu] [--mutant NAME ...] [--checkout DIR] [--self-tests]

Each planted bug (``specs/mutants.py``) is validated as a user validates a kernel, under
the ``ci`` profile, stopping at the first failure:
``python -m pytest -n auto -x --hypothesis-profile ci --device D --kernel specs.mutants:NAME``.
Printed per bug: the seconds from the command's start to the first failure reported by name
(the suite says each as it happens; pytest, at the end of the run), and the test that failed.  ``--checkout DIR`` (repeatable) times those checkouts of the suite instead (this
one and an earlier commit, say), with this machine's Python, in the same run.  ``--self-tests`` runs the project's whole gate
instead, the suite's own tests and the registered kernels beside the planted bug, as the
README's gate command runs them (a bug planted in one of this project's kernels).  The defaults are three bugs of different
kinds: one the regression catalog holds (a finite fill value), one of the arithmetic
(accumulation in the half dtype), one that only drawn inputs reveal (long rows losing their
last element), which Hypothesis then shrinks.  Targets: 60 s on an H100, 120 s on
2 CPU cores.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MUTANTS = ("finite_fill", "half_accumulation", "skip_last_of_long_rows")
DEFAULT_KERNELS = ("full_softmax", "fused_softmax", "rowwise", "torch")  # what the README's gate command judges


def selector(checkout: Path, mutant: str) -> str:
    """The planted bug's ``--kernel`` selector in ``checkout`` (checkouts older than specs/ kept them in kernels/)."""
    return f"{'specs' if (checkout / 'specs' / 'mutants.py').exists() else 'kernels'}.mutants:{mutant}"


def first_failure(checkout: Path, device: str, mutant: str, limit: float, whole_gate: bool) -> tuple[float, str]:
    """Seconds to the first failure reported by name (the suite's ``failure:`` line as it happens, else pytest's
    ``FAILED`` line at the end of the run), and that failure's test id.  The run is killed then, or ``limit``
    seconds after its start."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_XDIST_WORKER", "TRITON_INTERPRET")}
    command = [sys.executable, "-u", "-m", "pytest", "-p", "no:cacheprovider", "-n", "auto", "-x",
               "--hypothesis-profile", "ci", "--device", device, "--kernel", selector(checkout, mutant)]
    if whole_gate:
        command += [arg for kernel in DEFAULT_KERNELS for arg in ("--kernel", kernel)] + ["--self-tests"]
    start = time.perf_counter()
    process = subprocess.Popen(command, cwd=checkout, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               start_new_session=True, text=True, errors="replace")
    timer = threading.Timer(limit, os.killpg, (process.pid, signal.SIGKILL))
    timer.start()
    said = None
    for line in process.stdout:
        said = re.match(r"(?:failure:|FAILED) (\S+)", line)
        if said:
            os.killpg(process.pid, signal.SIGKILL)
            break
    process.wait()
    timer.cancel()
    seconds = time.perf_counter() - start
    return seconds, said.group(1) if said else f"no failure reported (exit {process.returncode})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--mutant", action="append", help=f"a planted bug of specs/mutants.py (default {MUTANTS})")
    parser.add_argument("--checkout", action="append", type=Path, default=[],
                        help="a checkout of the suite to time (repeatable; default: this one)")
    parser.add_argument("--self-tests", action="store_true",
                        help="the whole gate: the suite's own tests and the gate's kernels too")
    parser.add_argument("--limit", type=float, default=600, help="seconds after which a run is killed (default 600)")
    args = parser.parse_args()
    for checkout in [path.resolve() for path in args.checkout] or [ROOT]:
        for mutant in args.mutant or MUTANTS:
            seconds, test = first_failure(checkout, args.device, mutant, args.limit, args.self_tests)
            print(f"{checkout.name:<12} {args.device:<5} {mutant:<24} {seconds:6.1f} s: {test}", flush=True)


if __name__ == "__main__":
    main()
