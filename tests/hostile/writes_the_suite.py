"""A hostile kernel that, at its import, writes the suite's files, as the same user may: a ``.pyc`` beside the judge
(a stale-proof one would make every later process load a judge that finds nothing), a file in the checkout, and the
baseline the gate reads (opened for appending: nothing written, its modification time moved).  Its softmax is a
temperature bug (softmax of x / 2).

Under Landlock each write fails (PermissionError), and the bug fails its test.  Where there is no Landlock, the
writes land, and the run gives no verdict: the suite's files changed.  ``WROTE`` says which of them landed.
"""

from pathlib import Path

import torch

from specs.registry import Capabilities

ROOT = Path(__file__).resolve().parents[2]
PLANTED = "planted-by-a-kernel"  # the name of every file it writes
TARGETS = (ROOT / "harness" / "judging" / "__pycache__" / f"{PLANTED}.pyc", ROOT / "harness" / "judging" / f"{PLANTED}.py",
           ROOT / "baselines" / "cpu.json")
WROTE = []
for _target in TARGETS:
    try:
        _target.parent.mkdir(exist_ok=True)
        with open(_target, "a") as _file:  # the baseline: appended nothing; the others: created empty
            _file.write("")
        WROTE.append(str(_target))
    except OSError:
        pass


def softmax(x: torch.Tensor, dim: int) -> torch.Tensor:
    CAPABILITIES.check(x, dim)
    return torch.softmax(x / 2, dim)


CAPABILITIES = Capabilities(dtypes=frozenset({torch.float32}))
softmax.capabilities = CAPABILITIES
