"""The project's packages import one another one way only, and so do the rooms of harness/: the layers of
ARCHITECTURE.md.

Every module of every package is parsed (no import runs); each import of another of the project's packages,
lazy ones inside functions included, must be one that :data:`ALLOWED` lists; each import of one room of harness/
by another, lazy ones included, one that :data:`ROOMS` lists; and the graph of the imports that exist must have no
cycle, neither between packages nor between modules (a function-local import included: it hides a circle from
Python, not from a reader).  A new top-level package (a folder with ``__init__.py``) and a new room of harness/
fail until they are given their row.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ANY = "any package of ours but tests"

# Which of the project's packages each package may import, bottom layer first.
ALLOWED = {
    "oracles": (),  # exact results, error measures and bounds: nothing of ours
    "kernels": (),  # Triton kernels and their host code, each checking its own input limits: nothing of ours
    "specs": ("kernels", "oracles"),  # one record per kernel: capabilities, arithmetic, precision, promises
    "report": ("oracles",),  # documents: records, baselines, merges, comparisons, the league
    "harness": ("oracles", "kernels", "specs", "report"),  # the run: its rooms in ROOMS below, and the commands
    "bench": ANY,
    "examples": ANY,
}
NOT_IMPORTABLE = ("tests",)  # no package imports the suite's tests

# The rooms of harness/ (its sub-packages), bottom first, and the rooms each may import besides its own.  A module at
# harness/'s top is a command (``python -m harness.soak|nightly|replay``): it may import every room and the other
# commands, and no room imports it.
ROOMS = {
    "internals": (),  # what of torch, Triton, Hypothesis, pytest-xdist and the CPU the suite relies on or changes
    "device": ("internals",),  # where kernels run: the backend, a device per worker, the interpreter's view of sums
    "inputs": ("internals",),  # what is drawn: recipes and strategies, seams, the catalog, the coverage matrix
    "guard": ("internals", "device", "inputs"),  # the call boundary: the guard, the kernel's process, what crosses
    "judging": ("internals", "device", "inputs", "guard"),  # from an output to a verdict: judge, invariances, records
    "plugins": ("internals", "device", "inputs", "guard", "judging"),  # the pytest plugins: settings, seeds, reports
}
COMMANDS = "a command"


def packages(root: Path) -> list[str]:
    """The project's packages: the table's folders that exist, and every top-level folder with ``__init__.py``."""
    found = {path.parent.name for path in root.glob("*/__init__.py")} - set(NOT_IMPORTABLE)
    return sorted(found | {name for name in ALLOWED if (root / name).is_dir()})


def imported(module: Path, root: Path) -> list[tuple[str, int]]:
    """The absolute module names ``module`` imports (relative imports resolved), with their line numbers."""
    parts = module.relative_to(root).with_suffix("").parts
    package = parts[:-1]
    names = []
    for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"), str(module))):
        if isinstance(node, ast.Import):
            names += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else ()
            names.append((".".join([*base, *([node.module] if node.module else [])]), node.lineno))
    return names


def cross_imports(root: Path) -> list[tuple[str, str, str]]:
    """Every import of one package of ours by another: (importer, imported package, where)."""
    ours = set(packages(root)) | set(NOT_IMPORTABLE)
    found = []
    for package in packages(root):
        for module in sorted((root / package).rglob("*.py")):
            for name, line in imported(module, root):
                target = name.split(".")[0]
                if target in ours and target != package:
                    found.append((package, target, f"{module.relative_to(root)}:{line} imports {name}"))
    return found


def may_import(importer: str, target: str) -> bool:
    allowed = ALLOWED[importer]
    return target not in NOT_IMPORTABLE if allowed == ANY else target in allowed


def violations(root: Path, package: str) -> list[str]:
    return [where for importer, target, where in cross_imports(root)
            if importer == package and not may_import(importer, target)]


def cycle(root: Path) -> list[str] | None:
    """A cycle of the package graph (``[a, b, ..., a]``), if there is one."""
    graph: dict[str, set[str]] = {}
    for importer, target, _ in cross_imports(root):
        graph.setdefault(importer, set()).add(target)
    return cycle_of(graph)


def modules(root: Path) -> dict[str, Path]:
    """The project's modules by dotted name (a package's ``__init__`` by the package's)."""
    found = {}
    for package in packages(root):
        for module in sorted((root / package).rglob("*.py")):
            parts = module.relative_to(root).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = module
    return found


def module_imports(module: Path, root: Path, known: dict[str, Path]) -> set[str]:
    """The project's modules ``module`` imports, at its top or inside a function: ``from . import b`` imports
    module ``b`` where there is one."""
    parts = module.relative_to(root).with_suffix("").parts
    package = parts[:-1]
    found = set()
    for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"), str(module))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = ".".join([*(package[:len(package) - node.level + 1] if node.level else ()),
                             *([node.module] if node.module else [])])
            found |= {base, *(f"{base}.{alias.name}" for alias in node.names)}
    return {name for name in found if name in known}


def module_cycle(root: Path) -> list[str] | None:
    """A cycle of the module graph, lazy imports included (``[a, b, ..., a]``), if there is one."""
    known = modules(root)
    return cycle_of({name: module_imports(path, root, known) - {name} for name, path in known.items()})


def room_of(name: str, path: Path) -> str | None:
    """The room of harness/ a module of it is in (:data:`COMMANDS` at harness/'s top); None for another package's."""
    parts = name.split(".")
    if parts[0] != "harness" or len(parts) == 1:
        return None
    return parts[1] if len(parts) > 2 or path.name == "__init__.py" else COMMANDS


def rooms(root: Path) -> list[str]:
    return sorted(path.parent.name for path in (root / "harness").glob("*/__init__.py"))


def room_violations(root: Path, room: str) -> list[str]:
    """Every import, at a module's top or inside a function, of one room of harness/ by a module of ``room`` that
    :data:`ROOMS` does not allow."""
    known = modules(root)
    found = []
    for name, path in known.items():
        if room_of(name, path) != room:
            continue
        for target in sorted(module_imports(path, root, known)):
            other = room_of(target, known[target])
            if other is not None and other != room and room != COMMANDS and other not in ROOMS.get(room, ()):
                found.append(f"{path.relative_to(root)} ({room}) imports {target} ({other})")
    return found


def cycle_of(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of ``graph`` (node -> the nodes it points to), if there is one."""
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> list[str] | None:
        if node in path:
            return path[path.index(node):] + [node]
        if node in done:
            return None
        for target in sorted(graph.get(node, ())):
            found = visit(target, path + [node])
            if found:
                return found
        done.add(node)
        return None

    return next((found for node in sorted(graph) if (found := visit(node, []))), None)


def test_every_package_has_a_row_in_the_table():
    assert not set(packages(ROOT)) - set(ALLOWED), "a new package: say in ALLOWED what it may import"


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_a_package_imports_only_the_layers_below_it(package):
    assert not violations(ROOT, package), f"{package} may import only {ALLOWED[package] or 'nothing of ours'}"


def test_every_room_of_harness_has_a_row_in_the_table():
    assert not set(rooms(ROOT)) - set(ROOMS), "a new room of harness/: say in ROOMS what it may import"


@pytest.mark.parametrize("room", sorted(ROOMS))
def test_a_room_of_harness_imports_only_the_rooms_below_it(room):
    assert not room_violations(ROOT, room), f"{room} may import only {ROOMS[room] or 'no other room'}"


def test_the_packages_import_one_another_without_a_cycle():
    assert cycle(ROOT) is None


def test_the_modules_import_one_another_without_a_cycle_through_function_local_imports_too():
    assert module_cycle(ROOT) is None


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


BELOW = {"oracles/__init__.py": "", "kernels/__init__.py": "from oracles import bounds\n",
         "report/__init__.py": "", "harness/__init__.py": "", "harness/judging/judge.py": "from report import records\n"}


@pytest.mark.parametrize("files, package", [
    ({"report/plugin.py": "from harness import session\n"}, "report"),  # the cycle this table broke
    ({"report/records.py": "def f():\n    from harness.judging.judge import Measurement\n"}, "report"),  # a lazy import
    ({"oracles/profiles.py": "from ..kernels import registry\n"}, "oracles"),  # a relative one
    ({"harness/replay.py": "import tests.fakes\n"}, "harness"),
    ({"bench/run.py": "from tests import conftest\n"}, "bench"),
])
def test_an_import_against_the_layers_is_caught(tmp_path, files, package):
    root = write(tmp_path, {**BELOW, **files})
    assert violations(root, package)


def test_the_layers_cycle_is_caught(tmp_path):
    root = write(tmp_path, {**BELOW, "report/invariances.py": "from harness.judging.invariance import INVARIANCE\n"})
    assert cycle(root) == ["harness", "report", "harness"]
    assert cycle(write(tmp_path / "fixed", BELOW)) is None


def test_a_new_package_without_a_row_is_caught(tmp_path):
    assert set(packages(write(tmp_path, {**BELOW, "records/__init__.py": ""}))) - set(ALLOWED) == {"records"}


def test_a_cycle_of_modules_through_a_function_local_import_is_caught(tmp_path):
    root = write(tmp_path, {**BELOW, "harness/guard/__init__.py": "", "harness/replay.py": "from .guard import calls\n",
                            "harness/guard/calls.py": "def f():\n    from ..replay import command\n"})
    assert module_cycle(root) == ["harness.guard.calls", "harness.replay", "harness.guard.calls"]
    assert module_cycle(write(tmp_path / "fixed", {**BELOW, "harness/replay.py": "from .guard import calls\n",
                                                   "harness/guard/__init__.py": "", "harness/guard/calls.py": ""})) is None


ROOMS_BELOW = {f"harness/{room}/__init__.py": "" for room in ROOMS}


@pytest.mark.parametrize("files, room", [
    ({"harness/inputs/coverage.py": "def f():\n    from ..plugins.session import session_of\n"}, "inputs"),  # lazy
    ({"harness/guard/calls.py": "def f():\n    from ..judging import judge\n"}, "guard"),  # lazy, a room above
    ({"harness/internals/payload.py": "from harness.device import backend\n"}, "internals"),  # absolute
    ({"harness/judging/judge.py": "from .. import replay\n"}, "judging"),  # a command
])
def test_an_import_against_the_rooms_of_harness_is_caught(tmp_path, files, room):
    root = write(tmp_path, {**BELOW, **ROOMS_BELOW, "harness/replay.py": "", "harness/device/backend.py": "",
                            "harness/plugins/session.py": "", "harness/judging/judge.py": "", **files})
    assert room_violations(root, room)
    assert not room_violations(write(tmp_path / "fixed", {**BELOW, **ROOMS_BELOW}), room)


def test_a_new_room_of_harness_without_a_row_is_caught(tmp_path):
    assert set(rooms(write(tmp_path, {**BELOW, "harness/drivers/__init__.py": ""}))) - set(ROOMS) == {"drivers"}
