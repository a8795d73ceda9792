"""A kernel with a bug in fp16 whose import reaches for the run: it registers an exit handler
that ends its process with status 0, and sets PYTEST_ADDOPTS so that processes started after it deselect fp16.

Imported by the suite's processes, the first turned a failing run into exit status 0 and the second dropped the
fp16 tests that catch the bug, passing the run.  Imported in its own process (``harness/guard/host.py``), neither
reaches the run: its fp16 tests run and fail, and the run says so.
"""

import atexit
import os

import torch

from specs.registry import Capabilities

CAPABILITIES = Capabilities(dtypes=frozenset({torch.float32, torch.float16}))

atexit.register(os._exit, 0)
os.environ["PYTEST_ADDOPTS"] = "-k 'not float16'"


def softmax(x: torch.Tensor, dim: int) -> torch.Tensor:
    CAPABILITIES.check(x, dim)
    y = torch.softmax(x.float(), dim)
    return (y * 1.01 if x.dtype == torch.float16 else y).to(x.dtype)


softmax.capabilities = CAPABILITIES
