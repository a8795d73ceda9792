"""One-step replay of a failure: rebuild the input, run the kernel, judge it against the oracle and torch.

    python -m harness.replay --kernel full_softmax --device cpu --op softmax "Case(shape=(4, 97), ...)"

Every accuracy failure prints this command with its own kernel, device,
operation and case.  A ``module:function`` kernel must be importable, as with
``--kernel`` in a run.  Exit status: 0 within the derived bound, 1 beyond it or
not refused outside the kernel's capabilities, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import math
import sys

from .backend import CHOICES, BackendError, activate

RECIPES = ("Case", "Values", "Layout", "Specials", "Mask")
PREFIX = "replay in one step: "  # how a failure introduces the command; the reports find it by this


def command(kernel: str, device: str, op: str, case) -> str:
    """The shell command that replays ``case`` (its repr holds no double quote)."""
    return f'python -m harness.replay --kernel {kernel} --device {device} --op {op} "{case!r}"'


def line(kernel: str, device: str, op: str, case) -> str:
    """The line a failure prints: the prefix the reports look for, then the command."""
    return PREFIX + command(kernel, device, op, case)


def parse_case(text: str):
    """The Case a failure printed: its repr, read with the recipes' names and torch alone in scope."""
    import torch

    from . import strategies

    scope = {"torch": torch, "inf": math.inf, "nan": math.nan} | {name: getattr(strategies, name) for name in RECIPES}
    try:
        case = eval(text, {"__builtins__": {}}, scope)  # noqa: S307  (names limited to the recipes)
    except Exception as error:  # noqa: BLE001
        raise ValueError(f"CASE: not a Case(...) as a failure prints it: {type(error).__name__}: {error}") from None
    if not isinstance(case, strategies.Case):
        raise ValueError(f"CASE: expected Case(...), got {type(case).__name__}")
    return case


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.replay", description=__doc__.split("\n")[0])
    parser.add_argument("--kernel", required=True, help="a registered name, 'torch', or package.module:function")
    parser.add_argument("--device", default="auto", choices=CHOICES)
    parser.add_argument("--op", default="softmax", choices=("softmax", "masked_softmax", "log_softmax",
                                                            "softmax_fp32_out"))
    parser.add_argument("case", help="the Case(...) the failure printed")
    args = parser.parse_args(argv)
    try:
        backend = activate(args.device)  # before the kernels import triton
        import kernels

        from .judge import OPS, describe_input, judge_softmax, run_kernel

        kernel = kernels.resolve(args.kernel)
        case = parse_case(args.case)
    except (BackendError, ValueError) as error:
        parser.error(str(error))
    op = OPS[args.op]
    x, mask = case.make(backend.device)
    print(f"{kernel.name}, {op.name} on {backend.name} ({backend.device_name}): {describe_input(x, case.dim)}")
    refusal = kernel.capabilities.refusal(x, case.dim)
    try:
        y = run_kernel(kernel, x, case.dim, mask, log=op.log, out_dtype=op.out_dtype)
    except Exception as error:  # noqa: BLE001
        if refusal is None:
            raise
        print(f"refused, as it must be outside its capabilities ({refusal}): {type(error).__name__}: {error}")
        return 0
    if refusal is not None:
        print(f"returned numbers for an input outside its declared capabilities: {refusal}")
        return 1
    verdict = judge_softmax(kernel, backend.name, x, case.dim, y, mask=mask, log=op.log, out_dtype=op.out_dtype,
                            replay=command(args.kernel, backend.name, op.name, case))
    print(verdict.explain())
    return 0 if verdict.ok else 1


if __name__ == "__main__":
    sys.exit(main())
