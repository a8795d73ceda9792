"""The operations a kernel may provide, declared once (OpInfo-style: a comment on every field).

The registry's consistency checks (``specs/registry.py``), a kernel's runner (:meth:`KernelSpec.run`), the
judge, the replay command and the one accuracy test over (operation, dtype) (``tests/kernel/test_accuracy.py``)
all read :data:`OPERATIONS`.  Adding an operation is one entry here (docs/extending.md shows the diff); a
kernel declares it with the entry's ``Capabilities`` flag and provides it with the entry's callable.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from oracles.call import Operation

TESTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
"""The input dtypes the suite tests an operation in, unless its entry names fewer."""


@dataclass(frozen=True, kw_only=True)
class Declared(Operation):
    """An operation (what it computes: :class:`oracles.call.Operation`), how a kernel declares and runs it, and
    how the suite tests it."""

    # The Capabilities flags that declare it, all of them (a kernel without one skips its tests); none: every
    # kernel has it.
    flags: tuple[str, ...]
    # The KernelSpec callable that runs it: "softmax" (x, dim), "log_softmax" (x, dim) or "masked_softmax"
    # (x, mask, dim); out_dtype=, when the entry has one, is passed as a keyword.
    runs: str
    what: str  # how a skip names it: "<kernel> declares no <what>"
    dtypes: tuple[torch.dtype, ...] = TESTED_DTYPES  # the input dtypes its accuracy test runs in
    # Its accuracy tests run before the others (pytest mark "first"): they open with the regression
    # catalog, so that a broken kernel fails within a minute.
    first: bool = False


SOFTMAX = Declared(name="softmax", flags=(), runs="softmax", what="softmax", first=True)
MASKED_SOFTMAX = Declared(name="masked_softmax", masked=True, flags=("masked",), runs="masked_softmax",
                          what="masked softmax")
LOG_SOFTMAX = Declared(name="log_softmax", log=True, flags=("log_softmax",), runs="log_softmax", what="log_softmax")
SOFTMAX_FP32_OUT = Declared(name="softmax_fp32_out", out_dtype=torch.float32, flags=("out_dtype",), runs="softmax",
                            what="out_dtype", dtypes=(torch.float16, torch.bfloat16))

OPERATIONS = {op.name: op for op in (SOFTMAX, MASKED_SOFTMAX, LOG_SOFTMAX, SOFTMAX_FP32_OUT)}
"""Every operation by its name, in the order their accuracy tests run."""
