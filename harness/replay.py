"""One-step replay of a failure: rebuild the input, run the kernel, judge it against the oracle and torch.

    python -m harness.replay --kernel full_softmax --device cpu --op softmax "Case(shape=(4, 97), ...)"

Every accuracy failure prints this command with its own kernel, device,
operation and case.  A ``module:function`` kernel must be importable, as with
``--kernel`` in a run.  The case is read, never evaluated: a literal grammar
takes the recipes' calls, numbers, strings, tuples and ``torch.<dtype>``, and
refuses anything else (:func:`parse_case`), so a pasted argument runs no code.
The kernel runs under the suite's call guard (:mod:`harness.guard.calls`): a kernel
that changes its input, returns memory it returned before, raises inside its
capabilities or outlives the watchdog fails here as in a run, and a kernel named
by its path runs in a process of its own, as in a run.  Exit status: 0
within the derived bound, 1 beyond it, a broken call or a project kernel not
refusing outside its capabilities (a user's kernel returning numbers there is
judged), and a call the kernel ended (``sys.exit(0)``, KeyboardInterrupt: no
verdict is no pass, and a kernel ending its process: ``os._exit(0)``), 2 on
bad arguments (a case outside the grammar or one torch cannot build, a kernel
that cannot be imported, among them).
What the kernel says is printed with its control characters written out.
"""

from __future__ import annotations

import argparse
import ast
import functools
import math
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass, fields

from report.text import printable

from .device.backend import CHOICES, BackendError, activate
from .guard.replay_command import RECIPES

NOT_A_CASE = "CASE: not a Case(...) as a failure prints it"
LITERAL_TYPES = (int, float, str, bool, type(None))  # not bytes, complex or Ellipsis: no recipe holds them
NAMED_FLOATS = {"inf": math.inf, "nan": math.nan}  # what repr prints for an infinite or NaN float
WITHIN, BEYOND = 0, 1  # exit statuses; 2, bad arguments, is argparse's


def parse_case(text: str):
    """The Case a failure printed, read from its repr by a literal grammar: nothing in ``text`` is run.

    Accepted: calls of the recipes (:data:`RECIPES`, by plain name, positional or keyword arguments), int,
    float, str, bool and None constants, a sign before a number, tuples, ``inf`` and ``nan``, and
    ``torch.<dtype>`` for the dtypes a Case may hold.  Anything else, and a recipe whose fields have the
    wrong types, is refused with a ValueError that names it.
    """
    from .inputs import strategies

    text = text.strip()  # eval() ignored leading blanks; ast.parse takes them for an indent
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError) as error:  # MemoryError: too deeply nested
        raise ValueError(f"{NOT_A_CASE}: {type(error).__name__}: {error or 'nested too deeply'}") from None
    case = _read(tree.body, text, load_grammar())
    if not isinstance(case, strategies.Case):
        raise ValueError(f"CASE: expected Case(...), got {type(case).__name__}")
    return case


@dataclass(frozen=True)
class Grammar:
    """What a Case's repr may name: the recipes, the dtypes, and each recipe field's rule."""

    recipes: dict[str, type]
    dtypes: dict[str, object]  # "float32": torch.float32
    rules: dict[str, dict[str, tuple[Callable[[object], bool], str]]]  # recipe -> field -> (check, description)


@functools.cache
def load_grammar() -> Grammar:
    # Imported on first use: the kernels (through the strategies) must import after the backend is chosen.
    from specs.registry import FLOATING

    from .inputs import strategies

    dtypes = {str(dtype).removeprefix("torch."): dtype for dtype in sorted(FLOATING, key=str)}
    recipes = {name: getattr(strategies, name) for name in RECIPES}
    return Grammar(recipes, dtypes, _field_rules(recipes, dtypes))


def _field_rules(recipes: dict[str, type], dtypes: dict[str, object]):
    """Each recipe field's check and what it demands (Values checks its kind and scale itself, when built)."""
    ints, share = (_is_int_tuple, "a tuple of ints"), (_is_share, "a number in [0, 1]")
    dtype_names = ", ".join(f"torch.{name}" for name in dtypes)
    return {
        "Case": {
            "shape": (_is_shape, "a tuple of non-negative ints"),
            "dim": (_is_int, "an int"),
            "dtype": (_one_of(tuple(dtypes.values())), f"one of {dtype_names}"),
            "values": (_instance_of(recipes["Values"]), "a Values(...)"),
            "layout": (_instance_of(recipes["Layout"], optional=True), "a Layout(...) or None"),
            "specials": (_instance_of(recipes["Specials"]), "a Specials(...)"),
            "mask": (_instance_of(recipes["Mask"], optional=True), "a Mask(...) or None"),
            "seed": (_is_seed, "an int in [0, 2**64)"),
            "seam": (_instance_of(recipes["Seam"], optional=True), "a Seam(...) or None"),
            "grad": (_instance_of(recipes["Values"], optional=True), "a Values(...) or None"),
            "grad_layout": (_instance_of(recipes["Layout"], optional=True), "a Layout(...) or None"),
            "grad_specials": (_instance_of(recipes["Specials"]), "a Specials(...)"),
            "scale": (_optional(_is_number), "a number or None"),
            "bias": (_instance_of(recipes["Bias"], optional=True), "a Bias(...) or None"),
        },
        "Bias": {"kind": (_is_str, "a bias kind's name"), "spans": (_is_str, "a span's name"),
                 "layout": (_is_str, "a bias layout's name")},
        "Values": {"kind": (_is_str, "a value class's name"), "scale": (_is_number, "a number")},
        "Layout": {"order": ints, "steps": ints, "pad": (_is_int, "an int"), "offset": (_is_int, "an int"),
                   "expanded": ints},
        "Specials": {"neg_inf": share, "neg_inf_rows": share, "pos_inf": share, "nan": share, "neg_inf_head": share},
        "Mask": {"keep": share, "empty_rows": share,
                 "structure": (_instance_of(recipes["Seam"], optional=True), "a Seam(...) or None")},
        "Seam": {"placement": (_is_str, "a placement's name"), "tile": (_is_positive_int, "a positive int")},
    }


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_positive_int(value) -> bool:
    return _is_int(value) and value > 0


def _is_str(value) -> bool:
    return isinstance(value, str)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_int_tuple(value) -> bool:
    return isinstance(value, tuple) and all(map(_is_int, value))


def _is_shape(value) -> bool:
    return _is_int_tuple(value) and all(size >= 0 for size in value)


def _is_seed(value) -> bool:
    return _is_int(value) and 0 <= value < 2**64  # what torch.Generator.manual_seed takes


def _is_share(value) -> bool:
    return _is_number(value) and 0 <= value <= 1  # NaN fails


def _optional(check):
    return lambda value: value is None or check(value)


def _one_of(allowed: tuple):
    # Type as well as equality: True == 1 and 1 == 1.0, but neither is the value a failure printed.
    return lambda value: any(type(value) is type(a) and value == a for a in allowed)


def _instance_of(cls: type, optional: bool = False):
    return lambda value: isinstance(value, cls) or (optional and value is None)


def _read(node: ast.expr, text: str, grammar: Grammar):
    """The value of one node of the grammar; a ValueError for any other node."""
    if isinstance(node, ast.Constant) and type(node.value) in LITERAL_TYPES:
        return node.value
    if isinstance(node, ast.Name) and node.id in NAMED_FLOATS:
        return NAMED_FLOATS[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)) and _is_number_node(node.operand):
        number = _read(node.operand, text, grammar)
        return -number if isinstance(node.op, ast.USub) else number
    if isinstance(node, ast.Tuple):
        return tuple(_read(element, text, grammar) for element in node.elts)
    if _is_dtype_node(node, grammar):
        return grammar.dtypes[node.attr]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in grammar.recipes:
        return _build(node, text, grammar)
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "torch":
        allowed = ", ".join(f"torch.{name}" for name in grammar.dtypes)
        raise _refusal(node, text, found=f"torch.{node.attr} (a Case's dtype is one of {allowed})")
    raise _refusal(node, text)


def _is_number_node(node: ast.expr) -> bool:
    """A number a sign may precede: an int or float constant, inf or nan."""
    return ((isinstance(node, ast.Constant) and _is_number(node.value))
            or (isinstance(node, ast.Name) and node.id in NAMED_FLOATS))


def _is_dtype_node(node: ast.expr, grammar: Grammar) -> bool:
    """``torch.<dtype>`` for an allowed dtype, and no other attribute."""
    return (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "torch"
            and node.attr in grammar.dtypes)


def _build(call: ast.Call, text: str, grammar: Grammar):
    """The recipe a call names, built from arguments of the grammar, its fields checked."""
    name = call.func.id
    args = [_read(arg, text, grammar) for arg in call.args]  # a *starred argument is refused here
    kwargs = {}
    for keyword in call.keywords:
        if keyword.arg is None:
            raise _refusal(keyword, text, found="a **argument")
        kwargs[keyword.arg] = _read(keyword.value, text, grammar)
    try:
        recipe = grammar.recipes[name](*args, **kwargs)
    except TypeError as error:  # a field missing, unknown or given twice
        raise ValueError(f"{NOT_A_CASE}: {error}") from None
    except ValueError as error:  # a recipe that checks its own fields names the one it refused
        raise ValueError(f"CASE: {error}") from None
    for field in fields(recipe):
        check, demand = grammar.rules[name][field.name]
        value = getattr(recipe, field.name)
        if not check(value):
            raise ValueError(f"CASE: {name}.{field.name} must be {demand}; got {value!r}")
    return recipe


def _refusal(node: ast.AST, text: str, found: str | None = None) -> ValueError:
    """The error for a node outside the grammar: what it is, its text, and where."""
    kind = type(node).__name__
    segment = ast.get_source_segment(text, node) or ""
    if len(segment) > 60:
        segment = segment[:57] + "..."
    found = found or f"{'an' if kind[0] in 'AEIO' else 'a'} {kind} ({segment})"
    return ValueError(f"{NOT_A_CASE}: only literals and {'/'.join(RECIPES)}(...) are allowed; "
                      f"found {found} at {_position(node, text)}")


def _position(node: ast.AST, text: str) -> str:
    """Line (when there are several) and 1-based column of a node; ast counts columns in UTF-8 bytes."""
    line = text.splitlines()[node.lineno - 1]
    column = len(line.encode()[:node.col_offset].decode(errors="ignore")) + 1
    return f"line {node.lineno}, column {column}" if "\n" in text else f"column {column}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.replay", description=__doc__.split("\n")[0])
    parser.add_argument("--kernel", required=True, help="a registered name, 'torch', or package.module:function")
    parser.add_argument("--device", default="auto", choices=CHOICES)
    parser.add_argument("--op", default="softmax",
                        help="the operation, as records name it (specs/operations.py): softmax, masked_softmax, ...")
    parser.add_argument("--call-timeout", type=float, metavar="SECONDS",
                        help="the watchdog's limit on the kernel call (default: the suite's for the device; 0: none)")
    parser.add_argument("case", help="the Case(...) the failure printed")
    args = parser.parse_args(argv)
    # The interpreter's numpy warns of what the judge reports (as pytest.ini filters for a run).
    warnings.filterwarnings("ignore", category=RuntimeWarning, module="triton.runtime.interpreter")
    try:
        backend = activate(args.device)  # before the kernels import triton
        from .internals import torch_state

        torch_state.remember()  # torch's softmax before any kernel's import: the guard holds the kernel to it
        from specs.operations import OPERATIONS

        from .guard.calls import Breadcrumbs, Guard, Outputs, Watchdog, guarded
        from .guard.host import hosted, is_hosted
        from .plugins.session import CALL_GRACE, CALL_TIMEOUT

        limit = CALL_TIMEOUT[backend.name] if args.call_timeout is None else args.call_timeout
        grace = min(CALL_GRACE, limit or CALL_GRACE)
        nowhere = Breadcrumbs(None, "replay")
        guard = Guard(Watchdog(limit or None, grace, nowhere), nowhere, Outputs())
        kernel = resolved(args.kernel, lambda selector: hosted(selector, backend, limit or None, grace, nowhere))
        kernel = kernel if is_hosted(kernel) else guarded(kernel, guard)
        case = parse_case(args.case)
        if args.op not in OPERATIONS:
            raise ValueError(f"argument --op: invalid choice: {args.op!r} (choose from {', '.join(OPERATIONS)})")
        call = built(case, OPERATIONS[args.op], backend.name, backend.device)
    except (BackendError, ValueError) as error:
        parser.error(printable(str(error)))
    try:
        return replayed(kernel, case, call, backend)
    except (SystemExit, KeyboardInterrupt) as error:  # the two that would set this process's exit status
        say(f"the kernel's code ended the replay ({type(error).__name__}: {error}): no verdict, so no pass")
        return BEYOND  # never 0: sys.exit(0) inside a kernel is no result within the bound


def resolved(selector: str, host: Callable):
    """The kernel ``selector`` names: a registered one imported here, any other run in its own process by
    ``host(selector)`` (as in a run: :mod:`harness.guard.host`); ValueError where it cannot be had, its module's import
    exiting among them (``sys.exit(0)`` there would end the replay with the status of a pass)."""
    import specs

    try:
        if selector in {spec.name for spec in specs.registered()} or ":" not in selector:
            return specs.resolve(selector)
        return host(selector)
    except (SystemExit, KeyboardInterrupt) as error:
        raise ValueError(f"--kernel {selector!r}: importing it raised {type(error).__name__}: {error}") from None


def built(case, op, backend: str, device):
    """The call ``case`` makes of ``op``; ValueError, a usage error, where it cannot be built: torch refused its
    recipe (a layout of other dims, a storage past memory) or the operation does not take it."""
    try:
        return case.call(op, backend, device)
    except ValueError as error:  # a case without a mask for a masked operation, or the reverse; no gradient
        raise ValueError(f"CASE: {error}") from None
    except Exception as error:  # noqa: BLE001  (torch says what it could not build: IndexError, RuntimeError...)
        raise ValueError(f"CASE: cannot build it: {type(error).__name__}: {error}") from None


def replayed(kernel, case, call, backend) -> int:
    """Run ``kernel`` on ``call`` and judge what it returned, as the tests do (:mod:`harness.judging.pipeline`),
    and say it: the exit status."""
    from .guard.calls import KernelHang, SuiteFailure
    from .judging.judge import describe_input
    from .judging.pipeline import LOOSEST, run_and_judge

    described = describe_input(call.x, call.dim, call.grad, call.bias)
    say(f"{kernel.name}, {call.operation.name} on {backend.name} ({backend.device_name}): {described}")
    try:
        ran = run_and_judge(kernel, call, replay=f"{case!r} -> {described}")
    except KernelHang as error:
        say(str(error))
        return BEYOND
    if isinstance(ran.raised, SuiteFailure):  # it changed its input, reused an output, returned another shape
        say(str(ran.raised))
        return BEYOND
    if ran.raised is not None:
        said = f"{type(ran.raised).__name__}: {ran.raised}"
        if ran.refusal is None:
            say(f"raised inside its declared capabilities: {said}")
            return BEYOND
        must = ran.kernel.clear_refusals and not isinstance(ran.raised, type(ran.refusal))
        say(f"refused with {said}, where it must raise {type(ran.refusal).__name__} ({ran.refusal})" if must else
            f"refused, as it must be outside its capabilities ({ran.refusal}): {said}")
        return BEYOND if must else WITHIN
    if ran.refusal is not None:
        say(f"returned numbers for an input outside its declared capabilities: {ran.refusal}")
        if ran.verdict is None:  # this project's kernels must refuse; torch refuses the input or it holds no number
            return BEYOND if kernel.clear_refusals or not ran.torch_accepts else WITHIN
        say(f"{LOOSEST}:")
    say(ran.verdict.explain())
    return WITHIN if ran.verdict.ok else BEYOND


def say(text: str) -> None:
    """Print a line of the replay's: what the kernel said in it (its messages, its name) cannot act on the
    terminal."""
    print(printable(text))


if __name__ == "__main__":
    sys.exit(main())
