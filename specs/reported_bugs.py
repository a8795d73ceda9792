"""The catalog of softmax bugs reported in public projects (``kernels/reported_bugs.py``): one record per bug.

Each record (:class:`ReportedBug`) names the report, the operation the bug lives on and the reproduction, and
declares what the reported kernel handles.  For every record ``NAME`` this module holds two kernels, selected
as a user's kernel is: ``--kernel specs.reported_bugs:NAME`` (the bug) and ``--kernel
specs.reported_bugs:NAME_fixed`` (the same algorithm with the bug fixed: the control, which must pass).  Both carry
the record's ``capabilities``, ``precision`` and ``promises``.  A bug that lives on log_softmax or masked softmax
comes with the plain softmax every kernel provides, correct.  What each catches, and how fast:
``docs/reported-bugs.md``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from kernels import reported_bugs as rb
from kernels.limits import InputLimits
from oracles.bounds import PrecisionProfile
from oracles.call import Call
from oracles.profiles import TORCH_CPU, folded_in_any_order

from .registry import Capabilities

PROMISES = frozenset({"determinism", "ties"})  # kept by every control: elementwise exp and division of each row
OPERATIONS = ("softmax", "log_softmax", "masked_softmax", "softmax_fp32_out")


def torch_cpu(call: Call) -> PrecisionProfile:
    """float32 torch on the CPU (Sleef exp and log, IEEE division, one rounding to the output dtype), summed in any
    order, folding tiles of 128 at the narrowest (the flash-attention reproduction's)."""
    return PrecisionProfile(TORCH_CPU, folded_in_any_order(call.row_length))


@dataclass(frozen=True, kw_only=True)
class ReportedBug:
    """A softmax bug reported in a public project, and its reproduction (OpInfo style: a comment on every field)."""

    name: str  # how --kernel specs.reported_bugs:NAME selects the bug (NAME_fixed: its control)
    source: str  # the report: "owner/repo#number" (an issue or a pull request)
    url: str  # the report's address
    what: str  # the bug, in one line
    operation: str  # the operation it lives on: one of OPERATIONS
    path: str  # the code path it lives on (dtype, dim, layout, size), "" for every path
    kernel: Callable  # kernels.reported_bugs's reproduction: (x, dim) or (x, mask, dim), and fixed=
    limits: InputLimits  # the inputs the reported kernel takes (kernels.reported_bugs's limits)
    declared: dict  # Capabilities beyond the limits: path_boundaries (the tiles of a tiled kernel), out_dtype
    device_only: bool = False  # True: it needs inputs past the CPU run's size caps, and no smaller model shows it
    precision: Callable[[Call], PrecisionProfile] = torch_cpu  # the arithmetic the reproduction computes with
    promises: frozenset[str] = PROMISES  # the bitwise invariances the kernel keeps (specs.registry.INVARIANCES)

    def __post_init__(self) -> None:
        if self.operation not in OPERATIONS:
            raise ValueError(f"{self.name}: operation must be one of {', '.join(OPERATIONS)}; got {self.operation!r}")

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities.extending(self.limits, log_softmax=self.operation == "log_softmax",
                                      masked=self.operation == "masked_softmax", promises=self.promises,
                                      **self.declared)

    def bound(self, fixed: bool) -> Callable:
        """The selectable kernel: the bug (``fixed=False``) or its control, with the record's attributes."""
        run = functools.partial(self.kernel, fixed=fixed)
        plain = functools.partial(rb.plain_softmax, limits=self.limits)
        if self.operation in ("softmax", "softmax_fp32_out"):
            def softmax(x, dim=-1, **out_dtype):
                return run(x, dim, **out_dtype)
        else:
            def softmax(x, dim=-1):
                return plain(x, dim)
            setattr(softmax, "log_softmax" if self.operation == "log_softmax" else "masked_softmax", run)
        softmax.__name__ = softmax.__qualname__ = self.name + ("_fixed" if fixed else "")
        softmax.__doc__ = f"{self.source}: {self.what}" + (" (fixed: the control)" if fixed else "")
        softmax.capabilities = self.capabilities
        softmax.precision = self.precision
        softmax.record = self
        return softmax


def tiles(tile: int) -> dict:
    """A tiled kernel's declaration: both sides of its tile are drawn."""
    return {"path_boundaries": {"cpu": (tile,), "cuda": (tile,)}}


PULL_REQUESTS = {"flagos-ai/FlagGems#5723", "ggml-org/llama.cpp#2665", "pytorch/pytorch#62897",
                 "pytorch/executorch#20090", "flashinfer-ai/flashinfer#1178", "flagos-ai/FlagGems#330",
                 "pytorch/pytorch#156379", "kaldi-asr/kaldi#985", "PaddlePaddle/Paddle#21165",
                 "intel/torch-xpu-ops#5022"}
"""The reports that are pull requests (the fix's description is the report); the others are issues."""


def url(source: str) -> str:
    """The address of the report ``owner/repo#number``."""
    repo, _, number = source.partition("#")
    return f"https://github.com/{repo}/{'pull' if source in PULL_REQUESTS else 'issues'}/{number}"


def bug(source: str, name: str, what: str, operation: str, kernel: Callable, limits: InputLimits, path: str = "",
        **declared) -> ReportedBug:
    device_only = declared.pop("device_only", False)
    return ReportedBug(name=name, source=source, url=url(source), what=what, operation=operation, path=path,
                       kernel=kernel, limits=limits, declared=declared, device_only=device_only)


def flashinfer_tile(tile: int) -> ReportedBug:
    return bug("flashinfer-ai/flashinfer#1178", f"flashinfer_neg_inf_tile_{tile}",
               f"online softmax in tiles of {tile}: a tile of nothing but -inf gives exp(-inf - -inf) = NaN",
               "softmax", functools.partial(rb.flashinfer_online_tiles, tile=tile), rb.FLASHINFER,
               f"rows past {tile} (one tile all -inf)", **tiles(tile))


BUGS = (
    bug("triton-lang/triton#11406", "triton_tl_softmax_wrong_axis",
        "tl.softmax(keep_dims=False) broadcast the row max and sum down the columns of a square tile",
        "softmax", rb.tl_softmax_wrong_axis, rb.TL_SOFTMAX, "every tile of more than one row"),
    bug("flagos-ai/FlagGems#5723", "flaggems_output_strides",
        "out = empty_like(x) keeps a transposed x's strides; the kernel stores contiguously",
        "softmax", rb.flaggems_output_strides, rb.FLAGGEMS, "transposed or permuted dense inputs", out_dtype=True),
    bug("ggml-org/llama.cpp#2665", "llamacpp_no_max_subtraction",
        "CUDA soft_max_f32 took expf(x) without subtracting the row max: overflow to inf / inf",
        "softmax", rb.ggml_no_max_subtraction, rb.GGML, "logits past 88.7"),
    bug("pytorch/pytorch#62897", "pytorch_bf16_other_dim_no_max",
        "CPU bfloat16 softmax over a dim other than the last skipped the max subtraction",
        "softmax", rb.bf16_other_dim_no_max, rb.TORCH_LIKE, "bfloat16, dim != -1"),
    bug("pytorch/executorch#20090", "executorch_half_accumulation",
        "portable softmax summed exp(x - max) in the input dtype: a bfloat16 sum sticks at 256",
        "softmax", rb.executorch_half_accumulation, rb.EXECUTORCH, "float16 and bfloat16"),
    bug("tenstorrent/tt-metal#56056", "ttnn_special_rows",
        "ttnn.softmax: all -inf rows uniform, +inf or NaN rows zeros (sanitised exp, no max subtraction)",
        "softmax", rb.ttnn_special_rows, rb.TTNN, "rows with -inf, +inf, NaN or logits past 88.7"),
    bug("pytorch/pytorch#84144", "pytorch_offsets_wrap_2_32",
        "CUDA softmax wrong past 2^32 elements: offsets wrap (at 2^14 here, standing for 2^32)",
        "softmax", rb.cuda_offsets_wrap, rb.CUDA_SOFTMAX, "inputs past 2^14 elements (2^32 on a device)"),
    bug("microsoft/onnxruntime#32299", "onnxruntime_int32_offsets",
        "softmax_warp_forward's int32 first_batch * stride goes negative (past 2^13 here, for 2^31)",
        "softmax", rb.ort_int32_offsets, rb.ORT_WARP, "inputs past 2^13 elements (2^31 on a device)"),
    flashinfer_tile(256),
    flashinfer_tile(1024),
    flashinfer_tile(4096),
    bug("flagos-ai/FlagGems#330", "flaggems_online_lane_nan",
        "looping softmax: a lane whose running max is still -inf turns NaN and poisons the row",
        "softmax", rb.flaggems_online_lanes, rb.FLAGGEMS_INNER, f"rows past {rb.FLAGGEMS_TILE} with a -inf lane",
        **tiles(rb.FLAGGEMS_TILE)),
    bug("flashinfer-ai/flashinfer#4267", "flashinfer_finite_running_max",
        "FA2 seeds the running max with -5e4 (math::inf = 5e4): rows below -5e4 are lost",
        "softmax", rb.flashinfer_finite_running_max, rb.FA2, "every logit below -5e4"),
    bug("Dao-AILab/flash-attention#2082", "flash_attn_row_max_clamped",
        "a fully masked tile's row max clamped to 0 and kept: scores all below -87 underflow",
        "softmax", rb.flash_attn_row_max_clamped, rb.FLASH_ATTN, "a last tile of -inf, every score below -87",
        **tiles(rb.FA_TILE_N)),
    bug("flagos-ai/FlagGems#4995", "flaggems_log_softmax_wrong_axis",
        "special_log_softmax's small-N kernel reads N contiguous elements whatever the dim",
        "log_softmax", rb.flaggems_log_softmax_wrong_axis, rb.FLAGGEMS_LOG, "dim != -1, rows of at most 1024"),
    bug("pytorch/pytorch#38839", "pytorch_log_softmax_shift_rounded",
        "CUDA log_softmax as x - (max + log(sum)): the shift rounds first, log(sum) vanishes near 1e7",
        "log_softmax", rb.cuda_log_softmax_shift_rounded, rb.TORCH_LIKE, "logits far from 0"),
    bug("pytorch/pytorch#156379", "pytorch_log_softmax_half_vector_max",
        "reduced-precision CPU log_softmax stored the first vector's max into both halves",
        "log_softmax", rb.cpu_log_softmax_half_vector_max, rb.TORCH_LIKE,
        "float16 and bfloat16, dim != -1, inner size of 16 and more"),
    bug("pytorch/pytorch#94043", "pytorch_mps_log_of_softmax",
        "MPS log_softmax as log(softmax(x)) with subnormals flushed: -91.5 becomes -inf",
        "log_softmax", rb.mps_log_of_softmax, rb.MPS, "probabilities below 2^-126"),
    bug("kaldi-asr/kaldi#985", "kaldi_log_softmax_input_stride",
        "the log-softmax kernel read its input with the output's row stride",
        "log_softmax", rb.kaldi_log_softmax_input_stride, rb.KALDI, "padded or sliced rows"),
    bug("mit-han-lab/tinyengine#107", "tinyengine_log_softmax_max_seed",
        "LogSoftmax seeds its max with FLT_MIN instead of -FLT_MAX: rows below -104 give +inf",
        "log_softmax", rb.tinyengine_log_softmax_max_seed, rb.TINYENGINE, "every input below -104"),
    bug("PaddlePaddle/Paddle#21165", "paddle_log_softmax_max_clamped",
        "softmax_with_cross_entropy clamped the row max at -64: rows below -168 give log(0)",
        "log_softmax", rb.paddle_log_softmax_max_clamped, rb.PADDLE, "every logit below -168"),
    bug("NVIDIA/apex#1390", "apex_fully_masked_uniform",
        "ScaledMaskedSoftmax: a row with every key masked comes out uniform 1/n, not zeros",
        "masked_softmax", rb.apex_fully_masked_uniform, rb.APEX, "fully masked rows"),
    bug("intel/torch-xpu-ops#5022", "xpu_safe_softmax_nan_zeroed",
        "safe softmax took a row whose NaN-dropping max stayed lowest() as masked and zeroed its NaN",
        "masked_softmax", rb.xpu_safe_softmax_nan_zeroed, rb.XPU, "a kept NaN beside masked entries"),
    bug("ohdearquant/lattice#740", "lattice_nan_lane_dropped",
        "CPU attention softmax: f32::max drops NaN and fast_exp(NaN) = 0: [x, NaN] gives [1, 0]",
        "masked_softmax", rb.lattice_nan_lane_dropped, rb.LATTICE, "rows holding a NaN"),
    bug("ohdearquant/lattice#361", "lattice_finite_mask_value",
        "flash attention masks with the finite -10000: masked keys win where kept scores are below it",
        "masked_softmax", rb.lattice_finite_mask_value, rb.LATTICE, "kept scores below -10000"),
)
"""Every reported bug, softmax first, then log_softmax and masked softmax."""

BY_NAME = {record.name: record for record in BUGS}

for _record in BUGS:
    globals()[_record.name] = _record.bound(fixed=False)
    globals()[_record.name + "_fixed"] = _record.bound(fixed=True)
