"""Each special case of :data:`oracles.semantics.RULES` is its own test: where the rule decides a result, the
kernel's must be that result exactly (NaN where NaN, 0 or -inf where the rule says), for softmax, log_softmax and
masked softmax as the kernel declares them.

The input is tiny: the rule's example row and the same row reversed (the special values at the other end), in a dtype
and rank the kernel declares (``harness/inputs/fixed_inputs.py``).  For
masked softmax each row gets one more entry, masked, holding a NaN: masked entries count as -inf whatever they
hold, so the row stays a case of the rule.  The results the rule leaves to arithmetic are the accuracy tests'.
Nothing here is recorded: the gate's categories come from the accuracy tests alone.
"""

import pytest
import torch

from harness.inputs.fixed_inputs import fixed_dtype, row_inputs
from harness.judging.judge import as_rows, describe_input
from oracles import semantics
from oracles.call import Call
from oracles.ulp import ulp_distance
from specs.operations import LOG_SOFTMAX, MASKED_SOFTMAX, SOFTMAX


def rule_input(rule: semantics.Rule, masked: bool, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Two rows that are cases of ``rule`` (and a keep-mask with one masked NaN per row, if ``masked``)."""
    row = torch.tensor(rule.example, dtype=torch.float64)
    x = torch.stack([row, row.flip(0)])
    if not masked:
        return x.to(dtype), None
    x = torch.cat([x, torch.full((2, 1), torch.nan, dtype=torch.float64)], dim=1)
    keep = torch.ones(x.shape, dtype=torch.bool)
    keep[:, -1] = False
    return x.to(dtype), keep


@pytest.mark.first
@pytest.mark.parametrize("op", [SOFTMAX, LOG_SOFTMAX, MASKED_SOFTMAX], ids=lambda op: op.name)
@pytest.mark.parametrize("rule", semantics.RULES, ids=lambda rule: rule.name)
def test_special_case_results_are_exact(kernel, backend, rule, op):
    if not kernel.declares(op):
        pytest.skip(f"{kernel.name} declares no {op.what}")
    capabilities = kernel.capabilities
    x, keep = rule_input(rule, op.masked, fixed_dtype(capabilities))
    inputs = row_inputs(capabilities, x.to(backend.device), None if keep is None else keep.to(backend.device))
    for x, keep in inputs:
        refusal = capabilities.refusal(x, -1)
        if refusal is not None:  # only a row limit or max_offset below the rule's few entries
            pytest.skip(f"{kernel.name} refuses the rule's input: {refusal}")
    for x, keep in inputs:
        call = Call(x, -1, op, backend.name, keep)
        y, logits = as_rows(kernel.run(call), -1), as_rows(call.logits, -1).double()
        decided, results = semantics.decide(logits.numpy(), log=op.log, masked=op.masked)
        wrong = torch.from_numpy(decided) & (ulp_distance(y, torch.from_numpy(results).to(y.dtype)) != 0)
        assert not wrong.any(), (
            f"{kernel.name} {op.name}, special case {rule.name!r} ({rule.why}): got {y[wrong].tolist()} where the "
            f"rule gives exactly {rule.result(log=op.log, masked=op.masked)}; input {logits.tolist()} "
            f"({describe_input(x, -1)})")
