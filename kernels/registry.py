"""Kernels under test: a name, a callable, and the capabilities it declares.

The suite feeds each kernel only inputs inside its declared capabilities and
checks that every input outside them raises a clear ``TypeError`` or
``ValueError``.  A kernel is any callable with the signature of
``torch.softmax(x, dim)``; ``--kernel package.module:function`` validates one
that is not registered here.  Such a callable may carry a ``capabilities``
attribute (and ``log_softmax`` / ``masked_softmax`` attributes when it declares
them); without one it is held to the full contract of ``torch.softmax``.
It may carry a ``precision`` attribute ((backend, x, dim, log) -> PrecisionProfile);
without one it is judged with the loosest known arithmetic and an order-free
summation bound.

Every kernel is held to accuracy, special values and its contract.  Bitwise
invariances (:data:`INVARIANCES`) are promises: the suite measures each of
them on every kernel, but fails only a kernel that promised it.  A kernel
promises them in ``Capabilities.promises`` (per device type, when they differ,
in ``promises_by_device``); a bare callable may carry a ``promises`` attribute.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch

from oracles.bounds import PrecisionProfile
from oracles.profiles import unknown_profile

Softmax = Callable[[torch.Tensor, int], torch.Tensor]
MaskedSoftmax = Callable[[torch.Tensor, torch.Tensor, int], torch.Tensor]

HALF_AND_SINGLE = frozenset({torch.float32, torch.float16, torch.bfloat16})
FLOATING = HALF_AND_SINGLE | {torch.float64}

INVARIANCES = {
    "batch": "a row's output does not depend on the rows launched with it",
    "shift": "adding a constant that is exact for every entry changes no output bit",
    "determinism": "two runs on the same input give the same bits",
    "ties": "equal logits of a row get equal outputs",
}
"""The bitwise invariances a kernel may promise; each is measured on every kernel."""
ALL_INVARIANCES = frozenset(INVARIANCES)


def invariances(names) -> frozenset[str]:
    """``names`` as a set of invariances; ValueError naming any unknown one."""
    chosen = frozenset(names)
    unknown = sorted(chosen - ALL_INVARIANCES)
    if unknown:
        raise ValueError(f"promises: unknown invariance(s) {', '.join(map(repr, unknown))}; "
                         f"known: {', '.join(sorted(ALL_INVARIANCES))}")
    return chosen


@dataclass(frozen=True)
class Capabilities:
    """What a kernel claims to handle; everything else must raise.

    ``max_row_length`` maps a device type ("cpu", "cuda", "npu") to the longest
    row the kernel handles there; a missing device type means no limit.
    ``path_boundaries`` maps a device type to the row lengths where the kernel
    switches code paths (one block to several, say): the strategies test
    lengths on both sides of each.  ``max_offset`` is the largest element
    offset its index arithmetic can address (2**31 - 1 for 32-bit offsets).
    ``masked`` kernels also provide ``masked_softmax(x, mask, dim)``;
    ``out_dtype`` kernels take ``out_dtype=torch.float32`` for half inputs.
    ``empty_rows``: whether rows of length zero are handled (torch returns an
    empty result).
    ``promises`` names the bitwise invariances (:data:`INVARIANCES`) the kernel
    promises on every device type, ``promises_by_device`` replaces them on the
    device types it names: none is assumed.
    ``in_place``: the kernel writes its result into ``x`` (and returns it); the
    suite then hands it a copy of each input.  Any other kernel must leave its
    inputs bit for bit unchanged (:mod:`harness.calls`).
    """

    dtypes: frozenset[torch.dtype] = FLOATING
    ranks: frozenset[int] | None = None  # None: any rank >= 1
    last_dim_only: bool = False
    unit_column_stride: bool = False  # True: the softmax dim must have stride 1
    max_row_length: Mapping[str, int] = field(default_factory=dict)
    path_boundaries: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    max_offset: int | None = None
    log_softmax: bool = False
    masked: bool = False
    out_dtype: bool = False
    empty_rows: bool = True
    promises: frozenset[str] = frozenset()
    promises_by_device: Mapping[str, frozenset[str]] = field(default_factory=dict)
    in_place: bool = False

    def __post_init__(self) -> None:
        invariances(self.promises)
        for promised in self.promises_by_device.values():
            invariances(promised)

    def promised(self, device_type: str) -> frozenset[str]:
        """The invariances promised on ``device_type`` ("cpu", "cuda", "npu")."""
        return frozenset(self.promises_by_device.get(device_type, self.promises))

    def row_limit(self, device_type: str) -> int | None:
        return self.max_row_length.get(device_type)

    def refusal(self, x: torch.Tensor, dim: int) -> TypeError | ValueError | None:
        """The error that (x, dim) outside these capabilities must raise, or None."""
        if not isinstance(x, torch.Tensor):
            return TypeError(f"x must be a torch.Tensor; got {type(x).__name__}")
        if not dense(x):
            kind = "a nested tensor" if x.is_nested else f"a tensor of layout {x.layout}"
            return TypeError(f"x must be a dense tensor (layout torch.strided); got {kind}")
        if x.dtype not in self.dtypes:
            allowed = ", ".join(sorted(str(d) for d in self.dtypes))
            return TypeError(f"x.dtype must be one of {allowed}; got {x.dtype}")
        if self.ranks is not None and x.dim() not in self.ranks:
            allowed = " or ".join(str(r) for r in sorted(self.ranks))
            return ValueError(f"x must have rank {allowed}; got rank {x.dim()} (shape {tuple(x.shape)})")
        if not -x.dim() <= dim < max(x.dim(), 1):
            return ValueError(f"dim must lie in [{-x.dim()}, {x.dim() - 1}] for shape {tuple(x.shape)}; got {dim}")
        dim %= max(x.dim(), 1)
        if self.last_dim_only and dim != x.dim() - 1:
            return ValueError(f"dim must be the last dimension (-1 or {x.dim() - 1}); got {dim}")
        if self.unit_column_stride and x.size(dim) > 1 and x.stride(dim) != 1:
            return ValueError(
                f"x.stride({dim}) must be 1 (each row contiguous); got {x.stride(dim)}: pass x.contiguous()"
            )
        if not self.empty_rows and x.dim() and x.size(dim) == 0:
            return ValueError(f"x.size({dim}) = 0: this kernel handles no rows of length zero")
        limit = self.row_limit(x.device.type)
        if limit is not None and x.size(dim) > limit:
            return ValueError(
                f"x.size({dim}) = {x.size(dim)} exceeds the row limit of {limit} on {x.device.type} (one block per row)"
            )
        if self.in_place and any(stride == 0 and n > 1 for n, stride in zip(x.shape, x.stride())):
            return ValueError(f"x has stride 0 along a dimension (an expanded view, strides {tuple(x.stride())}): "
                              "a kernel working in place cannot write its result there")
        if self.max_offset is not None and x.numel() and max_offset(x) > self.max_offset:
            return ValueError(
                f"x reaches element offset {max_offset(x)}; this kernel's offsets stop at {self.max_offset}"
            )
        return None

    def check(self, x: torch.Tensor, dim: int) -> None:
        """Raise the clear error for (x, dim) outside these capabilities."""
        error = self.refusal(x, dim)
        if error is not None:
            raise error


def dense(x: torch.Tensor) -> bool:
    """Whether x has strides to read it by (not sparse, not nested)."""
    return not x.is_nested and x.layout == torch.strided


def max_offset(x: torch.Tensor) -> int:
    """Offset of x's last element from its data pointer, in elements."""
    return x.storage_offset() + sum((n - 1) * s for n, s in zip(x.shape, x.stride()))


TORCH_CONTRACT = Capabilities(
    log_softmax=True, masked=True, out_dtype=True,
    # Measured, not documented: on the CPU every invariance held in every run; on CUDA an fp16 row
    # of 13635 alone and inside a batch took different vectorised paths (misaligned rows) and 6
    # elements differed, and nothing was measured on NPUs.
    promises=frozenset(), promises_by_device={"cpu": ALL_INVARIANCES, "cuda": frozenset({"shift", "determinism"})},
)
"""The capabilities of torch.softmax itself: any float dtype, rank, dim and layout."""

USER_CONTRACT = Capabilities()
"""What a bare ``module:function`` is held to: torch.softmax's contract, softmax only, no invariance promised."""


@dataclass(frozen=True)
class KernelSpec:
    """A kernel under test.

    ``precision(backend, x, dim, log)`` gives the kernel's precision profile for
    that call (softmax, or log_softmax when ``log``) on a backend ("cpu",
    "cuda", "npu"), from which its error bounds are derived.  ``clear_refusals``:
    an input outside the capabilities must raise the TypeError or ValueError
    naming the argument (this project's kernels); otherwise, as torch does, any
    exception refuses it, and an input torch.softmax accepts need not be refused.
    ``skip_reason(backend)`` says why the kernel cannot run on a backend (its
    library is not installed, say): its tests there are skipped with that reason.
    """

    name: str
    softmax: Softmax
    capabilities: Capabilities = USER_CONTRACT
    log_softmax: Softmax | None = None
    masked_softmax: MaskedSoftmax | None = None
    precision: Callable[..., PrecisionProfile] = unknown_profile
    description: str = ""
    clear_refusals: bool = True
    skip_reason: Callable[[str], str | None] | None = None  # backend -> why it cannot run there, or None
    by_default: bool = True  # run when no --kernel is given
    # How a replay command, run from the checkout's root, names this kernel: its selector, with a file's
    # path made absolute, after the PYTHONPATH a module outside the checkout needs ("" for none).
    replay_selector: str = ""
    pythonpath: str = ""


_REGISTRY: dict[str, KernelSpec] = {}


def register(spec: KernelSpec) -> KernelSpec:
    if spec.name in _REGISTRY:
        raise ValueError(f"a kernel named {spec.name!r} is already registered")
    if spec.capabilities.log_softmax != (spec.log_softmax is not None):
        raise ValueError(f"{spec.name}: capabilities.log_softmax must match whether log_softmax is given")
    if spec.capabilities.masked != (spec.masked_softmax is not None):
        raise ValueError(f"{spec.name}: capabilities.masked must match whether masked_softmax is given")
    _REGISTRY[spec.name] = spec
    return spec


def registered() -> list[KernelSpec]:
    return list(_REGISTRY.values())


ROOT = Path(__file__).resolve().parents[1]


def imported(selector: str, module_name: str):
    """The module of a ``--kernel module:function``; ValueError saying what went wrong, and where."""
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name and (module_name + ".").startswith(error.name + "."):
            raise ValueError(f"--kernel {selector!r}: no module {module_name!r} on the import path: run from the "
                             f"folder that holds it, add that folder to PYTHONPATH, or name the file "
                             f"(--kernel path/to/{module_name.replace('.', '/')}.py:function)") from None
        raise ValueError(f"--kernel {selector!r}: importing {module_name} needs {error.name!r}, "
                         f"which is not installed ({error})") from None
    except Exception as error:  # noqa: BLE001  (a SyntaxError or any failure of the user's module)
        raise ValueError(f"--kernel {selector!r}: importing {module_name} raised "
                         f"{type(error).__name__}: {error}") from None


def is_file_selector(module_part: str) -> bool:
    return module_part.endswith(".py") or "/" in module_part or os.sep in module_part


def loaded_from_file(selector: str, file: str):
    """The module of a ``--kernel path/to/file.py:function``, imported as a script's: its folder goes first on the
    import path (so that it imports its neighbours), and its name is the file's stem."""
    path = Path(file).expanduser().resolve()
    if not path.is_file():
        raise ValueError(f"--kernel {selector!r}: no file {path}")
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))
    module = imported(selector, path.stem)
    if Path(getattr(module, "__file__", "") or "").resolve() != path:
        raise ValueError(f"--kernel {selector!r}: the name {path.stem!r} is taken by {module.__name__} from "
                         f"{getattr(module, '__file__', None)}; rename {path.name}")
    return module


def import_root(module) -> str:
    """The folder a replay run from the checkout's root must put on PYTHONPATH to import ``module`` ("" when a
    fresh interpreter there finds it: the checkout's own modules, installed packages)."""
    if not getattr(module, "__file__", None):
        return ""
    origin = Path(module.__file__).resolve()
    root = origin.parents[module.__name__.count(".") + (origin.name == "__init__.py")]
    from_environment = {str(Path(p).resolve()) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p}
    found_anyway = {str(Path(p).resolve()) for p in sys.path if p} - from_environment - {str(Path.cwd().resolve())}
    return "" if root == ROOT or str(root) in found_anyway else str(root)


def resolve(selector: str) -> KernelSpec:
    """A kernel by registered name, by ``package.module:function`` path, or by ``path/to/file.py:function``."""
    if selector in _REGISTRY:
        return _REGISTRY[selector]
    if ":" not in selector:
        known = ", ".join(sorted(_REGISTRY))
        raise ValueError(f"--kernel {selector!r}: not a registered kernel ({known}) nor a 'module:function' path")
    module_part, _, attribute = selector.rpartition(":")
    if is_file_selector(module_part):
        module = loaded_from_file(selector, module_part)
        replay_selector, pythonpath = f"{Path(module_part).expanduser().resolve()}:{attribute}", ""
    else:
        module = imported(selector, module_part)
        replay_selector, pythonpath = selector, import_root(module)
    function = getattr(module, attribute, None)
    if not callable(function):
        raise ValueError(f"--kernel {selector!r}: {module_part} has no callable {attribute!r}")
    capabilities = getattr(function, "capabilities", USER_CONTRACT)
    if hasattr(function, "promises"):
        try:
            capabilities = replace(capabilities, promises=invariances(function.promises), promises_by_device={})
        except ValueError as error:
            raise ValueError(f"--kernel {selector!r}: {error}") from None
    return KernelSpec(
        selector, function, capabilities,
        log_softmax=getattr(function, "log_softmax", None) if capabilities.log_softmax else None,
        masked_softmax=getattr(function, "masked_softmax", None) if capabilities.masked else None,
        precision=getattr(function, "precision", unknown_profile),
        description=f"user kernel {selector}",
        clear_refusals=False,
        replay_selector=replay_selector,
        pythonpath=pythonpath,
    )
