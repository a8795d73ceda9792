"""The records of the softmax kernels people already use (``kernels/peers.py``), measured on the suite's terms.

Where a library is absent, or where it does not run Triton (Inductor emits C++
on the CPU; FlagGems needs a GPU runtime), that kernel's tests are skipped with
the reason.  None documents its arithmetic or promises an invariance, so each
is judged as a kernel of unknown construction (the loosest known arithmetic)
and promises none; each refuses as its library does (``clear_refusals=False``).
None runs unless asked for (``--kernel liger``, ``--kernel all``).
"""

import functools
import importlib.util

import torch

from kernels import peers

from .registry import Capabilities, KernelSpec, register


def missing(package: str, module: str):
    """A skip reason for backends where ``module`` does not import: pip's package name to install."""

    def reason(backend: str) -> str | None:
        if importlib.util.find_spec(module) is None:
            return f"needs {package}, which is not installed (pip install {package})"
        return None

    return reason


def gpu_only(why: str, then=None):
    """A skip reason on the CPU backend (``why``) and on NPUs (nothing measured there), else ``then``'s."""

    def reason(backend: str) -> str | None:
        if backend == "cpu":
            return f"{why}; runs with --device cuda"
        if backend != "cuda":
            return f"not measured on {backend}; runs with --device cuda"
        return then(backend) if then else None

    return reason


def sm90_or_newer(backend: str) -> str | None:
    """A skip reason on a CUDA card older than Hopper (compute capability 9.0)."""
    major, minor = torch.cuda.get_device_capability()
    if major < 9:
        return f"QuACK targets Hopper and Blackwell (compute capability 9.0 and newer); this card is {major}.{minor}"
    return None


@functools.cache
def import_error(module: str) -> str | None:
    """Why ``module`` fails to import (once per process), or None: installed is not importable (a CUDA library
    missing, say)."""
    try:
        importlib.import_module(module)
    except Exception as error:  # noqa: BLE001  (an extension's import fails in many ways)
        return f"{type(error).__name__}: {error}"
    return None


def quack_runs(backend: str) -> str | None:
    """QuACK's skip reason on CUDA: the package absent, a card older than Hopper, or an import that fails."""
    why = missing("quack-kernels", "quack")(backend) or sm90_or_newer(backend)
    return why or (f"quack-kernels does not import here: {error}" if (error := import_error("quack")) else None)


register(KernelSpec(
    name="liger", softmax=peers.liger_softmax, softmax_backward=peers.liger_softmax_backward,
    capabilities=Capabilities.extending(peers.LIGER, backward=True),
    clear_refusals=False, skip_reason=missing("liger-kernel", "liger_kernel"), by_default=False,
    description="Liger-Kernel's Triton softmax and its backward (LigerSoftmaxFunction), last dim",
))
register(KernelSpec(
    name="flag_gems", softmax=peers.flag_gems_softmax, log_softmax=peers.flag_gems_log_softmax,
    softmax_backward=peers.flag_gems_softmax_backward, log_softmax_backward=peers.flag_gems_log_softmax_backward,
    capabilities=Capabilities.extending(peers.FLAG_GEMS, log_softmax=True, out_dtype=True, backward=True,
                                        log_softmax_backward=True),
    clear_refusals=False, skip_reason=gpu_only("FlagGems needs a GPU runtime", missing("flag-gems", "flag_gems")),
    by_default=False,
    description="FlagGems' softmax, log_softmax and their backwards (flag_gems.ops), any dim",
))
register(KernelSpec(
    name="flag_gems_scaled", softmax=peers.flag_gems_softmax_by_scaled, scaled_softmax=peers.flag_gems_scaled_softmax,
    capabilities=Capabilities.extending(peers.FLAG_GEMS_SCALED, scaled=True),
    clear_refusals=False, skip_reason=gpu_only("FlagGems needs a GPU runtime", missing("flag-gems", "flag_gems")),
    by_default=False,
    description="FlagGems' scaled softmax (flag_gems.ops.scaled_softmax_forward, Megatron's scaled_softmax): 4-D, "
                "last dim, fp16/bf16",
))
register(KernelSpec(
    name="inductor", softmax=peers.inductor_softmax, log_softmax=peers.inductor_log_softmax,
    softmax_backward=peers.inductor_softmax_backward, log_softmax_backward=peers.inductor_log_softmax_backward,
    scaled_softmax=peers.inductor_scaled_softmax, biased_softmax=peers.inductor_biased_softmax,
    causal_softmax=peers.inductor_causal_softmax,
    capabilities=Capabilities.extending(peers.INDUCTOR, log_softmax=True, out_dtype=True, backward=True,
                                        log_softmax_backward=True, scaled=True, biased=True, causal=True),
    clear_refusals=False, skip_reason=gpu_only("Inductor emits C++, not Triton, on the CPU"), by_default=False,
    description="torch.compile(torch.softmax / log_softmax / their backwards / the scaled, biased and causal "
                "softmaxes' eager expressions, dynamic=True): Inductor's Triton kernels",
))
register(KernelSpec(
    name="quack", softmax=peers.quack_softmax, capabilities=Capabilities.extending(peers.QUACK),
    clear_refusals=False, skip_reason=gpu_only("QuACK is CuTe DSL code for NVIDIA GPUs", quack_runs),
    by_default=False,
    description="QuACK's softmax (quack.softmax, CuTe DSL), last dim, rows up to 2^18",
))
