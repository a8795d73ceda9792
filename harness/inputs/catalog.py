"""Regression catalog: one or more explicit inputs per known bug class of softmax kernels.

Each entry is run as a Hypothesis ``@example`` by the accuracy and metamorphic
tests, whatever the random search finds.  An entry outside a
kernel's declared capabilities is still useful: the kernel must then refuse it
with a clear error.  ``docs/bug-classes.md`` names, for every bug class, the
test that catches it.
"""

import torch

from .strategies import Case, Layout, Mask, Specials, Values, matrix

BF16, FP16, FP32, FP64 = torch.bfloat16, torch.float16, torch.float32, torch.float64

CATALOG: dict[str, Case] = {
    # An all -inf row is NaN (and a fully masked row zero), never a uniform row.
    "all -inf rows": matrix(6, 37, specials=Specials(neg_inf_rows=0.5), seed=1),
    # A kernel ignoring the column stride reads a transposed view's wrong elements
    # (the NaN-filled storage around a padded or sliced view shows up too).
    "column stride ignored (transposed)": Case((64, 50), 1, FP32, layout=Layout((1, 0), (1, 1)), seed=2),
    "column stride ignored (sliced)": Case((16, 40), 1, FP32, layout=Layout((0, 1), (1, 2)), seed=3),
    # A row of 4096 equal bf16 logits: exactly 1/4096 each; a bf16 sum saturates at 256.
    "half-precision accumulation": matrix(2, 4096, BF16, Values("equal"), seed=4),
    "half-precision accumulation (fp16)": matrix(2, 4096, FP16, Values("equal"), seed=5),
    # Ordinary rows: an approximate exp or reciprocal lands beyond the derived bound.
    "approximate exp or division": matrix(8, 781, FP32, Values("normal", 4.0), seed=6),
    # Results below the smallest normal: flushed to zero where the kernel claims otherwise.
    "subnormal results flushed (fp32)": matrix(8, 300, FP32, Values("underflow", 1.0), seed=7),
    "subnormal results flushed (fp16)": matrix(8, 300, FP16, Values("underflow", 1.0), seed=8),
    # tl.max ignores NaN; the row must still be all NaN.
    "NaN dropped by the max": matrix(8, 33, specials=Specials(nan=0.05), seed=9),
    # All logits negative and a row length that is not a power of two: padding lanes
    # loaded with 0 instead of -inf become the maximum and add exp(0 - max) to the sum.
    "masked lanes loaded with 0": matrix(8, 781, FP32, Values("underflow", 0.2), seed=10),
    # Lengths on either side of a power of two: an off-by-one mask drops or adds a column.
    "mask off by one (2^k + 1)": matrix(3, 129, seed=11),
    "mask off by one (2^k - 1)": matrix(3, 127, seed=12),
    # Logits far above 88: exp overflows unless the maximum is subtracted first.
    "no max subtraction": matrix(4, 100, FP32, Values("dominant", 200.0), seed=13),
    # Row counts that are not a multiple of the persistent program count: a skipped last row
    # or a row never written (its output left uninitialised) shows as garbage.
    "last row of the grid-stride loop skipped": matrix(9, 64, seed=14),
    "output rows left uninitialised": matrix(37, 100, seed=15),
    # A row computed alone and inside a batch of another size must match bit for bit; rows of
    # 9 to 128 columns keep even the interpreter's pairwise sums sensitive to the order.
    "reduction order depends on the number of rows": matrix(3, 100, FP32, Values("normal", 4.0), seed=19),
    # The output must be laid out for the output, not with the input's padded row stride.
    "output stored with the input's stride": Case((16, 100), 1, FP32, layout=Layout((0, 1), (1, 1), pad=7), seed=16),
    # Values near the dtype's maximum: x - max must not overflow into NaN.
    "logits near the dtype's maximum": matrix(4, 64, FP16, Values("near-max", 0.5), seed=17),
    # Masks: a fully masked row is zero, a partly masked row a softmax of what is kept.
    "fully and partly masked rows": matrix(8, 100, FP32, mask=Mask(keep=0.5, empty_rows=0.3), seed=18),
    # tl.max skips NaN: a row keeping only a NaN beside masked entries has a -inf maximum like an
    # empty row, yet its softmax is NaN, not zeros (full_softmax returned zeros: nightly H100 run).
    "NaN kept beside masked entries": Case((2,), 0, BF16, Values("subnormal"), specials=Specials(nan=0.3),
                                           mask=Mask(keep=0.5, empty_rows=0.0), seed=1),
    # Every logit far below zero, a row length that is not a power of two: padding (or masked) lanes
    # filled with a finite -1e4 instead of -inf become the maximum and the row comes out as zeros.
    "finite fill value": matrix(4, 781, FP32, Values("far-below", 1e6), seed=20),
    # Logits far from zero with ordinary gaps: exp(x - m) as 2^(x log2e - m log2e) rounds x log2e,
    # an error that grows with |x|, not with the gap.
    "exp of x, not of x - max": matrix(4, 300, FP32, Values("far-above", 1e6), seed=21),
    # An online softmax whose first tiles are all -inf: exp(m_old - m_new) = exp(-inf + inf) = NaN.
    "leading tiles of -inf (online softmax)": matrix(2, 600, FP32, specials=Specials(neg_inf_head=0.5), seed=22),
    # More rows than a narrow row index reaches: rows past the wrap land on earlier ones.
    "row index wraps": matrix(300, 7, FP32, seed=23),
    # More rows than a persistent grid sized for 512 (or 1024) rows covers: the rows past it are never computed.
    "rows past a grid of 512 or 1024": matrix(1030, 7, FP32, seed=26),
    # Half-precision log_softmax over a dim other than the last, vectorised over the inner dim, that stored one SIMD
    # vector's running max for both halves of a block (pytorch PR 156379): columns whose maxima lie far apart.
    "max of half a SIMD vector (dim != -1)": Case((7, 20), 0, BF16, Values("normal", 1e3), seed=25),
    # Data equal to the sentinels masking code uses (-1e4, finfo.min): kept as data, never as masked.
    "sentinel values as data": matrix(8, 64, FP16, Values("sentinel", -65504.0), seed=24),
}

