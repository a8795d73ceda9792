"""Softmax bugs reported in public projects, each reproduced in plain torch, with a switch that fixes it.

Each function reproduces the algorithm of a reported kernel, bug included, as its report and its code show it;
``fixed=True`` runs the same algorithm with the bug fixed: the control.  They take ``torch.softmax``'s arguments
(``(x, dim)``; masked ones ``(x, mask, dim)``, ``mask`` True = keep), check their input limits first, compute in
float32 on torch (no Triton, vectorised; the only loops run over tiles, or over a row's columns where a
sequential accumulator is the bug) and round once to the output dtype.  Their records (the report, capabilities,
precision) are ``specs/reported_bugs.py``; which test catches each, and how fast: ``docs/reported-bugs.md``.

Sizes stand for larger ones where a bug needs more memory than a CPU run draws: offsets wrap at 2^14 here where
the reports' wrapped at 2^31 or 2^32 (as ``specs.mutants:offset_wrap`` does), and a tile is a module constant.
"""

from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F

from .limits import HALF_AND_SINGLE, InputLimits

F32 = torch.float32
INF = math.inf
FP32_ONLY = frozenset({F32})


def rows_of(x: torch.Tensor, dim: int):
    """x's rows along ``dim`` as a float32 matrix (a copy), and the function that puts rows back in x's shape."""
    moved = x.movedim(dim, -1)
    rows = moved.reshape(-1, moved.shape[-1]).to(F32, copy=True)

    def back(y: torch.Tensor, dtype: torch.dtype = x.dtype) -> torch.Tensor:
        return y.reshape(moved.shape).movedim(-1, dim).to(dtype).contiguous()

    return rows, back


def softmax_rows(rows: torch.Tensor) -> torch.Tensor:
    e = (rows - rows.amax(1, keepdim=True)).exp()
    return e / e.sum(1, keepdim=True)


def log_softmax_rows(rows: torch.Tensor) -> torch.Tensor:
    d = rows - rows.amax(1, keepdim=True)
    return d - d.exp().sum(1, keepdim=True).log()


def plain_softmax(x: torch.Tensor, dim: int = -1, *, limits: InputLimits) -> torch.Tensor:
    """The correct softmax, within ``limits``: the softmax of entries whose bug lives in another operation."""
    limits.check(x, dim)
    if x.numel() == 0:
        return torch.empty_like(x)
    rows, back = rows_of(x, dim)
    return back(softmax_rows(rows))


def check_masked(x: torch.Tensor, mask: torch.Tensor, dim: int, limits: InputLimits) -> None:
    limits.check(x, dim)
    if mask.dtype != torch.bool or mask.shape != x.shape:
        raise ValueError(f"mask must be a bool tensor of x's shape {tuple(x.shape)}; got {mask.dtype} {tuple(mask.shape)}")


def within(limits: InputLimits, *, masked: bool = False):
    """A reproduction's first lines, the same for each: its input limits checked (and a masked one's mask), an
    empty input returned empty; the reproduction itself takes the checked, non-empty input."""

    def reproduction(kernel):
        if masked:
            @functools.wraps(kernel)
            def checked(x: torch.Tensor, mask: torch.Tensor, dim: int = -1, **options) -> torch.Tensor:
                check_masked(x, mask, dim, limits)
                return torch.empty_like(x) if x.numel() == 0 else kernel(x, mask, dim, **options)
        else:
            @functools.wraps(kernel)
            def checked(x: torch.Tensor, dim: int = -1, **options) -> torch.Tensor:
                limits.check(x, dim)
                return torch.empty_like(x) if x.numel() == 0 else kernel(x, dim, **options)
        return checked

    return reproduction


def masked_rows(x: torch.Tensor, mask: torch.Tensor, dim: int, fill: float = -INF):
    """The rows of x with masked entries replaced by ``fill``, as :func:`rows_of` gives them."""
    return rows_of(x.masked_fill(~mask, fill), dim)


def tiles_of(rows: torch.Tensor, tile: int) -> torch.Tensor:
    """rows (r, n) as (r, ceil(n / tile), tile), the last tile padded with -inf as a masked load pads it."""
    return F.pad(rows, (0, -rows.shape[1] % tile), value=-INF).view(rows.shape[0], -1, tile)


# ------------------------------------------------------------------------------------------------- softmax

# triton-lang/triton#11406 (fixed by PR 11409): tl.softmax(x, dim=1, keep_dims=False) reduced with keep_dims=False,
# so the row maxima and sums came back as a row and were broadcast down the columns: y[i, j] = exp(x[i, j] - m[j])
# / s[j] on a square tile.  A kernel taking T rows of T columns (T = next power of two of the row) per tile.
TL_SOFTMAX = InputLimits(dtypes=HALF_AND_SINGLE, ranks=frozenset({2}), last_dim_only=True, unit_row_stride=True,
                         max_row_length={"cpu": 128, "cuda": 128, "npu": 128})  # a T x T tile in registers


@within(TL_SOFTMAX)
def tl_softmax_wrong_axis(x: torch.Tensor, dim: int = -1, *, fixed: bool = False) -> torch.Tensor:
    rows, back = rows_of(x, dim)
    r, n = rows.shape
    t = 1 << (n - 1).bit_length()
    tiles = F.pad(rows, (0, t - n, 0, -r % t), value=-INF).view(-1, t, t)  # masked loads pad with -inf
    if fixed:  # keep_dims=True: one maximum and one sum per row, broadcast along the row
        e = (tiles - tiles.amax(2, keepdim=True)).exp()
        y = e / e.sum(2, keepdim=True)
    else:  # keep_dims=False: the per-row results left-pad to a row, [1, T], broadcast down the columns
        e = (tiles - tiles.amax(2)[:, None, :]).exp()
        y = e / e.sum(2)[:, None, :]
    return back(y.reshape(-1, t)[:r, :n])


# flagos-ai/FlagGems PR 5723 (torch_fl issue #171): softmax() allocates out = torch.empty_like(self), which keeps a
# transposed or permuted input's order of dims, and softmax_out's kernels store at the offsets of a contiguous
# tensor (pid_m * N * K + n * K + k): the output of a transposed input reads back transposed.
FLAGGEMS = InputLimits(dtypes=HALF_AND_SINGLE)  # any rank, dim and layout: softmax_out computes on self.contiguous()


def flaggems_output_strides(x: torch.Tensor, dim: int = -1, out_dtype: torch.dtype | None = None, *,
                            fixed: bool = False) -> torch.Tensor:
    FLAGGEMS.check(x, dim)
    if out_dtype not in (None, F32, x.dtype):
        raise ValueError(f"out_dtype must be None or torch.float32 (half_to_float); got {out_dtype}")
    out = torch.empty_like(x, dtype=out_dtype or x.dtype)  # dense x: x's strides; otherwise contiguous
    if x.numel() == 0:
        return out
    rows, back = rows_of(x.contiguous(), dim)
    y = back(softmax_rows(rows), out.dtype)  # contiguous, in logical order
    if fixed:
        out.copy_(y)  # stored by out's own strides
    else:
        out.as_strided((out.numel(),), (1,)).copy_(y.reshape(-1))  # stored as if out were contiguous
    return out


# ggml-org/llama.cpp PR 2665: the CUDA soft_max_f32 summed expf(x) without subtracting the row's maximum, so
# logits past 88.7 overflow to inf and the row comes out NaN (ALiBi-biased attention scores reach thousands).
GGML = InputLimits(dtypes=FP32_ONLY, last_dim_only=True, unit_row_stride=True)  # ggml's innermost dim, f32


@within(GGML)
def ggml_no_max_subtraction(x: torch.Tensor, dim: int = -1, *, fixed: bool = False) -> torch.Tensor:
    rows, back = rows_of(x, dim)
    e = (rows - rows.amax(1, keepdim=True)).exp() if fixed else rows.exp()
    return back(e / e.sum(1, keepdim=True))


# pytorch/pytorch PR 62897 (fixed by PR 63132): the vectorised CPU path for bfloat16 over a dim other than the
# last (added by PR 60371) took exp(x) without subtracting the maximum: inf / inf = NaN from logits of 89 on.
TORCH_LIKE = InputLimits(dtypes=HALF_AND_SINGLE)  # torch's contract: any rank, dim and layout


@within(TORCH_LIKE)
def bf16_other_dim_no_max(x: torch.Tensor, dim: int = -1, *, fixed: bool = False) -> torch.Tensor:
    other_dim = dim % x.dim() != x.dim() - 1
    rows, back = rows_of(x, dim)
    skip_max = not fixed and x.dtype == torch.bfloat16 and other_dim
    e = rows.exp() if skip_max else (rows - rows.amax(1, keepdim=True)).exp()
    return back(e / e.sum(1, keepdim=True))


# pytorch/executorch PR 20090: the portable softmax reduced sum(exp(x - max)) in the input dtype: each term and the
# running sum rounded to half or bfloat16 after every addition, so a bfloat16 sum sticks at 256 (fp16 at 2048) and
# a uniform row of 512 gives 1/256.  The loop over columns is that sequential accumulator, vectorised over rows.
EXECUTORCH = InputLimits(dtypes=HALF_AND_SINGLE)  # any rank and dim (apply_over_dim)


@within(EXECUTORCH)
def executorch_half_accumulation(x: torch.Tensor, dim: int = -1, *, fixed: bool = False) -> torch.Tensor:
    rows, back = rows_of(x, dim)
    e = (rows - rows.amax(1, keepdim=True)).exp()
    if fixed or x.dtype == F32:
        total = e.sum(1)  # float32 accumulation
    else:
        total = torch.zeros(e.shape[0], dtype=x.dtype)
        for term in e.to(x.dtype).unbind(1):  # temp_sum = temp_sum + exp(...) in CTYPE, in order
            total = total + term
    return back(e / total.to(F32)[:, None])


# tenstorrent/tt-metal#56056 (and #12661): ttnn.softmax's default path (numeric_stable=False) takes exp(x) * (1 /
# sum) without the maximum, through an SFPU exp that clamps its argument at -88.5 and turns NaN into +inf.  An
# all -inf row comes out uniform 1/n, a row with +inf or NaN (or a logit past 88.7: [1000, 1001]) all zeros, since
# the reciprocal of an infinite sum is 0 and the SFPU's 0 * inf is 0.  Fixed (PR 56430's direction): the max
# subtracted (numeric_stable=True) and an exp that keeps NaN and -inf.
TTNN = InputLimits(dtypes=frozenset({F32, torch.bfloat16}), last_dim_only=True)


@within(TTNN)
def ttnn_special_rows(x: torch.Tensor, dim: int = -1, *, fixed: bool = False) -> torch.Tensor:
    rows, back = rows_of(x, dim)
    if fixed:
        return back(softmax_rows(rows))
    e = rows.nan_to_num(nan=INF, posinf=INF, neginf=-INF).clamp_min(-88.5).exp()
    reciprocal = 1 / e.sum(1, keepdim=True)
    return back(torch.where(reciprocal == 0, 0.0, e * reciprocal))


# pytorch/pytorch#84144: CUDA softmax and log_softmax wrong past 4 * 1024^3 = 2^32 elements: the last rows read
# and wrote at offsets that wrapped, and came back 0 or garbage.  Offsets wrap at WRAP = 2^14 here, standing for
# 2^32 (a CPU run draws up to 2^15 elements): each element is read at its offset mod WRAP and written there, a
# later row's write landing last; offsets past WRAP are never written (zeros stand for the garbage).
WRAP = 1 << 14
CUDA_SOFTMAX = InputLimits(dtypes=HALF_AND_SINGLE, last_dim_only=True)  # any rank, computed on x.contiguous()


@within(CUDA_SOFTMAX)
def cuda_offsets_wrap(x: torch.Tensor, dim: int = -1, *, fixed: bool = False) -> torch.Tensor:
    rows, back = rows_of(x, dim)
    if fixed:
        return back(softmax_rows(rows))
    flat = rows.reshape(-1)
    total = flat.numel()
    y = softmax_rows(flat[torch.arange(total) % WRAP].view(rows.shape)).reshape(-1)
    kept = torch.arange(min(total, WRAP))
    out = torch.zeros(total)
    out[kept] = y[kept + (total - 1 - kept) // WRAP * WRAP]  # the last element whose offset wraps onto each
    return back(out.view(rows.shape))


# microsoft/onnxruntime#32299: softmax_warp_forward (rows of at most 1024) offsets each row by first_batch *
# stride in int32, which turns negative past 2^31 elements: the row is read from before the buffer (an illegal
# memory access where nothing is mapped there, other data where something is).  The signed offset wraps at 2^14
# here, turning negative past 2^13 (standing for 2^31); the memory before the buffer is modelled as the buffer's
# own end, so the row computes on other rows' values.
ORT_WARP = InputLimits(dtypes=HALF_AND_SINGLE, last_dim_only=True, max_row_length={"cpu": 1024, "cuda": 1024})
SIGNED_WRAP = 1 << 14


@within(ORT_WARP)
def ort_int32_offsets(x: torch.Tensor, dim: int = -1, *, fixed: bool = False) -> torch.Tensor:
    rows, back = rows_of(x, dim)
    r, n = rows.shape
    if not fixed:
        offsets = torch.arange(r) * n
        signed = (offsets + SIGNED_WRAP // 2) % SIGNED_WRAP - SIGNED_WRAP // 2
        read = (signed[:, None] + torch.arange(n)) % (r * n)  # a negative offset reads the buffer's end
        rows = rows.reshape(-1)[read]
    return back(softmax_rows(rows))


# flashinfer-ai/flashinfer PR 1178: OnlineSoftmaxFusedKernel folds a row tile by tile (BLOCK_THREADS x VEC_SIZE
# values): the tile's maximum, its sum of exp(x - tile max), then the running maximum and denominator rescaled.
# A tile of nothing but -inf has tile max -inf and exp(-inf - -inf) = NaN: the whole row comes out NaN.  Fixed:
# such a tile is skipped (the PR's test is isinf(block_max); -inf only here, as +inf must still give NaN).
FLASHINFER = InputLimits(dtypes=HALF_AND_SINGLE, ranks=frozenset({2}), last_dim_only=True)


@within(FLASHINFER)
def flashinfer_online_tiles(x: torch.Tensor, dim: int = -1, *, tile: int, fixed: bool = False) -> torch.Tensor:
    rows, back = rows_of(x, dim)
    tiles = tiles_of(rows, tile)
    tile_max = tiles.amax(2)
    tile_sum = (tiles - tile_max[..., None]).exp().sum(2)
    running_max = torch.full(rows.shape[:1], -INF)
    denominator = torch.zeros(rows.shape[:1])
    for m, s in zip(tile_max.unbind(1), tile_sum.unbind(1)):
        new_max = torch.maximum(running_max, m)
        rescaled = denominator * (running_max - new_max).exp() + s * (m - new_max).exp()
        skip = (m == -INF) if fixed else torch.zeros_like(m, dtype=torch.bool)
        denominator = torch.where(skip, denominator, rescaled)
        running_max = torch.where(skip, running_max, new_max)
    return back((rows - running_max[:, None]).exp() * (1 / denominator[:, None]))


# flagos-ai/FlagGems PR 330: the looping softmax kernels keep a running max m and sum z per lane of a tile and
# update z = z * exp(m - m_new) + exp(x - m_new): a lane that has seen only -inf has m_new = -inf and turns NaN, and
# poisons the row when the lanes are folded.  Fixed: lanes whose m_new is -inf keep z.  FlagGems loops only past
# rows of 32768 (tiles of 4096); the tile is FLAGGEMS_TILE here, so that rows a CPU run draws take the loop.
FLAGGEMS_TILE = 1024
FLAGGEMS_INNER = InputLimits(dtypes=HALF_AND_SINGLE, last_dim_only=True)  # softmax_kernel_inner: K == 1


@within(FLAGGEMS_INNER)
def flaggems_online_lanes(x: torch.Tensor, dim: int = -1, *, fixed: bool = False) -> torch.Tensor:
    rows, back = rows_of(x, dim)
    if rows.shape[1] <= FLAGGEMS_TILE:  # ONE_TILE_PER_CTA
        return back(softmax_rows(rows))
    m = torch.full((rows.shape[0], FLAGGEMS_TILE), -INF)
    z = torch.zeros_like(m)
    for tile in tiles_of(rows, FLAGGEMS_TILE).unbind(1):
        m_new = torch.maximum(m, tile)
        updated = z * (m - m_new).exp() + (tile - m_new).exp()
        z = torch.where(m_new == -INF, z, updated) if fixed else updated
        m = m_new
    row_max = m.amax(1, keepdim=True)
    total = (z * (m - row_max).exp()).sum(1, keepdim=True)
    return back((rows - row_max).exp() / total)


# flashinfer-ai/flashinfer#4267: the FA2 kernels seed the online running max with -math::inf, and math::inf is the
# finite 5e4: a row whose every logit lies below -5e4 keeps m = -5e4, every exp(x - m) underflows and the row is
# lost (FA2's final guard returns zeros; a plain softmax, as here, returns 0 / 0).  Fixed (PR 4401): IEEE -inf.
FA2_SENTINEL = -5e4
FA2 = InputLimits(dtypes=HALF_AND_SINGLE, last_dim_only=True)


@within(FA2)
def flashinfer_finite_running_max(x: torch.Tensor, dim: int = -1, *, fixed: bool = False) -> torch.Tensor:
    rows, back = rows_of(x, dim)
    seed = torch.full(rows.shape[:1], -INF if fixed else FA2_SENTINEL)
    running_max = torch.maximum(seed, rows.amax(1))  # what the online max over the tiles ends at
    e = (rows - running_max[:, None]).exp()
    return back(e / e.sum(1, keepdim=True))


# Dao-AILab/flash-attention#2082 (CuTe sm90 forward): tiles of FA_TILE_N keys are processed right to left, and with
# check_inf the row max of a fully masked tile is replaced by 0 (so that x - max is never -inf - -inf) and that 0
# is kept as the running max: when every finite score of the row is below 0, the max stays 0, exp(x - 0)
# underflows for scores below -87 and the row is lost.  Fixed (the resolution): the 0 is used for the exp
# only, the true running max is kept.  FA's final zero-row guard is left out: this is a plain softmax.
FA_TILE_N = 128
FLASH_ATTN = InputLimits(dtypes=HALF_AND_SINGLE, last_dim_only=True)


@within(FLASH_ATTN)
def flash_attn_row_max_clamped(x: torch.Tensor, dim: int = -1, *, fixed: bool = False) -> torch.Tensor:
    rows, back = rows_of(x, dim)
    row_max = torch.full(rows.shape[:1], -INF)
    row_sum = torch.zeros(rows.shape[:1])
    for tile in reversed(tiles_of(rows, FA_TILE_N).unbind(1)):  # n_block from the last to the first
        current = torch.maximum(row_max, tile.amax(1))
        shift = torch.where(current == -INF, 0.0, current)  # check_inf
        row_sum = row_sum * (row_max - shift).exp() + (tile - shift[:, None]).exp().sum(1)
        row_max = current if fixed else shift
    shift = torch.where(row_max == -INF, 0.0, row_max)
    return back((rows - shift[:, None]).exp() / row_sum[:, None])


# ------------------------------------------------------------------------------------------------- log_softmax

# flagos-ai/FlagGems#4995 (PR 4996): special_log_softmax sent every N <= 1024 to its small-N kernel, which reads a
# row as N contiguous elements (row_id * stride + cols): right for the innermost dim only (K == 1); over any other
# dim it reduces across the wrong axis.  (Its out-of-bounds rows, and the non-determinism they gave, are left out.)
FLAGGEMS_LOG = InputLimits(dtypes=HALF_AND_SINGLE)  # any rank, dim and layout: it takes self.contiguous()


@within(FLAGGEMS_LOG)
def flaggems_log_softmax_wrong_axis(x: torch.Tensor, dim: int = -1, *, fixed: bool = False) -> torch.Tensor:
    dim %= x.dim()
    n, k = x.shape[dim], math.prod(x.shape[dim + 1:])
    if fixed or k == 1 or n > 1024:  # the two-pass kernel strides by K
        rows, back = rows_of(x, dim)
        return back(log_softmax_rows(rows))
    contiguous = x.contiguous()
    return log_softmax_rows(contiguous.reshape(-1, n).to(F32)).reshape(x.shape).to(x.dtype)


# pytorch/pytorch#38839 (fixed by PR 38945): CUDA log_softmax computed x - (max + log(sum)), rounding the shift
# first: for logits near 1e7 (spacing 1) log(sum) vanished from it and every result was off by up to 0.5.
@within(TORCH_LIKE)
def cuda_log_softmax_shift_rounded(x: torch.Tensor, dim: int = -1, *, fixed: bool = False) -> torch.Tensor:
    rows, back = rows_of(x, dim)
    m = rows.amax(1, keepdim=True)
    log_sum = (rows - m).exp().sum(1, keepdim=True).log()
    return back((rows - m) - log_sum if fixed else rows - (m + log_sum))


# pytorch/pytorch PR 156379: the reduced-precision (bfloat16, half) CPU log_softmax over a dim other than the last
# vectorises the inner dim by 2 x SIMD floats and stored the first vector's running max into both halves: the
# columns of the second half (of every full 2 x SIMD block) use the max of the column SIMD to their left.  Safe
# softmax cancels any max unless exp overflows or underflows, or log(sum) dwarfs the result.  AVX2 widths here.
SIMD = 8  # floats in one vector (fVec::size(), AVX2)


@within(TORCH_LIKE)
def cpu_log_softmax_half_vector_max(x: torch.Tensor, dim: int = -1, *, fixed: bool = False) -> torch.Tensor:
    dim %= x.dim()
    if fixed or x.dtype == F32 or dim == x.dim() - 1:  # float32, and the last dim, take other kernels
        rows, back = rows_of(x, dim)
        return back(log_softmax_rows(rows))
    n, inner = x.shape[dim], math.prod(x.shape[dim + 1:])
    block = x.reshape(-1, n, inner).to(F32)  # outer x dim x inner, as the kernel walks it
    m = block.amax(1)
    columns = torch.arange(inner)
    second_half = (columns < inner - inner % (2 * SIMD)) & (columns % (2 * SIMD) >= SIMD)
    m = torch.where(second_half, m[:, (columns - SIMD).clamp_min(0)], m)
    shifted = block - m[:, None, :]
    return (shifted - shifted.exp().sum(1, keepdim=True).log()).reshape(x.shape).to(x.dtype)


# pytorch/pytorch#94043 (fixed by PR 95091): MPS log_softmax was log(softmax(x)), and the GPU flushes subnormal
# results to zero: a probability below 2^-126 became log(0) = -inf where the answer is about -91.5.
MPS = InputLimits(dtypes=frozenset({F32, torch.float16}))  # any rank, dim and layout


@within(MPS)
def mps_log_of_softmax(x: torch.Tensor, dim: int = -1, *, fixed: bool = False) -> torch.Tensor:
    rows, back = rows_of(x, dim)
    if fixed:
        return back(log_softmax_rows(rows))
    p = softmax_rows(rows)
    return back(torch.where(p.abs() < torch.finfo(F32).tiny, 0.0, p).log())


# kaldi-asr/kaldi PR 985: _log_softmax_reduce read its input x with the row stride of its output y (d.stride for
# src_stride) in the max and in the sum: right only when both matrices have the same stride.  The output here is a
# new dense matrix, so an input with padded rows (Kaldi pads its matrices) is read at the wrong places.
KALDI = InputLimits(dtypes=FP32_ONLY, ranks=frozenset({2}), last_dim_only=True, unit_row_stride=True)


@within(KALDI)
def kaldi_log_softmax_input_stride(x: torch.Tensor, dim: int = -1, *, fixed: bool = False) -> torch.Tensor:
    r, n = x.shape
    if not fixed and x.stride(0) >= n:  # (a stride-0, expanded x has no matrix of Kaldi's: read as stored)
        x = x.as_strided((r, n), (n, 1))  # row i at i * (y's stride), from x's first element
    return log_softmax_rows(x.to(F32, copy=True))


# mit-han-lab/tinyengine#107: LogSoftmax seeds its running max with FLT_MIN, the smallest positive float, instead
# of -FLT_MAX: when every input is negative the max is FLT_MIN, and below -104 every exp(x - max) underflows, the
# sum is 0 and log(0) makes every result +inf.
TINYENGINE = InputLimits(dtypes=FP32_ONLY, last_dim_only=True)


@within(TINYENGINE)
def tinyengine_log_softmax_max_seed(x: torch.Tensor, dim: int = -1, *, fixed: bool = False) -> torch.Tensor:
    rows, back = rows_of(x, dim)
    seed = -torch.finfo(F32).max if fixed else torch.finfo(F32).tiny
    m = torch.maximum(rows.amax(1, keepdim=True), torch.tensor(seed, dtype=F32))
    return back((rows - m) - (rows - m).exp().sum(1, keepdim=True).log())


# PaddlePaddle/Paddle PR 21165: softmax_with_cross_entropy's CUDA kernel clamped the row max at -64 from below:
# logits all below -64 - 104 give sum(exp(x - max)) = 0 and log(0), and the log-softmax comes out +inf.
PADDLE = InputLimits(dtypes=FP32_ONLY, last_dim_only=True)


@within(PADDLE)
def paddle_log_softmax_max_clamped(x: torch.Tensor, dim: int = -1, *, fixed: bool = False) -> torch.Tensor:
    rows, back = rows_of(x, dim)
    m = rows.amax(1, keepdim=True)
    if not fixed:
        m = m.clamp_min(-64.0)
    return back((rows - m) - (rows - m).exp().sum(1, keepdim=True).log())


# ------------------------------------------------------------------------------------------------- masked softmax

# NVIDIA/apex#1390 (fixed by PR 1444): ScaledMaskedSoftmax fills masked scores with -10000, so a row with every key
# masked is a softmax of equal values: uniform 1/n where it must be zeros.  Masked scores are -inf here otherwise
# (the finite fill's other failure is ohdearquant/lattice#361's entry): the uniform row is the bug reproduced.
APEX = InputLimits(dtypes=frozenset({torch.float16, torch.bfloat16}), last_dim_only=True,
                   max_row_length={"cpu": 2048, "cuda": 2048})  # half inputs, keys of at most 2048


@within(APEX, masked=True)
def apex_fully_masked_uniform(x: torch.Tensor, mask: torch.Tensor, dim: int = -1, *,
                              fixed: bool = False) -> torch.Tensor:
    rows, back = masked_rows(x, mask, dim)
    y = softmax_rows(rows)
    nothing_left = (rows == -INF).all(1, keepdim=True)
    every_key_masked = (~mask).movedim(dim, -1).reshape(rows.shape).all(1, keepdim=True)
    y = torch.where(nothing_left, 0.0, y)
    if not fixed:
        y = torch.where(every_key_masked, 1.0 / rows.shape[1], y)
    return back(y)


# intel/torch-xpu-ops PR 5022: the fused safe-softmax kernels take a row whose max is still the seed lowest() as
# fully masked and zero it; the group max reduce drops NaN, so a kept NaN beside masked entries was zeroed where
# the answer is NaN.  Fixed: zeroed only when the sum is 0 too (a NaN sum is not 0).
XPU = InputLimits(dtypes=HALF_AND_SINGLE, last_dim_only=True)  # the inner_size == 1 kernels (dim = -1)


@within(XPU, masked=True)
def xpu_safe_softmax_nan_zeroed(x: torch.Tensor, mask: torch.Tensor, dim: int = -1, *,
                                fixed: bool = False) -> torch.Tensor:
    rows, back = masked_rows(x, mask, dim)
    lowest = torch.finfo(F32).min
    m = rows.nan_to_num(nan=-INF, posinf=INF, neginf=-INF).amax(1, keepdim=True).clamp_min(lowest)
    e = (rows - m).exp()
    total = e.sum(1, keepdim=True)
    masked_row = (m == lowest) & (total == 0) if fixed else (m == lowest)
    return back(torch.where(masked_row, 0.0, e / total))


# ohdearquant/lattice#740: the CPU attention softmax folds the row max with f32::max, which drops NaN, and its
# fast_exp(NaN) is 0: a row [x, NaN] normalises to [1, 0] instead of failing.  Fixed here to torch's answer, NaN
# (lattice's own contract zeroes such rows); a row with every score masked is zeros, as lattice's short-circuit.
LATTICE = InputLimits(dtypes=FP32_ONLY, last_dim_only=True)


@within(LATTICE, masked=True)
def lattice_nan_lane_dropped(x: torch.Tensor, mask: torch.Tensor, dim: int = -1, *,
                             fixed: bool = False) -> torch.Tensor:
    rows, back = masked_rows(x, mask, dim)
    scores = rows if fixed else rows.nan_to_num(nan=-INF, posinf=INF, neginf=-INF)
    m = scores.amax(1, keepdim=True)
    e = (rows - m).exp()
    if not fixed:
        e = e.nan_to_num(nan=0.0, posinf=INF, neginf=-INF)
    return back(torch.where(m == -INF, 0.0, e / e.sum(1, keepdim=True)))


# ohdearquant/lattice#361: flash attention replaces masked scores by the finite MASK_VALUE = -10000 and folds them
# into the max and the sum: where every kept score lies below -10000 the masked keys win.  Fixed: masked scores are
# -inf.  A row with every score masked (or -inf) is zeros in both, lattice's contract for fully masked rows.
MASK_VALUE = -10000.0


@within(LATTICE, masked=True)
def lattice_finite_mask_value(x: torch.Tensor, mask: torch.Tensor, dim: int = -1, *,
                              fixed: bool = False) -> torch.Tensor:
    rows, back = masked_rows(x, mask, dim, fill=-INF if fixed else MASK_VALUE)
    nothing_left, _ = masked_rows(x, mask, dim)
    return back(torch.where((nothing_left == -INF).all(1, keepdim=True), 0.0, softmax_rows(rows)))
