"""Bandwidth of the softmaxes people train with: the backwards and attention's scaled, biased and causal softmax.

    python bench/training_softmax.py [--out DIR] [--dtypes float16 bfloat16 float32] [--kernel SELECTOR ...]

For each operation of ``specs/operations.py`` that is neither the forward
softmax nor one of its forward variants (softmax_backward,
log_softmax_backward, scaled_softmax, biased_softmax, causal_softmax), it
times every kernel that declares the operation and runs on the GPU: the
registered ones (torch's eager ops, rowwise; the peers Liger-Kernel, FlagGems,
FlagGems' scaled softmax and torch.compile, where their libraries import) and
any ``--kernel`` given (the README's example by default), each through
``KernelSpec.run`` as the suite's league calls it, so that a figure is of the
adapter the league judged.  A kernel refusing a shape (its declared limits) is
shown as refusing it; one failing on it is left out of that shape, its error
printed.

The inputs are attention's: ``(1, heads, N, N)`` with ``heads * N * N =
ELEMENTS`` for N of 256, 1024 and 4096 (one row of scores per query, every head in
one tensor); logits randn * 8, the scale 1/sqrt(64); the bias an additive
mask of every query's keys, ``(1, 1, N, N)``, -10000 on the last eighth of the
keys (padding) and randn elsewhere; a backward's y the softmax of those
logits, its gradient randn.  GB/s count the bytes a call must move: its
tensor inputs once each (the bias once, broadcast over heads) and its output.
``copy`` is ``y.copy_(x)`` of one input tensor, the practical limit.  Each
kernel's error is measured as its largest absolute difference from torch's
float64 result of the same inputs (the oracle's judgement of these kernels is
the league's: ``python -m pytest --kernel all``).

Timing: ``bench/bandwidth_method.py`` (CUDA graphs of calls over inputs rotated
through four L2 caches), the providers in turn, ROUNDS rounds after one not
counted; each figure the median.  Every ratio is between figures of this run.
On a machine without a GPU the script runs once, tiny, under the Triton
interpreter, as a smoke check: its numbers are not performance.

Writes ``training.json`` (the card, then every figure) to ``--out`` (default
``docs/bench``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

import torch

SMOKE = not torch.cuda.is_available()
if SMOKE:
    os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.bandwidth_method import SCALE, card, copies, failure, time_ms  # noqa: E402
from oracles.call import Call  # noqa: E402
from specs.operations import OPERATIONS, Declared  # noqa: E402
from specs.registry import KernelSpec, registered, resolve  # noqa: E402

ROUNDS = 3
WARMUP_ROUNDS = 1
ELEMENTS = 1 << 25  # per tensor: 64 MiB in fp16, past four L2 caches of an H100 with its rotation
WIDTHS = [256, 1024, 4096]
HEAD_DIM = 64  # the scale is 1/sqrt(HEAD_DIM), as attention's
PADDING = -10000.0  # the bias of a padded key, as BERT's and Megatron's masks
TRAINING = [op for op in OPERATIONS.values() if op.backward or op.scaled]
DEFAULT_KERNELS = ["examples/my_kernels.py:softmax"]
BACKEND = "cpu" if SMOKE else "cuda"


def kernels(selectors: list[str]) -> list[KernelSpec]:
    """The kernels timed: every registered one declaring a training operation that runs here, then the ones
    asked for."""
    chosen = [spec for spec in registered() if any(spec.declares(op) for op in TRAINING)
              and (spec.skip_reason is None or spec.skip_reason(BACKEND) is None)]
    return chosen + [resolve(selector) for selector in selectors]


def inputs(operation: Declared, n: int, dtype: torch.dtype, device: str, heads: int | None = None) -> Call:
    """The call timed for ``operation`` on rows of ``n`` (module docstring), the same in every run."""
    heads = heads or max(1, ELEMENTS // (n * n))
    generator = torch.Generator(device=device).manual_seed(0)

    def randn(*shape):
        return torch.randn(*shape, device=device, generator=generator)

    x = (randn(1, heads, n, n) * SCALE).to(dtype)
    scale = 1 / math.sqrt(HEAD_DIM)
    if operation.backward:
        y = torch.log_softmax(x.float(), -1) if operation.log else torch.softmax(x.float(), -1)
        return Call(x=y.to(dtype), dim=-1, operation=operation, backend=BACKEND, grad=randn(*x.shape).to(dtype))
    bias = None
    if operation.biased:
        bias = randn(1, 1, n, n)
        bias[..., n - n // 8:] = PADDING
        bias = bias.to(dtype)
    return Call(x=x, dim=-1, operation=operation, backend=BACKEND, scale=scale, bias=bias)


def tensors(call: Call) -> list[torch.Tensor]:
    return [t for t in (call.x, call.grad, call.bias) if t is not None]


def as_rows(call: Call) -> Call:
    """``call`` on a 2-D view of its rows, for a kernel that takes rank 2 only: the same rows, the bias broadcast
    to x's shape and made a tensor of its own (read whole, as such a kernel must)."""
    def rows(t):
        return None if t is None else t.broadcast_to(call.x.shape).flatten(0, -2).contiguous()

    return Call(x=rows(call.x), dim=-1, operation=call.operation, backend=call.backend, grad=rows(call.grad),
                scale=call.scale, bias=rows(call.bias))


def moved_bytes(call: Call) -> int:
    """The bytes one call must move: each tensor input once, and the output (x's size and dtype)."""
    return sum(t.numel() * t.element_size() for t in tensors(call)) + call.x.numel() * call.x.element_size()


def reference(call: Call) -> torch.Tensor:
    """torch's result of ``call`` in float64 (its inputs converted exactly, the scale's product exact)."""
    def wide(t):
        return None if t is None else t.double()

    wide_call = Call(x=wide(call.x), dim=call.dim, operation=call.operation, backend=call.backend,
                     grad=wide(call.grad), scale=call.scale, bias=wide(call.bias))
    return resolve("torch").run(wide_call)


def rotated_calls(call: Call) -> list[Call]:
    """``call`` and enough copies of its tensors to fill bandwidth_method's L2 caches (the bias shared, as a model
    reads one mask for every layer's heads)."""
    nbytes = sum(t.numel() * t.element_size() for t in (call.x, call.grad) if t is not None)
    return [call] + [Call(x=call.x.clone(), dim=call.dim, operation=call.operation, backend=call.backend,
                          grad=None if call.grad is None else call.grad.clone(), scale=call.scale, bias=call.bias)
                     for _ in range(copies(nbytes) - 1)]


def measure(operation: Declared, specs: list[KernelSpec], n: int, dtype: torch.dtype) -> dict:
    call = inputs(operation, n, dtype, "cuda")
    result = {"operation": operation.name, "N": n, "shape": list(call.x.shape),
              "dtype": str(dtype).removeprefix("torch."), "gbps": {}, "rounds": {}, "max_abs_error": {},
              "refused": {}, "failed": {}}
    exact = reference(call)
    rows = None if operation.causal else as_rows(call)  # a causal mask needs the square: no 2-D view of it
    providers, nbytes = {}, {}
    for spec in specs:
        if not spec.declares(operation):
            continue
        given = call
        if spec.capabilities.call_refusal(call) is not None and rows is not None:
            given = rows  # a kernel of rank 2 only, given the rows as a user of it would
        if (refusal := spec.capabilities.call_refusal(given)) is not None:
            result["refused"][spec.name] = str(refusal)[:200]
        elif error := failure(spec.name, lambda: spec.run(given)):
            result["failed"][spec.name] = error
        else:
            if given is rows:
                result.setdefault("as_rows", []).append(spec.name)
            error = (spec.run(given).double().reshape(exact.shape) - exact).abs()
            result["max_abs_error"][spec.name] = error.nan_to_num(nan=math.inf).max().item()
            providers[spec.name] = (spec.run, rotated_calls(given))
            nbytes[spec.name] = moved_bytes(call)  # the operation's bytes, whatever view a kernel was given
    del exact
    copy_inputs = [c.x for c in rotated_calls(call)]
    providers["copy"] = (lambda x: torch.empty_like(x).copy_(x), copy_inputs)
    nbytes["copy"] = 2 * call.x.numel() * call.x.element_size()
    rounds = {name: [] for name in providers}
    for number in range(WARMUP_ROUNDS + ROUNDS):
        for name, (fn, given) in providers.items():
            if name in result["failed"]:
                continue
            if number < WARMUP_ROUNDS:  # its first time in a CUDA graph
                if error := failure(name, lambda: time_ms(fn, given)):
                    result["failed"][name] = error
                continue
            rounds[name].append(nbytes[name] / (time_ms(fn, given) * 1e-3) / 1e9)
    result["rounds"] = {name: gbps for name, gbps in rounds.items() if name not in result["failed"]}
    result["gbps"] = {name: statistics.median(gbps) for name, gbps in result["rounds"].items()}
    del call, rows, providers, copy_inputs
    torch.cuda.empty_cache()
    return result


def table(results: list[dict], names: list[str]) -> list[str]:
    """One line a measurement: each kernel's GB/s (or why none), then its ratio to torch's eager ops and to a copy,
    and its largest error."""
    lines = [f"{'operation':<22}{'dtype':<10}{'N':>6} " + "".join(f"{n[:16]:>17}" for n in names)
             + "   fastest: /torch  /copy   max abs error (fastest, torch)"]
    for r in results:
        g = r["gbps"]
        cells = "".join(f"{g[n]:>17.0f}" if n in g else
                        f"{'fails' if n in r['failed'] else 'refuses' if n in r['refused'] else '-':>17}"
                        for n in names)
        timed = [n for n in g if n != "copy"]
        fastest = max(timed, key=g.get) if timed else None
        summary = (f"   {fastest[:16]:<16} {g[fastest] / g['torch']:>5.2f} {g[fastest] / g['copy']:>6.2f}   "
                   f"{r['max_abs_error'][fastest]:.2e}, {r['max_abs_error'].get('torch', math.nan):.2e}"
                   if fastest and "torch" in g else "")
        lines.append(f"{r['operation']:<22}{r['dtype']:<10}{r['N']:>6} {cells}{summary}")
    return lines


def smoke(specs: list[KernelSpec]) -> None:
    """Each operation of each kernel once, tiny, under the interpreter: that it runs and how far from float64."""
    print("No GPU: a smoke run under the Triton interpreter. These numbers are NOT performance.")
    for operation in TRAINING:
        call = inputs(operation, 16, torch.float32, "cpu", heads=2)
        exact = reference(call)
        rows = None if operation.causal else as_rows(call)
        for spec in specs:
            given = call if rows is None or spec.capabilities.call_refusal(call) is None else rows
            if spec.declares(operation) and spec.capabilities.call_refusal(given) is None:
                start = time.perf_counter()
                y = spec.run(given)
                elapsed = time.perf_counter() - start
                print(f"  {operation.name:<22} {spec.name:<32} ran in {elapsed * 1e3:8.1f} ms, max abs error "
                      f"{(y.double().reshape(exact.shape) - exact).abs().max().item():.2e}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("docs/bench"))
    parser.add_argument("--dtypes", nargs="+", default=["float16", "bfloat16", "float32"])
    parser.add_argument("--kernel", nargs="*", default=DEFAULT_KERNELS,
                        help="kernels timed beside the registered ones (--kernel selectors)")
    args = parser.parse_args()
    specs = kernels(args.kernel)
    if SMOKE:
        smoke(specs)
        return
    names = [spec.name for spec in specs] + ["copy"]
    results = []
    for operation in TRAINING:
        for dtype in (getattr(torch, name) for name in args.dtypes):
            for n in WIDTHS:
                results.append(measure(operation, specs, n, dtype))
            print("\n".join(table(results[-len(WIDTHS):], names)), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    device = card()
    (args.out / "training.json").write_text(json.dumps({"device": device, "results": results}, indent=1) + "\n")
    print(f"\n{device['name']}: {device['sms']} SMs, L2 {device['l2_mib']} MiB; torch {device['torch']}, "
          f"triton {device['triton']}")
    print("\n".join(table(results, names)))


if __name__ == "__main__":
    main()
