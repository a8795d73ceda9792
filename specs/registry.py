"""Kernels under test: a name, a callable, and the record of what it handles, computes and promises.

The suite feeds each kernel only inputs inside its declared capabilities and
checks that every input outside them raises a clear ``TypeError`` or
``ValueError``.  A kernel is any callable with the signature of
``torch.softmax(x, dim)``; ``--kernel package.module:function`` validates one
that is not registered here.  Such a callable may carry a ``capabilities``
attribute (and the callables of the operations it declares, ``log_softmax``,
``masked_softmax``, ``scaled_softmax``...: ``specs/operations.py``); without one it is held to the full
contract of ``torch.softmax``.  It may carry a ``precision`` attribute
(``precision(call) -> PrecisionProfile``, ``call`` an :class:`oracles.call.Call`);
without one it is judged with the loosest known arithmetic and an order-free
summation bound.

Every kernel is held to accuracy, special values and its contract.  Bitwise
invariances (:data:`INVARIANCES`) are promises: the suite measures each of
them on every kernel, but fails only a kernel that promised it.  A kernel
promises them in ``Capabilities.promises`` (per device type, when they differ,
in ``promises_by_device``); a bare callable may carry a ``promises`` attribute.

This project's kernels are described here, one record a kernel (``specs/<kernel>.py``),
above both the kernels (``kernels/``, Triton and host code only) and the oracles.
"""

from __future__ import annotations

import functools
import importlib
import importlib.machinery
import inspect
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

import torch

from kernels.limits import FLOATING, HALF_AND_SINGLE, InputLimits
from oracles.bounds import Arithmetic, PrecisionProfile, Reduction
from oracles.call import Call, Operation
from oracles.profiles import (NARROWEST_KNOWN_TILE, PLAIN_ARITHMETICS, folded_in_any_order, looser_sum, looser_than,
                              loosest, read_by)

from .operations import OPERATIONS, SOFTMAX, Declared

__all__ = ["ALL_INVARIANCES", "FLOATING", "HALF_AND_SINGLE", "INVARIANCES", "TORCH_CONTRACT", "USER_CONTRACT",
           "Capabilities", "KernelSpec", "known_arithmetics", "register", "registered", "resolve",
           "unknown_arithmetic", "unknown_profile"]

Softmax = Callable[[torch.Tensor, int], torch.Tensor]
MaskedSoftmax = Callable[[torch.Tensor, torch.Tensor, int], torch.Tensor]
SoftmaxBackward = Callable[[torch.Tensor, torch.Tensor, int], torch.Tensor]  # (grad, y, dim) -> the logits' gradient
ScaledSoftmax = Callable[[torch.Tensor, float, int], torch.Tensor]  # (x, scale, dim)
BiasedSoftmax = Callable[[torch.Tensor, torch.Tensor, float, int], torch.Tensor]  # (x, bias, scale, dim)
CausalSoftmax = Callable[[torch.Tensor, float], torch.Tensor]  # (x, scale), over the last dim

# The attribute of a callable that names the call it runs, told by the keywords ``operation`` (the operation's name)
# and ``replay`` (the command that replays it in one step, where there is one): the suite's guards, whose
# breadcrumbs and messages say them.
NAMES_ITS_CALL = "names_its_call"

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
class Capabilities(InputLimits):
    """What a kernel claims to handle; everything else must raise.

    The input limits (:class:`kernels.limits.InputLimits`: ``dtypes``, ``ranks``,
    ``last_dim_only``, ``unit_row_stride``, ``max_row_length``, ``max_offset``,
    ``empty_rows``, ``in_place``) say which inputs it takes, and ``refusal`` the
    error any other input must raise.  A kernel not ``in_place`` must leave its
    inputs bit for bit unchanged (:mod:`harness.guard.calls`).  On top of those limits:
    """

    # Device type -> the row lengths where the kernel switches code paths (one block to several,
    # say): the strategies test lengths on both sides of each.
    path_boundaries: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    log_softmax: bool = False  # it also provides log_softmax(x, dim)
    masked: bool = False  # it also provides masked_softmax(x, mask, dim)
    out_dtype: bool = False  # it takes out_dtype=torch.float32 for half inputs
    backward: bool = False  # it also provides softmax_backward(grad, y, dim)
    log_softmax_backward: bool = False  # it also provides log_softmax_backward(grad, y, dim)
    scaled: bool = False  # it also provides scaled_softmax(x, scale, dim): softmax(scale * x)
    biased: bool = False  # it also provides biased_softmax(x, bias, scale, dim): softmax(scale * x + bias)
    causal: bool = False  # it also provides causal_softmax(x, scale): softmax(scale * x), causally masked
    # The bitwise invariances (INVARIANCES) promised on every device type; promises_by_device
    # replaces them on the device types it names.  None is assumed.
    promises: frozenset[str] = frozenset()
    promises_by_device: Mapping[str, frozenset[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        invariances(self.promises)
        for promised in self.promises_by_device.values():
            invariances(promised)

    @classmethod
    def extending(cls, limits: InputLimits, **declared) -> Capabilities:
        """A kernel's own input limits (which its host code checks), with what else it ``declared``."""
        return cls(**{f.name: getattr(limits, f.name) for f in fields(InputLimits)}, **declared)

    def call_refusal(self, call: Call) -> TypeError | ValueError | None:
        """The clear error ``call`` must be refused with: the first of its input tensors (x, a backward's grad)
        outside these limits; None when all lie inside."""
        tensors = (call.x,) if call.grad is None else (call.x, call.grad)
        return next((error for t in tensors if (error := self.refusal(t, call.dim)) is not None), None)

    def promised(self, device_type: str) -> frozenset[str]:
        """The invariances promised on ``device_type`` ("cpu", "cuda", "npu")."""
        return frozenset(self.promises_by_device.get(device_type, self.promises))


USER_CONTRACT = Capabilities()
"""What a bare ``module:function`` is held to: torch.softmax's contract, softmax only, no invariance promised."""


_REGISTRY: dict[str, KernelSpec] = {}  # by name, in the order of registration


def known_arithmetics(backend: str) -> list[Arithmetic]:
    """Every arithmetic a kernel is known to compute with on ``backend``: the backend's plain ones
    (Triton's, torch's) and those the registered kernels' records declare."""
    return [*PLAIN_ARITHMETICS[backend], *(a for spec in _REGISTRY.values() for a in spec.arithmetics.get(backend, ()))]


def unknown_arithmetic() -> Arithmetic:
    """The loosest of every known arithmetic on every backend: a kernel of unknown construction
    may compute like any of them."""
    return loosest("unknown kernel (loosest known)",
                   [a for backend in PLAIN_ARITHMETICS for a in known_arithmetics(backend)])


def unknown_profile(call: Call) -> PrecisionProfile:
    """The precision of a kernel that declares none: the loosest known arithmetic, summed in any order, folding
    tiles as often as a known construction."""
    return PrecisionProfile(unknown_arithmetic(), folded_in_any_order(call.row_length))


@dataclass(frozen=True)
class KernelSpec:
    """A kernel under test, and its record: what it computes, handles and promises."""

    name: str  # how --kernel selects it, and how test ids and reports name it
    softmax: Softmax  # softmax(x, dim): the operation every kernel provides
    capabilities: Capabilities = USER_CONTRACT  # the inputs it handles, its operations and promises
    log_softmax: Softmax | None = None  # given exactly when capabilities.log_softmax
    masked_softmax: MaskedSoftmax | None = None  # given exactly when capabilities.masked
    softmax_backward: SoftmaxBackward | None = None  # given exactly when capabilities.backward
    log_softmax_backward: SoftmaxBackward | None = None  # given exactly when capabilities.log_softmax_backward
    scaled_softmax: ScaledSoftmax | None = None  # given exactly when capabilities.scaled
    biased_softmax: BiasedSoftmax | None = None  # given exactly when capabilities.biased
    causal_softmax: CausalSoftmax | None = None  # given exactly when capabilities.causal
    # precision(call): the precision profile of that call (oracles.call.Call: its input, dim,
    # operation, mask and backend), from which its error bounds are derived.
    precision: Callable[[Call], PrecisionProfile] = unknown_profile
    description: str = ""  # one line for the session header and reports
    # True: an input outside the capabilities must raise the TypeError or ValueError naming the
    # argument (this project's kernels); False: as torch does, any exception refuses it, and an
    # input torch.softmax accepts need not be refused.
    clear_refusals: bool = True
    skip_reason: Callable[[str], str | None] | None = None  # backend -> why it cannot run there, or None
    by_default: bool = True  # run when no --kernel is given
    # How a replay command, run from the checkout's root, names this kernel: its selector, with a file's
    # path made absolute, after the PYTHONPATH a module outside the checkout needs ("" for none).
    replay_selector: str = ""
    pythonpath: str = ""
    # Backend -> the arithmetics its precision model may give there, beyond the backend's plain
    # ones: a kernel of unknown construction is judged by the loosest of all known (unknown_arithmetic).
    arithmetics: Mapping[str, tuple[Arithmetic, ...]] = field(default_factory=dict)

    def declares(self, operation: Declared) -> bool:
        """Whether its capabilities declare ``operation``."""
        return declares(self.capabilities, operation)

    def run(self, call: Call, replay: str | None = None) -> torch.Tensor:
        """The kernel's result for ``call``: the operation's callable on the call's values it takes, with its
        out_dtype.  A callable that names the call it runs (:data:`NAMES_ITS_CALL`: the suite's guards) is told the
        operation and ``replay``, the command that replays the call in one step."""
        operation = call.operation
        function = getattr(self, operation.runs)
        extra = {} if call.out_dtype is None else {"out_dtype": call.out_dtype}
        if getattr(function, NAMES_ITS_CALL, False):
            extra.update(operation=operation.name, replay=replay)
        given = call.arguments
        return function(*(given[name] for name in operation.arguments), **extra)


def declares(capabilities: Capabilities, operation: Declared) -> bool:
    """Whether ``capabilities`` declare ``operation``: every flag of its entry is set."""
    return all(getattr(capabilities, flag) for flag in operation.flags)


def optional_callables() -> dict[str, list[Declared]]:
    """The KernelSpec callables a kernel gives only for the operations that need them, and those operations."""
    needing: dict[str, list[Declared]] = {}
    for operation in OPERATIONS.values():
        if operation.runs != SOFTMAX.runs:
            needing.setdefault(operation.runs, []).append(operation)
    return needing


def register(spec: KernelSpec) -> KernelSpec:
    if spec.name in _REGISTRY:
        raise ValueError(f"a kernel named {spec.name!r} is already registered")
    for runs, operations in optional_callables().items():
        if any(spec.declares(op) for op in operations) != (getattr(spec, runs) is not None):
            flags = " or ".join(" and ".join(f"capabilities.{flag}" for flag in op.flags) for op in operations)
            raise ValueError(f"{spec.name}: {flags} must match whether {runs} is given")
    _REGISTRY[spec.name] = spec
    return spec


def registered() -> list[KernelSpec]:
    return list(_REGISTRY.values())


ROOT = Path(__file__).resolve().parents[1]  # the checkout


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
    import path while it is imported (so that it imports its neighbours), and its name is the file's stem.  Then
    the folder moves to the end of the path: a neighbour it imports later is still found, but a file there named
    as a module the suite or Python imports later (secrets.py, matplotlib.py) is not taken for it."""
    path = Path(file).expanduser().resolve()
    if not path.is_file():
        raise ValueError(f"--kernel {selector!r}: no file {path}")
    folder = str(path.parent)
    added = folder not in sys.path
    if added:
        sys.path.insert(0, folder)
    try:
        module = imported(selector, path.stem)
    except ValueError as error:
        raise ValueError(f"{error}{taken_names(path.parent, shadowed_neighbours(path.parent))}") from None
    finally:
        if added:
            sys.path.remove(folder)
            sys.path.append(folder)
    if Path(getattr(module, "__file__", "") or "").resolve() != path:
        raise ValueError(f"--kernel {selector!r}: the name {path.stem!r} is taken by {module.__name__} from "
                         f"{getattr(module, '__file__', None)}; rename {path.name}")
    shadowed = shadowed_neighbours(path.parent)
    wrong = {name: origin for name, origin in shadowed.items()
             if any(inspect.ismodule(value) and value.__name__.partition(".")[0] == name
                    for value in vars(module).values())}
    if wrong:
        raise ValueError(f"--kernel {selector!r}: {path.name} imports {', '.join(sorted(wrong))} by a name its "
                         f"folder's own module has, and got another{taken_names(path.parent, wrong)}")
    return module


def shadowed_neighbours(folder: Path) -> dict[str, str]:
    """Names of modules in ``folder`` (``NAME.py``, ``NAME/__init__.py``) that modules imported before, the
    suite's (report, kernels, specs...) or any other, already hold, with those modules' files: ``import NAME``
    there gets the module imported before, never the neighbour."""
    shadowed = {}
    for entry in os.scandir(folder):
        if entry.is_file() and entry.name.endswith(".py"):
            name = entry.name.removesuffix(".py")
        elif entry.is_dir() and (Path(entry.path) / "__init__.py").is_file():
            name = entry.name
        else:
            continue
        module = sys.modules.get(name)
        origin = getattr(module, "__file__", None)
        if origin and Path(origin).resolve() not in (folder / f"{name}.py", folder / name / "__init__.py"):
            shadowed[name] = origin
    return shadowed


def taken_names(folder: Path, shadowed: dict[str, str]) -> str:
    """What a message adds about ``shadowed`` names (nothing where there are none)."""
    if not shadowed:
        return ""
    told = "; ".join(f"'{name}' is already {origin}, imported before the kernel: 'import {name}' never reaches "
                     f"its neighbour in {folder}" for name, origin in sorted(shadowed.items()))
    return f" ({told}; rename the neighbour)"


def import_root(module) -> str:
    """The folder a replay run from the checkout's root must put on PYTHONPATH to import ``module`` ("" when a
    fresh interpreter there finds it: the checkout's own modules, installed packages)."""
    if not getattr(module, "__file__", None):
        return ""
    origin = Path(module.__file__).resolve()
    return replay_root(origin.parents[module.__name__.count(".") + (origin.name == "__init__.py")])


def replay_root(root: Path) -> str:
    """``root``, the folder a module's top package lies in, as a replay's PYTHONPATH: "" where a fresh interpreter
    in the checkout's root finds it anyway."""
    from_environment = {str(Path(p).resolve()) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p}
    found_anyway = {str(Path(p).resolve()) for p in sys.path if p} - from_environment - {str(Path.cwd().resolve())}
    return "" if root == ROOT or str(root) in found_anyway else str(root)


def import_root_unrun(selector: str) -> str:
    """:func:`import_root` of the module ``selector`` names, found on this process's path without running any of its
    code (``importlib.machinery.PathFinder`` locates a top-level package; nothing is imported): what the suite's
    process puts in a replay line, never a kernel process's word (one declared a folder of its own, holding a
    sitecustomize.py that made the replay of a failing input exit 0).  "" where it is not found so."""
    module_part = selector.rpartition(":")[0]
    if not module_part or is_file_selector(module_part):
        return ""
    top = module_part.split(".")[0]
    spec = importlib.machinery.PathFinder.find_spec(top, sys.path)
    if spec is None:
        return ""
    located = spec.submodule_search_locations or ([spec.origin] if spec.origin else [])
    if not located:
        return ""
    where = Path(next(iter(located))).resolve()
    return replay_root(where.parent)


def resolve(selector: str) -> KernelSpec:
    """A kernel by registered name, by ``package.module:function`` path, or by ``path/to/file.py:function``."""
    if selector in _REGISTRY:
        return _REGISTRY[selector]
    if ":" not in selector and is_file_selector(selector):
        raise ValueError(f"--kernel {selector!r}: name the kernel's function in that file too, as "
                         f"path/to/file.py:function (--kernel {selector}:FUNCTION)")
    if ":" not in selector:
        known = ", ".join(sorted(_REGISTRY))
        raise ValueError(f"--kernel {selector!r}: not a registered kernel ({known}) nor a 'module:function' path")
    module_part, _, attribute = selector.rpartition(":")
    if is_file_selector(module_part):
        module = loaded_from_file(selector, module_part)
        pythonpath = ""
    else:
        module = imported(selector, module_part)
        pythonpath = import_root(module)
    function = getattr(module, attribute, None)
    if not callable(function):
        raise ValueError(f"--kernel {selector!r}: {module_part} has no callable {attribute!r}")
    capabilities = getattr(function, "capabilities", USER_CONTRACT)
    if hasattr(function, "promises"):
        try:
            capabilities = replace(capabilities, promises=invariances(function.promises), promises_by_device={})
        except ValueError as error:
            raise ValueError(f"--kernel {selector!r}: {error}") from None
    callables = {runs: getattr(function, runs, None) if any(declares(capabilities, op) for op in operations) else None
                 for runs, operations in optional_callables().items()}
    for runs, given in {SOFTMAX.runs: function, **callables}.items():
        check_signature(selector, runs, given, [op for op in OPERATIONS.values()
                                                if op.runs == runs and declares(capabilities, op)])
    return KernelSpec(
        selector, function, capabilities, **callables,
        precision=precision_model(selector, function, capabilities),
        description=f"user kernel {selector}",
        clear_refusals=False,
        replay_selector=replay_selector_of(selector),
        pythonpath=pythonpath,
    )


def check_signature(selector: str, runs: str, function, operations: list[Declared]) -> None:
    """ValueError unless ``function`` (a user kernel's ``runs`` callable; None: not given, which the registration
    names) takes each of ``operations``' calls: its arguments in order, and ``out_dtype=`` where the entry has one.
    A callable whose signature Python cannot read is taken as it is."""
    if function is None:
        return
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return
    for op in operations:
        keywords = {} if op.out_dtype is None else {"out_dtype": op.out_dtype}
        try:
            signature.bind(*op.arguments, **keywords)
        except TypeError as error:
            asked = ", ".join([*op.arguments, *(f"{k}={v}" for k, v in keywords.items())])
            raise ValueError(f"--kernel {selector!r}: the suite calls its {op.what} as {runs}({asked}); "
                             f"{runs}{signature} cannot take that ({error})") from None


def replay_selector_of(selector: str) -> str:
    """How a replay command names the kernel ``selector`` names: a file's path made absolute, a module as given."""
    module_part, _, attribute = selector.rpartition(":")
    return f"{Path(module_part).expanduser().resolve()}:{attribute}" if is_file_selector(module_part) else selector


def precision_model(selector: str, function, capabilities: Capabilities) -> Callable[[Call], PrecisionProfile]:
    """A user kernel's ``precision`` attribute, checked to take the one call, and each profile it gives to be no
    looser than the suite's (:func:`checked`); :func:`unknown_profile` without one."""
    precision = getattr(function, "precision", None)
    if precision is None:
        return unknown_profile
    expected = "precision(call) -> PrecisionProfile, call an oracles.call.Call"
    if not callable(precision):
        raise ValueError(f"--kernel {selector!r}: its precision attribute must be a function {expected}; "
                         f"got {type(precision).__name__}")
    try:
        signature = inspect.signature(precision)
    except (TypeError, ValueError):  # a callable whose signature Python cannot read: taken as it is
        return checked(selector, precision, capabilities)
    try:
        signature.bind(None)
    except TypeError:
        raise ValueError(f"--kernel {selector!r}: its precision attribute must be {expected} (one positional "
                         f"argument); got precision{signature}") from None
    return checked(selector, precision, capabilities)


def checked(selector: str, precision: Callable[[Call], PrecisionProfile],
            capabilities: Capabilities) -> Callable[[Call], PrecisionProfile]:
    """``precision``, a user kernel's model, each profile it gives checked by :func:`declared_profile` (the judge asks
    for the profile in each test, which the refusal fails)."""

    @functools.wraps(precision)
    def model(call: Call) -> PrecisionProfile:
        return declared_profile(selector, precision(call), call, capabilities)

    return model


def declared_profile(selector: str, profile, call: Call, capabilities: Capabilities | None = None) -> PrecisionProfile:
    """``profile``, what the kernel ``selector``'s precision model gave for ``call``; TypeError if it is no
    PrecisionProfile, ValueError if it is looser than a kernel declaring no precision is judged by: judged by it,
    the kernel would be judged by a tolerance of its own choosing.  A tile the kernel's ``capabilities`` declare
    among its code-path boundaries on the call's backend (the suite draws its seams there) may be narrower than the
    narrowest known: its reduction may fold that often."""
    if not (isinstance(profile, PrecisionProfile) and isinstance(profile.arithmetic, Arithmetic)
            and isinstance(profile.reduction, Reduction)):
        raise TypeError(f"--kernel {selector!r}: precision(call) must return an oracles.bounds.PrecisionProfile of an "
                        f"Arithmetic and a Reduction; got {profile!r:.200}")
    tiles = capabilities.path_boundaries.get(call.backend, ()) if capabilities is not None else ()
    looser = looser_than_known(profile, call.x.shape[call.dim] if call.x.dim() else 1, call.operation, call.backend,
                               tiles)
    if looser:
        raise ValueError(f"--kernel {selector!r}: its precision model declares {profile.name!r}, looser than the "
                         f"loosest the suite knows (by which a kernel declaring no precision is judged) in "
                         f"{call.operation.name}, in {'; '.join(looser)}.  The kernel would be judged by its own "
                         f"tolerance, not the suite's: refused.  Declare the arithmetic it computes with "
                         f"(oracles/profiles.py), or no precision")
    return profile


def looser_than_known(profile: PrecisionProfile, n: int, operation: Operation | None = None,
                      backend: str | None = None, tiles: tuple[int, ...] = ()) -> list[str]:
    """Each respect in which ``profile``, on rows of ``n``, is looser than :func:`unknown_profile`, with both values:
    its arithmetic than the loosest known, its reduction than a sum in any order folding tiles as a known one.

    Given the ``operation`` judged, only the figures its bounds read count (``oracles.profiles.read_by``: torch's
    CUDA profile keeps a reported bug of its log_softmax, which no softmax bound reads).  Given the ``backend``, an
    arithmetic no looser there than one the suite itself judges a kernel by on that backend (:func:`known_arithmetics`:
    torch's, with its reported bugs, plain Triton's, the registered kernels') is no looser: a kernel may declare
    what the suite holds torch to.  Its reduction may fold tiles as narrow as the narrowest of ``tiles`` (the
    kernel's code-path boundaries on the backend) where that is narrower than the narrowest known."""
    read = read_by(operation)
    arithmetic = looser_than(profile.arithmetic, unknown_arithmetic(), read)
    if arithmetic and backend is not None and any(not looser_than(profile.arithmetic, known, read)
                                                  for known in known_arithmetics(backend)):
        arithmetic = []
    return [*arithmetic, *looser_sum(profile, n, min([NARROWEST_KNOWN_TILE, *(t for t in tiles if t > 0)]))]
