"""The project's packages import one another one way only: the layers of ARCHITECTURE.md.

Every module of every package is parsed (no import runs); each import of another of the project's packages,
lazy ones inside functions included, must be one that :data:`ALLOWED` lists, and the graph of the imports
that exist must have no cycle, neither between packages nor between modules (a function-local import included:
it hides a circle from Python, not from a reader).  A new top-level package (a folder with ``__init__.py``) fails until it is
given its row.
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
    "harness": ("oracles", "kernels", "specs", "report"),  # the pytest plugins, strategies, judge and drivers
    "bench": ANY,
    "examples": ANY,
}
NOT_IMPORTABLE = ("tests",)  # no package imports the suite's tests


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
         "report/__init__.py": "", "harness/__init__.py": "", "harness/judge.py": "from report import records\n"}


@pytest.mark.parametrize("files, package", [
    ({"report/plugin.py": "from harness import session\n"}, "report"),  # the cycle this table broke
    ({"report/records.py": "def f():\n    from harness.judge import Measurement\n"}, "report"),  # a lazy import
    ({"oracles/profiles.py": "from ..kernels import registry\n"}, "oracles"),  # a relative one
    ({"harness/replay.py": "import tests.fakes\n"}, "harness"),
    ({"bench/run.py": "from tests import conftest\n"}, "bench"),
])
def test_an_import_against_the_layers_is_caught(tmp_path, files, package):
    root = write(tmp_path, {**BELOW, **files})
    assert violations(root, package)


def test_the_layers_cycle_is_caught(tmp_path):
    root = write(tmp_path, {**BELOW, "report/invariances.py": "from harness.invariance import INVARIANCE\n"})
    assert cycle(root) == ["harness", "report", "harness"]
    assert cycle(write(tmp_path / "fixed", BELOW)) is None


def test_a_new_package_without_a_row_is_caught(tmp_path):
    assert set(packages(write(tmp_path, {**BELOW, "records/__init__.py": ""}))) - set(ALLOWED) == {"records"}


def test_a_cycle_of_modules_through_a_function_local_import_is_caught(tmp_path):
    root = write(tmp_path, {**BELOW, "harness/calls.py": "def f():\n    from .replay import command\n",
                            "harness/replay.py": "from . import calls\n"})
    assert module_cycle(root) == ["harness.calls", "harness.replay", "harness.calls"]
    assert module_cycle(write(tmp_path / "fixed", {**BELOW, "harness/replay.py": "from . import calls\n",
                                                   "harness/calls.py": ""})) is None
