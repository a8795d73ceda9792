"""What judging one example costs a worker: a kernel's accuracy tests, alone in one process, over the examples
they judged.

    python bench/example_cost.py [--kernel torch] [--device cpu] [--threads 1] [--seconds 20] [--seed 1]
                                 [--tests softmax-float32 ...]

Runs ``python -m pytest`` on ``test_output_within_derived_bound[KERNEL-TEST]`` for each test given, one process
(no xdist), as a soak's round does: the ``nightly`` profile, seeds pinned by ``--seed`` (the same examples in the
same order every run of one suite version), each test ended by its share of a ``--seconds`` time box, with
``OMP_NUM_THREADS`` set to ``--threads`` (a soak's worker has its share of the cores, not all of them).  It prints,
per test, the examples judged (the records of its accuracy report), the test's seconds (pytest's JUnit XML) and
milliseconds per example.  The kernel's own time is in it; on a GPU it is a small part.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernel", default="torch")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--tests", nargs="+", default=["softmax-float32", "log_softmax-float32"])
    args = parser.parse_args()
    ids = [f"tests/kernel/test_accuracy.py::test_output_within_derived_bound[{args.kernel}-{t}]" for t in args.tests]
    with tempfile.TemporaryDirectory() as folder:
        env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}
        env.pop("PYTEST_XDIST_WORKER_COUNT", None)
        subprocess.run([sys.executable, "-m", "pytest", "-p", "no:xdist", "-p", "no:cacheprovider", "-q", *ids,
                        "--kernel", args.kernel, "--device", args.device, "--hypothesis-profile", "nightly",
                        f"--soak-seed={args.seed}", f"--soak-deadline={time.time() + args.seconds}",
                        f"--soak-minutes={args.seconds / 60}",
                        f"--accuracy-report={folder}", f"--junitxml={folder}/junit.xml"],
                       cwd=ROOT, env=env, check=True, capture_output=True)
        records = json.loads((Path(folder) / "accuracy.json").read_text())["records"]
        examples = Counter(r["test"].split("::")[-1] for r in records)
        cases = ElementTree.parse(Path(folder) / "junit.xml").iter("testcase")
        seconds = {case.get("name"): float(case.get("time")) for case in cases}
    print(f"{'test':<56} {'examples':>8} {'seconds':>8} {'ms/example':>10}")
    for name, spent in seconds.items():
        print(f"{name:<56} {examples[name]:>8} {spent:>8.2f} {1000 * spent / max(examples[name], 1):>10.1f}")


if __name__ == "__main__":
    main()
