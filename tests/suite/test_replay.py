"""One-step replay: the command a failure prints rebuilds the input, reruns the kernel and judges it again."""

import math
import os
import re
import shutil
import subprocess
from dataclasses import fields
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.inputs.catalog import CATALOG
from harness.inputs.strategies import Case, Layout, Mask, Specials, Values, cases
from harness.guard.replay_command import PYTHON, RECIPES
from harness.replay import parse_case
from specs.registry import Capabilities
from tests import subruns

ROOT = subruns.ROOT
PLANTED = "my_kernels:softmax_half_sum"  # examples/my_kernels.py: the row sum in the half input dtype


def start_replay(*args: str, cwd: Path = ROOT) -> subprocess.Popen:
    """``python -m harness.replay`` in a fresh interpreter (no inherited TRITON_INTERPRET), running in ``cwd``."""
    env = subruns.environment(PYTHONPATH=os.pathsep.join([str(ROOT / "examples"), str(ROOT)]))
    return subprocess.Popen(subruns.python("harness.replay", *args), cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # apart: the tests read what argparse says


def finished(process: subprocess.Popen) -> subprocess.CompletedProcess:
    try:
        stdout, stderr = process.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        process.kill()  # as subprocess.run does: no replay outlives its test
        raise
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def replay(*args: str) -> subprocess.CompletedProcess:
    return finished(start_replay(*args))


def run_as_printed(command: str) -> subprocess.CompletedProcess:
    return subruns.pasted(command)


def test_the_command_a_failure_prints_replays_it_as_printed_and_the_reports_lead_to_it(run_pytest, tmp_path):
    """The user's kernel lives outside the checkout, on the PYTHONPATH of the run: the replay line carries it."""
    mine = tmp_path / "mine"
    mine.mkdir()
    shutil.copy(ROOT / "examples" / "my_kernels.py", mine / "my_kernels.py")
    # One dtype, one test: the planted half-precision sum fails fp16 (and bf16), not fp32.
    failed = run_pytest("tests/kernel/test_accuracy.py", "-k", "test_output_within and -softmax- and float16 and not bfloat16",
                        "--hypothesis-profile", "ci", "--device", "cpu", "--kernel", PLANTED, "--accuracy-report",
                        str(tmp_path / "report"), PYTHONPATH=str(mine))
    assert failed.returncode == pytest.ExitCode.TESTS_FAILED, failed.stdout[-3000:]

    summary = (tmp_path / "report" / "summary.md").read_text()
    assert summary.split("\n")[2].startswith("**FAILED: 0 test(s) passed, 1 failed")
    assert "## Failed tests" in summary and re.search(rf"replay: `PYTHONPATH={re.escape(str(mine))}(:\S*)? "
                                                       rf"{re.escape(PYTHON)} -m harness\.replay --kernel my_kernels:",
                                                       summary), summary
    page = (tmp_path / "report" / "index.html").read_text()
    links = set(re.findall(r"<tr class=bad><td><a href='#([^']+)'>", page))
    assert links and all(f"id='{anchor}'" in page for anchor in links)  # every red row leads to its failure
    line = next(line for line in failed.stdout.splitlines() if "replay in one step: " in line)
    printed = line.split("replay in one step: ")[1]
    again = run_as_printed(printed)
    assert again.returncode == 1, again.stdout[-2000:] + again.stderr[-2000:]
    assert f"{PLANTED}: " in again.stdout and "beyond the derived bound" in again.stdout
    fixed = run_as_printed(printed.replace(PLANTED, "my_kernels:softmax"))
    assert fixed.returncode == 0 and "0 of " in fixed.stdout, fixed.stdout[-2000:] + fixed.stderr[-2000:]


def test_a_kernel_named_by_its_file_replays_as_printed(run_pytest, tmp_path):
    mine = tmp_path / "elsewhere"
    mine.mkdir()
    shutil.copy(ROOT / "examples" / "my_kernels.py", mine / "my_kernels.py")
    failed = run_pytest("tests/kernel/test_accuracy.py", "-k", "test_output_within and -softmax- and float16 and not bfloat16",
                        "--hypothesis-profile", "mutation", "--device", "cpu", "--kernel",
                        f"{mine / 'my_kernels.py'}:softmax_half_sum")
    assert failed.returncode == pytest.ExitCode.TESTS_FAILED, failed.stdout[-3000:]
    printed = next(line for line in failed.stdout.splitlines() if "replay in one step: " in line).split(
        "replay in one step: ")[1]
    assert printed.startswith(f"{PYTHON} -m harness.replay --kernel {mine / 'my_kernels.py'}:softmax_half_sum")
    assert run_as_printed(printed).returncode == 1


def test_a_case_is_read_back_from_its_repr_and_nothing_else_is():
    case = Case((3, 5), 1, __import__("torch").float16, Values("normal", 4.0), specials=Specials(nan=0.3), seed=7)
    assert parse_case(repr(case)) == case
    with pytest.raises(ValueError, match="not a Case"):
        parse_case("__import__('os').system('true')")
    bad = replay("--kernel", "torch", "--device", "cpu", "Case(shape=(4,)")
    assert bad.returncode == 2 and "CASE: not a Case(...)" in bad.stderr


# Arguments that smuggle code into a replay, each with what the refusal must name.  Every one that calls
# system() would create the file PWNED in the working directory if it ran.
PWNED = "pwned"
TOUCH = f"torch.os.system('touch {PWNED}')"
ESCAPE = ("[c for c in ().__class__.__base__.__subclasses__() if c.__name__ == 'catch_warnings'][0]()"
          f"._module.__builtins__['__import__']('os').system('touch {PWNED}')")  # no name from the scope needed
CRAFTED = {
    "arithmetic in a Values field": (
        f"Case(shape=(2, 3), dim=1, dtype=torch.float32, values=Values(kind='normal', scale=1.0 + 0*{TOUCH}), seed=0)",
        f"a BinOp (1.0 + 0*{TOUCH[:40]}"),
    "a call in a Values field": (
        f"Case(shape=(2,), dim=0, dtype=torch.float32, values=Values(kind='normal', scale={TOUCH}))",
        f"a Call ({TOUCH})"),
    "a lambda in a Layout field": (
        "Case(shape=(2, 3), dim=1, dtype=torch.float32, layout=Layout(order=(0, 1), steps=(1, 1), "
        f"pad=(lambda os=torch.os: os.system('touch {PWNED}'))()), seed=0)", "a Call ((lambda os=torch.os:"),
    "the object graph from a tuple": (f"Case(shape=(2,), dim=0, dtype=torch.float32, seed={ESCAPE})",
                                      "a Call ([c for c in ().__class__.__base__.__subclasses__()"),
    "torch's os module": (TOUCH, f"a Call ({TOUCH})"),
    "__import__": (f"__import__('os').system('touch {PWNED}')", "a Call (__import__('os')"),
    "a recipe's globals": (f"Values.__init__.__globals__['torch'].os.system('touch {PWNED}')",
                           "a Call (Values.__init__.__globals__"),
    "an attribute of a dtype": ("Case(shape=(2,), dim=0, dtype=torch.float32.__class__)",
                                "an Attribute (torch.float32.__class__) at column 31"),
    "a torch attribute that is no dtype": ("Case(shape=(2,), dim=0, dtype=torch.os)", "torch.os (a Case's dtype is"),
    "an f-string": (f'Case(shape=(2,), dim=0, dtype=torch.float32, values=Values(kind=f"normal{{{TOUCH}}}"))',
                    "a JoinedStr"),
    "a subscript": (f"Case(shape=(2,), dim=0, dtype=torch.float32, seed=({TOUCH},)[0])", "a Subscript"),
    "a boolean operator": (f"Case(shape=(2,), dim=0, dtype=torch.float32, seed={TOUCH} or 0)", "a BoolOp"),
    "a starred argument": (f"Case(*(({TOUCH},), 0, torch.float32))", "a Starred"),
    "a ** argument": (f"Case(shape=(2,), dim=0, dtype=torch.float32, **{{'seed': {TOUCH}}})",
                      "a **argument at column 46"),
    "a lambda": ("Case(shape=(2,), dim=0, dtype=torch.float32, seed=lambda: 0)", "a Lambda (lambda: 0) at column 51"),
    "a comprehension": (f"Case(shape=(2,), dim=0, dtype=torch.float32, values=Values(kind='normal', "
                        f"scale=[x for x in ({TOUCH},)]))", "a ListComp ([x for x in"),
}
REFUSED = f"only literals and {'/'.join(RECIPES)}(...) are allowed; found "


@pytest.mark.parametrize("payload, found", CRAFTED.values(), ids=CRAFTED)
def test_no_argument_outside_the_literal_grammar_is_run(payload, found, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=re.escape(REFUSED + found)):
        parse_case(payload)
    assert not (tmp_path / PWNED).exists()


def test_a_crafted_case_runs_nothing(tmp_path):
    """End to end: the command exits 2 naming what it refused, and the code never ran.  Two payloads, run in
    parallel (~7 s each, torch's import): the test above takes every payload to parse_case itself."""
    names = ["arithmetic in a Values field", "the object graph from a tuple"]
    for name in names:
        (tmp_path / name).mkdir()  # where the payload, had it run, would have left its file
    runs = {name: start_replay("--kernel", "torch", "--device", "cpu", CRAFTED[name][0], cwd=tmp_path / name)
            for name in names}
    results = {name: finished(process) for name, process in runs.items()}
    for name, result in results.items():
        assert not (tmp_path / name / PWNED).exists(), f"{name}: the payload ran"
        assert result.returncode == 2 and REFUSED + CRAFTED[name][1] in result.stderr, (name, result.stderr[-2000:])
        assert not result.stdout, name


@pytest.mark.parametrize("field, text", [
    ("Case.shape", "Case(shape=(2.0,), dim=0, dtype=torch.float32)"),
    ("Case.shape", "Case(shape=(-1,), dim=0, dtype=torch.float32)"),
    ("Case.shape", "Case(shape=2, dim=0, dtype=torch.float32)"),
    ("Case.dim", "Case(shape=(2,), dim='0', dtype=torch.float32)"),
    ("Case.dim", "Case(shape=(2,), dim=True, dtype=torch.float32)"),
    ("Case.dtype", "Case(shape=(2,), dim=0, dtype='float32')"),
    ("Case.values", "Case(shape=(2,), dim=0, dtype=torch.float32, values=Mask())"),
    ("Case.layout", "Case(shape=(2,), dim=0, dtype=torch.float32, layout=(0,))"),
    ("Case.specials", "Case(shape=(2,), dim=0, dtype=torch.float32, specials=None)"),
    ("Case.mask", "Case(shape=(2,), dim=0, dtype=torch.float32, mask=Specials())"),
    ("Case.seed", "Case(shape=(2,), dim=0, dtype=torch.float32, seed=-1)"),
    ("Case.seed", "Case(shape=(2,), dim=0, dtype=torch.float32, seed=18446744073709551616)"),
    ("Values.kind", "Case(shape=(2,), dim=0, dtype=torch.float32, values=Values(kind='gaussian'))"),
    ("Values.scale", "Case(shape=(2,), dim=0, dtype=torch.float32, values=Values(kind='normal', scale='1'))"),
    ("Layout.order", "Case(shape=(2,), dim=0, dtype=torch.float32, layout=Layout(order=(0.0,), steps=(1,)))"),
    ("Layout.steps", "Case(shape=(2,), dim=0, dtype=torch.float32, layout=Layout(order=(0,), steps=1))"),
    ("Layout.pad", "Case(shape=(2,), dim=0, dtype=torch.float32, layout=Layout((0,), (1,), pad=None))"),
    ("Layout.offset", "Case(shape=(2,), dim=0, dtype=torch.float32, layout=Layout((0,), (1,), offset=0.5))"),
    ("Layout.expanded", "Case(shape=(2,), dim=0, dtype=torch.float32, layout=Layout((0,), (1,), expanded=0))"),
    ("Specials.nan", "Case(shape=(2,), dim=0, dtype=torch.float32, specials=Specials(nan=1.5))"),
    ("Specials.neg_inf_head", "Case(shape=(2,), dim=0, dtype=torch.float32, specials=Specials(neg_inf_head=nan))"),
    ("Mask.keep", "Case(shape=(2,), dim=0, dtype=torch.float32, mask=Mask(keep=-0.1))"),
    ("Mask.empty_rows", "Case(shape=(2,), dim=0, dtype=torch.float32, mask=Mask(empty_rows=inf))"),
    ("Mask.structure", "Case(shape=(2,), dim=0, dtype=torch.float32, mask=Mask(structure='causal'))"),
    ("Case.seam", "Case(shape=(2,), dim=0, dtype=torch.float32, seam=Mask())"),
    ("Seam.tile", "Case(shape=(2,), dim=0, dtype=torch.float32, seam=Seam(placement='causal', tile=0))"),
    ("Seam.placement", "Case(shape=(2,), dim=0, dtype=torch.float32, seam=Seam(placement=1, tile=8))"),
])
def test_a_recipe_field_of_the_wrong_type_is_refused_by_name(field, text):
    with pytest.raises(ValueError, match=rf"^CASE: {re.escape(field)} must be "):
        parse_case(text)


def test_every_field_of_every_recipe_has_a_rule():
    from harness.replay import load_grammar

    grammar = load_grammar()
    assert {name: set(rules) for name, rules in grammar.rules.items()} == \
           {name: {field.name for field in fields(grammar.recipes[name])} for name in RECIPES}


def test_a_case_reads_back_as_the_docs_and_the_failures_write_it():
    expected = Case((3, 5), 1, torch.float64, Values("sentinel", -math.inf), Layout((1, 0), (1, 2), pad=+3),
                    Specials(nan=0.3), Mask(keep=0.5), seed=7)
    assert parse_case("  Case((3, 5), 1, torch.float64, Values('sentinel', -inf), Layout((1, 0), (1, 2), pad=+3), "
                      "specials=Specials(nan=0.3), mask=Mask(keep=0.5), seed=7)\n") == expected
    assert parse_case(repr(expected).replace(", ", ",\n    ")) == expected  # the way Hypothesis prints a case
    with pytest.raises(ValueError, match="expected Case"):
        parse_case("Values('normal')")
    with pytest.raises(ValueError, match="unexpected keyword argument 'rows'"):
        parse_case("Case(shape=(2,), dim=0, dtype=torch.float32, rows=2)")
    with pytest.raises(ValueError, match=re.escape("found a List ([2]) at line 2, column 11")):
        parse_case("Case(\n    shape=[2], dim=0, dtype=torch.float32)")


@settings(max_examples=100)
@given(case=st.booleans().flatmap(lambda masked: cases(Capabilities(), "cpu", masked=masked)))
def test_every_case_the_strategies_draw_reads_back_from_its_repr(case):
    assert parse_case(repr(case)) == case


@pytest.mark.parametrize("case", CATALOG.values(), ids=CATALOG)
def test_every_catalog_entry_reads_back_from_its_repr(case):
    assert parse_case(repr(case)) == case


@settings(max_examples=50)
@given(case=st.booleans().flatmap(lambda masked: cases(Capabilities(), "cpu", masked=masked)))
def test_a_case_makes_the_same_input_whatever_torchs_default_dtype(case):
    """A kernel's module may set torch's default dtype: the inputs drawn after it, and each failure's replay in a
    fresh process, must not move with it."""
    x, keep = case.make()
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        x64, keep64 = case.make()
    finally:
        torch.set_default_dtype(default)
    assert x.dtype == x64.dtype and torch.equal(x.isnan(), x64.isnan()) and torch.equal(x.signbit(), x64.signbit())
    assert torch.equal(x.nan_to_num(7.0), x64.nan_to_num(7.0)) and (keep is None) == (keep64 is None)
    assert keep is None or torch.equal(keep, keep64)


UNBUILDABLE = {  # cases of the grammar that torch cannot build
    "a layout of other dims": "Case(shape=(2, 3), dim=1, dtype=torch.float32, layout=Layout(order=(5,), steps=(1,)))",
    "storage past memory": "Case(shape=(100000000000, 100000), dim=1, dtype=torch.float32)",
}
SMALL = "Case(shape=(2, 3), dim=1, dtype=torch.float32, values=Values(kind='normal', scale=1.0), seed=0)"
EXITS = "tests.hostile.exits_in_call:"


def test_a_case_torch_cannot_build_is_a_usage_error_not_a_kernel_beyond_its_bound():
    """It exited 1, the status of a kernel beyond its bound, with torch's traceback."""
    started = {name: start_replay("--kernel", "torch", "--device", "cpu", case) for name, case in UNBUILDABLE.items()}
    for name, process in started.items():
        result = finished(process)
        assert result.returncode == 2, (name, result.stdout[-2000:], result.stderr[-2000:])
        assert "error: CASE: cannot build it: " in result.stderr and "Traceback" not in result.stderr, name


def test_a_kernel_that_calls_sys_exit_0_inside_its_call_is_no_pass():
    """SystemExit(0) went through the replay: exit status 0, within the bound."""
    result = replay("--kernel", EXITS + "exits_zero", "--device", "cpu", SMALL)
    assert result.returncode == 1, result.stdout[-2000:] + result.stderr[-2000:]
    assert "the kernel raised SystemExit (0) inside the call" in result.stdout, result.stdout[-2000:]


def test_a_kernel_that_calls_os_exit_0_inside_its_call_is_no_pass():
    """os._exit(0) ended the replay with the kernel's status, 0: the kernel now runs in a process of its own."""
    result = replay("--kernel", EXITS + "os_exits_zero", "--device", "cpu", SMALL)
    assert result.returncode == 1, result.stdout[-2000:] + result.stderr[-2000:]
    assert "the kernel's process ended (exit status 0) before it answered" in result.stdout, result.stdout[-2000:]



def test_a_kernel_that_raises_inside_its_declared_capabilities_is_beyond_them(capsys):
    """Unguarded (the guard names such a raise itself), the replay said "refused, as it must be outside its
    capabilities (None)" and exited 0 where the test of the same call fails: both now read one record
    (harness/judging/pipeline.py)."""
    from dataclasses import replace
    from types import SimpleNamespace

    from harness.judging.pipeline import run_and_judge
    from harness.replay import BEYOND, replayed
    from oracles.call import Call
    from specs.operations import SOFTMAX
    from specs.registry import resolve

    def crashes(x, dim):
        raise RuntimeError("an illegal memory access")

    kernel = replace(resolve("torch"), softmax=crashes)
    call = Call(torch.ones(2, 3), 1, SOFTMAX, "cpu")
    with pytest.raises(RuntimeError, match="an illegal memory access"):
        run_and_judge(kernel, call, replay="ones").check()
    assert replayed(kernel, "ones", call, SimpleNamespace(name="cpu", device_name="x86_64")) == BEYOND
    assert "raised inside its declared capabilities: RuntimeError: an illegal memory access" in capsys.readouterr().out


def test_an_empty_input_a_kernel_takes_replays_within_its_bound(capsys):
    """The replay of an input without elements crashed in the verdict's explanation (no worst element) and exited 1
    for a correct kernel."""
    from types import SimpleNamespace

    from harness.replay import WITHIN, replayed
    from oracles.call import Call
    from specs.operations import SOFTMAX
    from specs.registry import resolve

    call = Call(torch.ones(0, 97), 1, SOFTMAX, "cpu")
    assert replayed(resolve("torch"), "empty", call, SimpleNamespace(name="cpu", device_name="x86_64")) == WITHIN
    assert "no element to judge" in capsys.readouterr().out


def test_a_kernel_that_must_refuse_by_name_and_raises_another_error_is_beyond_its_capabilities(capsys):
    """This project's kernels refuse with the error their capabilities name: a RuntimeError instead of the TypeError
    for integer input fails the test, and the replay says so too (it said "refused, as it must be" and exited 0)."""
    from dataclasses import replace
    from types import SimpleNamespace

    from harness.replay import BEYOND, replayed
    from oracles.call import Call
    from specs.operations import SOFTMAX
    from specs.registry import resolve

    user = resolve("torch.nn.functional:softmax")
    call = Call(torch.ones(2, 3, dtype=torch.int32), 1, SOFTMAX, "cpu")
    assert replayed(replace(user, clear_refusals=True), "ints", call,
                    SimpleNamespace(name="cpu", device_name="x86_64")) == BEYOND
    assert "where it must raise TypeError" in capsys.readouterr().out
