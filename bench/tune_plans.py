"""Tune full_softmax's launch plans on this card, and write the card's table.

    python bench/tune_plans.py [--out kernels/full_softmax/tuned]

For each shape class (``kernels/full_softmax/cuda_plan.py``: the row length
rounded up to a power of two, the element size, masked or not) of the rows that
``bench/softmax_bandwidth.py`` measures, fp32 and half, masked and not, it tries
the settings derived from the constants and a bounded set around them
(``candidates``): warps from a quarter to four times as many (the split
kernels' halved and doubled), tiles of short rows doubled, chunks and spans
halved and doubled.

Each candidate's output on the measured input is first compared with the
derived settings': fp32 outputs (of fp32 rows, and of half rows with
``out_dtype=torch.float32``) must be equal bit for bit, since the PRECISE
arithmetic sums exactly, in any order (``kernels/full_softmax/arithmetic.py``),
so that every card computes the same fp32 bits; half outputs (bf16 and fp16)
equal, or within their derived bound (the suite's oracle and precision model,
on a few of the rows that differ).  A candidate that fails is
recorded, not timed.  The others take turns over ROUNDS rounds, timed as the
bench times (``bench/bandwidth_method.py``), half classes in bf16; a candidate
replaces the derived settings only where its median is more than NOISE faster,
so that on the card the constants were tuned on the table mostly repeats them.

The kernels are compiled first, by parallel processes (Triton's cache keeps
them for this one).  Writes ``<out>/<card>.json``, which
``kernels/full_softmax/tuned_plans.py`` reads: commit it (docs/speed.md).
Needs a CUDA device: without one it says so and exits with status 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import multiprocessing
import os
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.bandwidth_method import card, logits, rotation, shapes, time_ms  # noqa: E402
from harness.judging.judge import measure  # noqa: E402
from kernels import full_softmax  # noqa: E402
from kernels.full_softmax import host, tuned_plans  # noqa: E402
from kernels.full_softmax.cuda_plan import (  # noqa: E402
    Chunked, OnePass, Settings, ShapeClass, Split, derived_settings, gpu_row_warps, path_of, shape_class)
from kernels.full_softmax.launch_cache import CONTIGUOUS_CALLS  # noqa: E402
from kernels.launch import card_name  # noqa: E402
from oracles import correctly_rounded  # noqa: E402
from oracles.call import Call  # noqa: E402
from specs import full_softmax as record  # noqa: E402
from specs.operations import MASKED_SOFTMAX, SOFTMAX  # noqa: E402

ROUNDS = 3
NOISE = 0.02  # run-to-run noise of the bench's timing: a smaller gain is no gain
# Of a half output that differs from the derived settings', the rows judged against the oracle: up to
# JUDGED_ROWS of those that differ, JUDGED_ELEMENTS at most (one row at least).
JUDGED_ROWS = 4
JUDGED_ELEMENTS = 1 << 18
COMPILE_ROWS = 16  # the compiling inputs' rows: a multiple of 16, as the timed inputs' are (Triton specialises on it)
KEEP = 0.9  # the share of a masked row's entries kept
# What each candidate's output is compared in, by element size: (input dtype, out_dtype), those that
# must be equal bit for bit first; and the dtype timed.
CHECKS = {4: ((torch.float32, None),),
          2: ((torch.bfloat16, torch.float32), (torch.bfloat16, None), (torch.float16, None))}
TIMED = {4: torch.float32, 2: torch.bfloat16}
DERIVED = "derived"  # the check of the derived settings themselves
PASSED = ("bitwise", "within bound", DERIVED)


def candidates(shape: ShapeClass) -> list[Settings]:
    """The derived settings, then the valid ones of a bounded set around them."""
    derived = derived_settings(shape)
    if isinstance(derived, OnePass):
        rows, warps = derived.rows, derived.num_warps
        tried = [OnePass(rows, w) for w in around(warps)]
        if rows > 1:  # short rows sharing a tile: twice the tile in twice the warps
            tried.append(OnePass(rows * 2, warps * 2))
    elif isinstance(derived, Chunked):
        chunk, warps = derived.chunk, derived.num_warps
        tried = [Chunked(chunk, w) for w in around(warps)]
        tried += [Chunked(c, gpu_row_warps(c, shape.element_size, shape.masked)) for c in (chunk // 2, chunk * 2)]
    else:
        span, stats, write = derived.span, derived.num_warps, derived.write_warps
        tried = [Split(span, stats // 2, write), Split(span, stats * 2, write), Split(span, stats, write // 2),
                 Split(span, stats, write * 2), Split(span // 2, stats, write), Split(span * 2, stats, write)]
    return [derived] + [settings for settings in dict.fromkeys(tried) if settings != derived and valid(settings, shape)]


def around(warps: int) -> list[int]:
    """Warps to try beside ``warps``: a quarter, half, twice and four times as many."""
    return [warps // 4, warps // 2, warps * 2, warps * 4]


def valid(settings: Settings, shape: ShapeClass) -> bool:
    """Whether a table may hold ``settings`` for ``shape`` (the checks of tuned_plans.read_table)."""
    try:
        tuned_plans.settings_of(dataclasses.asdict(settings), shape, "a candidate")
    except ValueError:
        return False
    return True


def install(card: str, shape: ShapeClass, settings: Settings) -> None:
    """Plan the class ``shape`` with ``settings`` in this process, forgetting the plans and launches
    full_softmax remembers."""
    tuned_plans.TABLES[card] = {shape: settings}
    host.plan.cache_clear()
    CONTIGUOUS_CALLS.clear()


def inputs(rows: int, shape: ShapeClass, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The measured logits of the class's rows, and a mask keeping KEEP of them where the class is masked."""
    x = logits(rows, shape.row_bucket, dtype)
    if not shape.masked:
        return x, None
    return x, torch.rand(x.shape, device=x.device, generator=torch.Generator(x.device).manual_seed(1)) < KEEP


def run(x: torch.Tensor, mask: torch.Tensor | None, out_dtype: torch.dtype | None = None) -> torch.Tensor:
    if mask is None:
        return full_softmax.softmax(x, -1, out_dtype=out_dtype)
    return full_softmax.masked_softmax(x, mask, -1, out_dtype=out_dtype)


def this_card() -> str:
    return card_name(torch.device("cuda", torch.cuda.current_device()))


def compile_candidate(shape: ShapeClass, settings: Settings) -> str | None:
    """In a worker process: run a candidate once on small inputs of each checked dtype, so that Triton
    compiles its kernels into its cache; the error where it fails."""
    install(this_card(), shape, settings)
    try:
        for dtype, out_dtype in CHECKS[shape.element_size]:
            run(*inputs(COMPILE_ROWS, shape, dtype), out_dtype)
        torch.cuda.synchronize()
    except Exception as error:  # noqa: BLE001  (a compiler's error, a launch's: the candidate is refused)
        return f"{type(error).__name__}: {error}"[:300]
    return None


def compile_all(work: list[tuple[ShapeClass, Settings]]) -> dict[tuple[ShapeClass, Settings], str]:
    """Compile every candidate's kernels in parallel processes; the errors, by (class, settings)."""
    workers = max(1, min(16, os.cpu_count() or 1) - 1)
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {item: pool.submit(compile_candidate, *item) for item in work}
        return {item: error for item, future in futures.items() if (error := future.result())}


def compare(expected: torch.Tensor, y: torch.Tensor, x: torch.Tensor, mask: torch.Tensor | None) -> str:
    """How a candidate's output ``y`` compares with the derived settings' ``expected``."""
    if torch.equal(expected, y):
        return "bitwise"
    if y.dtype == torch.float32:
        return "bits differ from the derived settings'"
    rows = (expected != y).any(dim=1).nonzero().flatten()[:max(1, min(JUDGED_ROWS, JUDGED_ELEMENTS // x.shape[1]))]
    call = Call(x[rows], -1, SOFTMAX if mask is None else MASKED_SOFTMAX, "cuda", None if mask is None else mask[rows])
    judged = measure("full_softmax", call, y[rows], correctly_rounded.softmax(call), record.precision(call))
    beyond = int(judged.violations.sum())
    return f"{beyond} elements beyond the derived bound" if beyond else "within bound"


def check(card: str, shape: ShapeClass, tried: list[Settings], errors: dict, rows: int) -> dict[Settings, str]:
    """Each candidate's output against the derived settings' (tried[0]), in every dtype of CHECKS."""
    verdicts = {settings: "fails: " + errors[shape, settings] for settings in tried if (shape, settings) in errors}
    for dtype, out_dtype in CHECKS[shape.element_size]:
        x, mask = inputs(rows, shape, dtype)
        install(card, shape, tried[0])
        expected = run(x, mask, out_dtype)
        for settings in tried[1:]:
            if settings in verdicts:
                continue
            install(card, shape, settings)
            verdict = compare(expected, run(x, mask, out_dtype), x, mask)
            if verdict not in PASSED:
                verdicts[settings] = f"{verdict} ({str(out_dtype or dtype).removeprefix('torch.')} output)"
        del x, mask, expected
    return {settings: verdicts.get(settings, DERIVED if settings == tried[0] else "bitwise") for settings in tried}


def timed_rounds(card: str, shape: ShapeClass, timed: list[Settings], rows: int) -> dict[Settings, list[float]]:
    """GB/s of each candidate in ROUNDS rounds, the candidates in turn: one read and one write of the
    input, and a read of the mask where there is one."""
    x, mask = inputs(rows, shape, TIMED[shape.element_size])
    copies = rotation(x)
    pairs = list(zip(copies, rotation(mask) if mask is not None else [None] * len(copies)))
    nbytes = 2 * x.numel() * x.element_size() + (mask.numel() if mask is not None else 0)
    found = {settings: [] for settings in timed}
    for _ in range(ROUNDS):
        for settings in timed:
            install(card, shape, settings)
            found[settings].append(nbytes / (time_ms(lambda pair: run(*pair), pairs) * 1e-3) / 1e9)
    del x, mask, copies, pairs
    return found


def tune(card: str, shape: ShapeClass, rows: int, tried: list[Settings], errors: dict) -> dict:
    """The class's entry of the table: the settings chosen and every candidate's figures."""
    verdicts = check(card, shape, tried, errors, rows)
    rounds = timed_rounds(card, shape, [s for s in tried if verdicts[s] in PASSED], rows)
    torch.cuda.empty_cache()
    gbps = {settings: statistics.median(found) for settings, found in rounds.items()}
    fastest = max(gbps, key=gbps.get)
    chosen = fastest if gbps[fastest] > (1 + NOISE) * gbps[tried[0]] else tried[0]
    return {"row_bucket": shape.row_bucket, "element_size": shape.element_size, "masked": shape.masked,
            "path": path_of(shape), "settings": dataclasses.asdict(chosen),
            "candidates": [{"settings": dataclasses.asdict(s), "gbps": round(gbps[s], 1) if s in gbps else None,
                            "rounds": [round(g, 1) for g in rounds.get(s, [])], "check": verdicts[s]}
                           for s in tried]}


def line(entry: dict) -> str:
    """One class's outcome, for the log."""
    derived, *others = entry["candidates"]
    chosen = next(c for c in entry["candidates"] if c["settings"] == entry["settings"])
    refused = sum(c["check"] not in PASSED for c in others)
    masked = "masked" if entry["masked"] else ""
    return (f"{entry['row_bucket']:>8} {entry['element_size']}B {masked:<6} {entry['path']:<7} "
            f"derived {derived['gbps']:>7.1f} GB/s  chosen {chosen['settings']} {chosen['gbps']:>7.1f} "
            f"({chosen['gbps'] / derived['gbps']:.3f}x)  refused {refused} of {len(others)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=tuned_plans.TABLES_DIR)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("bench/tune_plans.py times plans on a CUDA device, and this machine has none: nothing tuned.")
        return 2
    start = time.perf_counter()
    name = this_card()
    classes = {shape_class(n, element_size, masked): rows for rows, n in shapes()
               for element_size in CHECKS for masked in (False, True)}
    tried = {shape: candidates(shape) for shape in classes}
    errors = compile_all([(shape, settings) for shape, settings_list in tried.items() for settings in settings_list])
    print(f"{name}: {sum(map(len, tried.values()))} settings of {len(classes)} classes compiled in "
          f"{time.perf_counter() - start:.0f} s, {len(errors)} failed", flush=True)
    entries = []
    for shape, rows in classes.items():
        entries.append(tune(name, shape, rows, tried[shape], errors))
        print(f"{time.perf_counter() - start:4.0f} s {line(entries[-1])}", flush=True)
    device = card()
    document = {"card": name, "date": datetime.date.today().isoformat(), "torch": device["torch"],
                "triton": device["triton"], "classes": entries}
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"{tuned_plans.card_slug(name)}.json"
    path.write_text(json.dumps(document, indent=1) + "\n")
    tuned_plans.read_table(path, name)  # what was written reads back
    changed = sum(entry["settings"] != entry["candidates"][0]["settings"] for entry in entries)
    print(f"wrote {path}: {changed} of {len(entries)} classes tuned away from the derived settings, "
          f"{time.perf_counter() - start:.0f} s in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
