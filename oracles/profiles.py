"""Measured and documented arithmetic of each backend, and the profiles built from it.

Figures in ulps of fp32 (fractional: |computed - exact| / ulp(exact)):

* Triton interpreter (numpy on the CPU): numpy's SIMD float32 ``exp`` is
  documented to err by at most 2.52 ulp (measured here: 2.44 over 25M arguments
  in [-104, 0]), its ``log`` measured at 3.05 ulp (4 here); division is IEEE (0.5); its fp32 -> bf16 conversion truncates
  (``_convert_float`` in triton/runtime/interpreter.py rounds toward zero unless
  asked otherwise: 1 ulp of bf16) and garbles bf16 subnormals both ways (1e-39
  becomes 4.2e-39 stored, 4.4e-39 loaded, below the smallest normal all the same:
  tests/suite/test_profiles.py);
  fp16 conversion is numpy's, to nearest.
* Triton on NVIDIA: ``tl.exp`` is ``ex2.approx.f32`` of ``x * log2(e)``;
  measured on an H100 (Triton 3.6) at most 2 + 1.16 |d| ulp, so 2.5 + 1.25 |d|
  here; ``/`` is ``div.full.f32``, measured at most 2.04 ulp, so 2.5;
  subnormal results were not flushed (docs/h100-precision-probe.log).  ``tl.log``
  is ``lg2.approx``: 2 ulp plus 2^-21 absolute here until tests/suite/test_profiles.py
  measures it on the device.
* Triton on Ascend: nothing is documented and nothing has been measured here;
  the profile is deliberately loose (exp 4 + 2|d|, division 3 ulp, order-free
  summation, flushing, conversion toward zero) until it is measured on an NPU.
* torch on the CPU: Sleef's ``expf_u10`` (1.0 ulp; measured 0.57) and
  ``logf_u10`` (measured 0.54), a
  reciprocal then a product (0.5 + 1.0 ulp of the result), conversions to half
  formats to nearest.  Its sums take different trees for the last dim and
  other dims, so its profile uses the order-free depth n - 1.  Over a dim
  other than the last, its scalar path stores exp(x - max) in the output
  dtype before dividing (``_vec_softmax`` in aten/src/ATen/native/cpu/
  SoftMaxKernel.cpp): a double rounding for fp16 and bf16, up to 1.38 ULP
  measured, which the suite found; that path has its own profile.  Its
  log_softmax keeps the sum and its log in ``scalar_t`` arrays, so for fp16
  and bf16 both are rounded to the input dtype (0.56 ULP measured).
* torch on CUDA: ``expf`` (2 ulp, CUDA programming guide), an IEEE division
  or a reciprocal and a product (1.5 ulp covers both), order-free depth.  Its
  log_softmax subtracts ``max + log(sum)``, rounded first
  (``LogSoftMaxForwardEpilogue`` in aten/src/ATen/native/cuda/SoftMax.cu): an
  fp32 row [-106.08, 17.72, -132.19, -44.84, 15.43] erred by 0.59 ULP in the
  nightly H100 soak, beyond a bound without that rounding (0.56).  Its
  softmax backward forms ``tmp = grad * output`` as a tensor in the input
  dtype (``softmax_backward_cuda_out``), then ``tmp - output * sum(tmp)`` in
  fp32: for fp16 and bf16 each product is rounded to the half format first
  (an fp16 row erred by 0.94 ULP against a bound of 0.52 without that
  rounding, on an H100: docs/findings/softmax-backward.md).
* A user's kernel of unknown construction: the loosest of every known
  arithmetic (:func:`loosest` of these and of those the kernels' records
  declare: ``specs.registry.unknown_arithmetic``), in each respect at once:
  the largest exp, division and log errors, flushing, the loosest
  conversions, exp stored in the output dtype before the division, the log
  terms in the output dtype, no recovery of the gap's rounding, fp32 compute,
  and no claim of monotonicity; never a step that is a reported bug
  (:func:`correct_construction`: torch's CUDA log_softmax rounding max +
  log(sum) before the subtraction; its softmax backward rounding the products
  grad * y to the input dtype); summed in any order, folding tiles as
  often as a known construction (:func:`folded_in_any_order`);
  tests/suite/test_bounds.py checks, element by element, that its bound is at
  least every other profile's.
* A user's kernel that declares its precision: each profile it gives is refused
  where it is looser than that (:func:`looser_than`,
  :func:`looser_sum`, ``specs.registry.precision_model``): a model tightens the
  bounds, never loosens them.

Biases (``exp_bias_ulps``, ``div_bias_ulps``: the largest |mean signed error|,
in ulps of fp32 at the exact value; :mod:`oracles.bias` says what they bound):

* a division, a reciprocal or a product rounded to nearest: 0 over general
  quotients, but the quotients 1/k of rows of k tied maxima (``tied-max``
  values, k in [n/2, n]) err high on average, the more the shorter the row
  (rounding is deterministic: +0.017, +0.035, +0.030 for n = 256, 781, 1000,
  +0.079 for n = 97; tests/suite/test_profiles.py measures k in [128, 1024]):
  0.05; any float64 compute: 0;
* numpy's fp32 exp (the interpreter's ``tl.exp``) errs low: over 4.2 M
  arguments each (AMD EPYC, AVX2, numpy 2.4.6), mean -0.067 ulp on gaps
  uniform in [-104, 0], -0.076 in [-1, 0], -0.050 to -0.070 on the gaps of
  softmax rows of normal logits (scale 1 and 4, rows of 97 to 1000), -0.072
  on tests/suite/test_profiles.py's probe (40960 arguments); standard errors
  0.0003 (0.003 for the probe): declared 0.1;
* torch's CPU exp (Sleef, ``torch.exp`` on fp32): mean within 0.0012 ulp over
  the same arguments (standard errors 0.00015): declared 0.01;
* Triton on NVIDIA: tl.exp errs high in proportion to the gap (its log2e is
  rounded), about -0.4 + 0.15 |d| ulp on average on an H200, bounded by 0.5 +
  0.23 |d| (``exp_bias_per_gap``); div.full +0.053 ulp over general
  quotients, and on 1/k +0.094, +0.088, +0.072 for k in [128, 256], [391, 781],
  [500, 1000] (the tied rows of 256, 781 and 1000; H200, Triton 3.6,
  2026-11-27), declared 0.1;
* torch on CUDA: ``torch.exp`` (CUDA's ``expf``, the function its softmax
  calls), measured on an H100 (torch 2.11, 2026-11-27) over 1.3 M gaps: mean
  +0.147 ulp for |d| in [0, 1), +0.054 to +0.072 in the bands above (standard
  errors 0.003 at most), declared 0.2; its IEEE division: +0.0000 over general
  quotients, +0.0285 on 1/k for k in [64, 1024), declared 0.05;
* libdevice expf in Triton and Ascend: unmeasured, so their worst-case errors
  (exp_ulps, div_ulps) until tests/suite/test_profiles.py measures them on the
  device.  (Rounding the
  product d log2(e) to nearest, the |d| term of tl.exp's error bound, has no
  bias; the rounded constant log2(e) has, above.)

A kernel that computes differently from its backend's plain Triton declares its own
arithmetic in its record (``specs/``).
"""

from __future__ import annotations

from dataclasses import fields, replace

import torch

from .bounds import Arithmetic, PrecisionProfile, Reduction
from .formats import FP32, Format

TO_NEAREST = {torch.float16: 0.5, torch.bfloat16: 0.5}

INTERPRETER = Arithmetic(
    "Triton interpreter (numpy)", exp_ulps=2.6, exp_ulps_per_gap=0.0, div_ulps=0.5, log_ulps=4.0,
    exp_bias_ulps=0.1, div_bias_ulps=0.05,  # numpy's exp errs low on average (measured -0.076); IEEE division
    flushes_subnormals=False, downcast_ulps={torch.float16: 0.5, torch.bfloat16: 1.0},
    subnormal_downcast_unreliable=frozenset({torch.bfloat16}), subnormal_upcast_unreliable=frozenset({torch.bfloat16}),
)
TRITON_NVIDIA = Arithmetic(
    "Triton on NVIDIA (ex2.approx, div.full)", exp_ulps=2.5, exp_ulps_per_gap=1.25, div_ulps=2.5,
    log_ulps=2.0, log_abs=2.0**-21,
    # tl.exp(d) is ex2.approx(d * fl32(log2e)): the constant is 1.93e-8 low, so every result errs high by
    # |d| 1.34e-8 relative, at most 0.224 ulp per unit of |d|.  Measured on an H200 (Triton 3.6,
    # tests/suite/test_profiles.py, 2026-11-26): mean signed error -0.35, -0.23, +1.01, +5.98, +11.60 ulp for |d| in
    # [0,1), [1,4), [4,16), [16,64), [64,105) (about -0.4 + 0.15 |d|); div.full +0.053 (margin 0.016).
    exp_bias_ulps=0.5, exp_bias_per_gap=0.23, div_bias_ulps=0.1,
    flushes_subnormals=False, downcast_ulps=TO_NEAREST,
    fused_multiply_add=True,  # Triton's enable_fp_fusion, on by default: a * b + c compiles to fma.rn.f32
)
TRITON_ASCEND = Arithmetic(
    "Triton on Ascend (unmeasured, conservative)", exp_ulps=4.0, exp_ulps_per_gap=2.0, div_ulps=3.0,
    log_ulps=4.0, log_abs=2.0**-20,
    exp_bias_ulps=4.0, div_bias_ulps=3.0, exp_bias_per_gap=0.25,  # unmeasured: worst cases, an exp2 of a product
    exp_of_zero_exact=False,  # unmeasured
    flushes_subnormals=True, fused_multiply_add=True,  # unmeasured
)
TORCH_CPU = Arithmetic(
    "torch on CPU (Sleef exp, reciprocal and product)", exp_ulps=1.0, exp_ulps_per_gap=0.0, div_ulps=1.5,
    log_ulps=1.0, log_terms_in_output=True,
    exp_bias_ulps=0.01, div_bias_ulps=0.05,  # Sleef's exp: mean signed error measured within 0.0012 ulp
    flushes_subnormals=False, downcast_ulps=TO_NEAREST,
    scaled_logits="input",  # softmax(x * scale + bias): each eager op rounds to the input dtype
)
TORCH_CPU_OTHER_DIMS = replace(TORCH_CPU, name="torch on CPU, not the last dim (exp stored in the output dtype)",
                               exp_rounded_to_output=True)
TORCH_CUDA = Arithmetic(
    "torch on CUDA (expf)", exp_ulps=2.0, exp_ulps_per_gap=0.0, div_ulps=1.5, log_ulps=1.0,
    exp_bias_ulps=0.2, div_bias_ulps=0.05,  # expf: measured +0.15 at most; IEEE division
    flushes_subnormals=False, downcast_ulps=TO_NEAREST, scaled_logits="input",
    log_shift_rounded=True,  # LogSoftMaxForwardEpilogue: x - (max + log(sum)), found by the H100 soak
    # softmax_backward_cuda_out: tmp = grad * output, a tensor in the input dtype, then tmp - output * sum(tmp):
    # found by the H100 run of the backward (docs/findings/softmax-backward.md).
    backward_products_in_input=True,
)


ORDER_FREE = Reduction("sequential")
# The narrowest tile a known construction folds a row in, rescaling its running sum at each (the flash-attention
# reproduction's FA_TILE_N in kernels/reported_bugs.py; kernels/online.py's TILE is 256, full_softmax's 1024).
NARROWEST_KNOWN_TILE = 128


def folded_in_any_order(n: int, tile: int = NARROWEST_KNOWN_TILE) -> Reduction:
    """A sum of a row of n in any order (depth n - 1) with the most rescales of a known construction: a fold per
    tile of NARROWEST_KNOWN_TILE (or of ``tile``, a narrower one a kernel declares) after the first, and one more
    for a split row's spans folded.

    Any order alone does not dominate a folded sum: the bounds count a row's additions as one fewer than its
    finite terms (-inf entries add exact zeros, bounds.sum_terms), while each rescale errs on every term already
    summed, however many -inf entries the row holds (a causal row of 513 with a few finite terms: tests/suite/
    test_bounds.py's dominance test)."""
    return Reduction("sequential", chunks=max(1, -(-n // tile)), spans=2)


# How one tl.sum over a tile adds, by backend (Reduction kinds); elsewhere any order is assumed.
TILE_SUM = {"cpu": "numpy-pairwise-block", "cuda": "triton-block"}


def triton_block_profile(backend: str, num_warps: int, arithmetic: Arithmetic | None = None) -> PrecisionProfile:
    """A Triton kernel that sums each row with one ``tl.sum`` over a padded block (in the backend's
    plain Triton arithmetic, unless the kernel's own is given)."""
    return PrecisionProfile(arithmetic or TRITON_ARITHMETIC[backend],
                            Reduction(TILE_SUM.get(backend, "sequential"), num_warps=num_warps))


def loosest(name: str, arithmetics) -> Arithmetic:
    """An arithmetic no more accurate than any of ``arithmetics`` in any respect, so that the bounds it
    gives are at least theirs: every error the largest, every unsafe step taken, fp32 compute."""
    arithmetics = list(arithmetics)
    dtypes = {dtype for a in arithmetics for dtype in a.downcast_ulps}
    return Arithmetic(
        name,
        exp_ulps=max(a.exp_ulps for a in arithmetics),
        exp_ulps_per_gap=max(a.exp_ulps_per_gap for a in arithmetics),
        div_ulps=max(a.div_ulps for a in arithmetics),
        exp_bias_ulps=max(a.exp_bias_ulps for a in arithmetics),
        exp_bias_per_gap=max(a.exp_bias_per_gap for a in arithmetics),
        div_bias_ulps=max(a.div_bias_ulps for a in arithmetics),
        exp_of_zero_exact=all(a.exp_of_zero_exact for a in arithmetics),
        flushes_subnormals=any(a.flushes_subnormals for a in arithmetics),
        # A dtype an arithmetic does not list converts toward zero (1 ulp): never below that.
        downcast_ulps={d: max(1.0, *(a.downcast_ulps.get(d, 1.0) for a in arithmetics)) for d in dtypes},
        subnormal_downcast_unreliable=frozenset().union(*(a.subnormal_downcast_unreliable for a in arithmetics)),
        subnormal_upcast_unreliable=frozenset().union(*(a.subnormal_upcast_unreliable for a in arithmetics)),
        exp_rounded_to_output=True,
        log_ulps=max(a.log_ulps for a in arithmetics),
        log_abs=max(a.log_abs for a in arithmetics),
        log_terms_in_output=True,
        log_shift_rounded=False,  # a reported bug, never a correct kernel's construction: correct_construction
        backward_products_in_input=False,  # the same
        exact_gap=False,
        fused_multiply_add=True,  # and scaled_logits any construction: known_construction is False
        log_result_ulps=max(a.log_result_ulps for a in arithmetics),
        compute=FP32,
        known_construction=False,
    )


def correct_construction(arithmetic: Arithmetic) -> Arithmetic:
    """``arithmetic`` without the steps that are reported bugs of the library it describes, which its own profile
    keeps (so that the library's outputs are judged as it computes them) but the loosest arithmetic, a kernel of
    unknown construction's, never takes: log_softmax as x - fl(max + log(sum)) (torch's CUDA log_softmax,
    pytorch issue 38839: on rows far from zero the rounded shift errs by up to half an ulp of the max, 1e9 ulps of
    a small result)."""
    return replace(arithmetic, log_shift_rounded=False, backward_products_in_input=False)


# The figures of an Arithmetic in which a larger value is a looser arithmetic: errors in ulps of its compute format
# (compared as relative errors, in ulps of the other's: a float64 arithmetic's 1e6 ulps are 0.002 ulp of fp32)...
ULPS_OF_COMPUTE = ("exp_ulps", "exp_ulps_per_gap", "div_ulps", "exp_bias_ulps", "exp_bias_per_gap", "div_bias_ulps",
                   "log_ulps", "log_result_ulps")
# ...and absolute errors.
ABSOLUTE = ("log_abs",)
# Its flags, each with the value that loosens the bounds: results flushed below the smallest normal, no bias-free
# exp(0), a double rounding through the output dtype, log_softmax's terms in the output dtype, the shift
# max + log(sum) rounded first, no claim of monotonicity.  exact_gap is none: True removes the gap's rounding from
# the bounds (a claim the bounds then hold the kernel to), and the monotonicity it withdraws needs
# known_construction, which a kernel of unknown construction has not.
LOOSENING = {"flushes_subnormals": True, "exp_of_zero_exact": False, "exp_rounded_to_output": True,
             "log_terms_in_output": True, "log_shift_rounded": True, "backward_products_in_input": True,
             "fused_multiply_add": True, "known_construction": False}
DEFAULT_DOWNCAST = 1.0  # the conversion of a dtype that downcast_ulps does not list: toward zero (bounds.py)


# The figures and flags that only one operation's bound reads (oracles/bounds.py), by what reads them: the forward
# log_softmax (log_softmax_bound) and the softmax backward (softmax_backward_bound).  Every other figure reaches every
# operation's bound, or may; tests/suite/test_declared_precision.py checks, operation by operation, that moving a
# figure this table keeps from an operation moves none of its bounds.
FORWARD_LOG = ("log_ulps", "log_abs", "log_terms_in_output", "log_shift_rounded", "log_result_ulps")
SOFTMAX_BACKWARD = ("backward_products_in_input",)


def read_by(operation) -> frozenset[str] | None:
    """The figures of an Arithmetic that the bounds of ``operation`` (an oracles.call.Operation) read: all but those
    of the other operations in FORWARD_LOG and SOFTMAX_BACKWARD; None (all) for no operation."""
    if operation is None:
        return None
    others = set(FORWARD_LOG if not (operation.log and not operation.backward) else ()) | set(
        SOFTMAX_BACKWARD if not (operation.backward and not operation.log) else ())
    return frozenset(f.name for f in fields(Arithmetic)) - others


def looser_than(arithmetic: Arithmetic, known: Arithmetic, read: frozenset[str] | None = None) -> list[str]:
    """Each respect in which ``arithmetic`` gives looser bounds than ``known``, with both values; [] for none.
    ``read``: only the figures an operation's bounds read (:func:`read_by`); None: every figure.

    A figure that is no number (NaN) is looser: no bound derived from it holds a kernel to anything."""
    return [said for said in _looser_than(arithmetic, known)
            if read is None or said.partition(":")[0].partition("[")[0] in read]


def _looser_than(arithmetic: Arithmetic, known: Arithmetic) -> list[str]:
    scale = arithmetic.compute.unit_roundoff / known.compute.unit_roundoff
    figures = [(name, getattr(arithmetic, name) * scale, getattr(known, name)) for name in ULPS_OF_COMPUTE]
    figures += [(name, getattr(arithmetic, name), getattr(known, name)) for name in ABSOLUTE]
    dtypes = sorted({*arithmetic.downcast_ulps, *known.downcast_ulps}, key=str)
    figures += [(f"downcast_ulps[{dtype}]", arithmetic.downcast_ulps.get(dtype, DEFAULT_DOWNCAST),
                 known.downcast_ulps.get(dtype, DEFAULT_DOWNCAST)) for dtype in dtypes]
    unit = "" if scale == 1 else f" (in ulps of {known.compute})"
    looser = [f"{name}: declared {value:g}{unit if name in ULPS_OF_COMPUTE else ''}, loosest known {bound:g}"
              for name, value, bound in figures if not value <= bound]
    looser += [f"{name}: declared {unsafe}, loosest known {not unsafe}" for name, unsafe in LOOSENING.items()
               if bool(getattr(arithmetic, name)) == unsafe != bool(getattr(known, name))]
    for name in ("subnormal_downcast_unreliable", "subnormal_upcast_unreliable"):
        unreliable = getattr(arithmetic, name) - getattr(known, name)
        if unreliable:
            looser.append(f"{name}: declared {', '.join(sorted(map(str, unreliable)))} besides the loosest known "
                          f"{', '.join(sorted(map(str, getattr(known, name)))) or 'none'}")
    if coarser(arithmetic.compute, known.compute):
        looser.append(f"compute: declared {arithmetic.compute}, loosest known {known.compute}")
    return looser


def coarser(compute: Format, known: Format) -> bool:
    """Whether computing in ``compute`` rounds more, or loses more below the smallest normal, than in ``known``."""
    return (compute.unit_roundoff > known.unit_roundoff or compute.min_subnormal > known.min_subnormal
            or compute.min_normal > known.min_normal)


def looser_sum(profile: PrecisionProfile, n: int, tile: int = NARROWEST_KNOWN_TILE) -> list[str]:
    """Each respect in which ``profile``'s reduction errs more than :func:`folded_in_any_order` on a row of ``n``,
    folding tiles of ``tile`` (the narrowest known, or a narrower one the kernel declares and is tested at).

    The bounds read a reduction through its depth, capped at n - 1 (bounds.sum_terms), and its rescales, each
    (2 c0 + 1) u on every term: a reduction no deeper and with no more rescales never gets a larger bound."""
    reduction, known = profile.reduction, folded_in_any_order(n, tile)
    depth, rescales = max(min(reduction.depth(n), n - 1), 0), max(reduction.rescales(n), 0)
    return [f"reduction: {reduction} on rows of {n}: {what} {declared}, beyond the {most} of a sum in any order "
            f"folding tiles of {tile}" for what, declared, most in (
                ("depth", depth, known.depth(n)), ("rescales", rescales, known.rescales(n))) if declared > most]


# The arithmetics of plain Triton and of torch on each backend.
PLAIN_ARITHMETICS = {"cpu": [INTERPRETER, TORCH_CPU, TORCH_CPU_OTHER_DIMS], "cuda": [TRITON_NVIDIA, TORCH_CUDA],
                     "npu": [TRITON_ASCEND]}
TRITON_ARITHMETIC = {"cpu": INTERPRETER, "cuda": TRITON_NVIDIA, "npu": TRITON_ASCEND}
# torch's own softmax kernels, over the last dim, where a profile is known (torch_npu's is not).
TORCH_ARITHMETIC = {"cpu": TORCH_CPU, "cuda": TORCH_CUDA}
