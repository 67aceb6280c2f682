"""The package's house plan (docs/internals.md): subpackages in layers, imports only downward, no circle.

Read from the source, so a lazy import inside a function counts, and so does an import under
``if TYPE_CHECKING:`` (annotations only, never run): a type that needs a module which needs it back is a circle
all the same, and a type from a higher layer ties the lower one to it (only the package's ``__init__`` may name
the pytest surface's types, for its re-exports).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "pytest_rageval"

#: lowest first; a module may import from its own layer or a lower one (docs/internals.md). ``name.*`` is a
#: subpackage and every module in it; a top-level module is named one by one, so a new one must be placed.
LAYERS: tuple[tuple[str, ...], ...] = (
    # 0 foundations: no pytest, used by everything
    (
        "pytest_rageval",
        "defaults",
        "safejson",
        "sanitize",
        "redact",
        "suggest",
        "atomic",
        "retry",
        "bounded_http",
        "errors",
        "flow",
    ),
    # 1 the eval-set model and loader, metrics and thresholds; pure
    ("evaluation.*",),
    # 2 the system under test; the judges
    ("targets.*", "judges.*"),
    # 3 aggregation and comparison; run storage; the settings
    ("gate.*", "runs.*", "config.*"),
    # 4 reports
    ("report.*",),
    # 5 the engine: a run's work without pytest, which the pytest surface and the command line share
    ("engine.*",),
    # 6 the pytest surface
    ("plugin.*",),
    # 7 the command line
    ("cli.*",),
    # the bundled demo RAG imports nothing of the plugin
    ("demo.*",),
)

#: where pytest may be imported: the pytest surface and the pytest-html glue; every other module is usable without it
PYTEST_USERS = ("plugin.*", "report.pytest_html")


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _short(module: str) -> str:
    return module if module == "pytest_rageval" else module.removeprefix("pytest_rageval.")


def _matches(module: str, name: str) -> bool:
    short = _short(module)
    return short == name or (name.endswith(".*") and (short == name[:-2] or short.startswith(name[:-1])))


def _layer(module: str) -> int:
    for index, names in enumerate(LAYERS):
        if any(_matches(module, name) for name in names):
            return index
    raise AssertionError(f"{module} is in no layer of tests/test_layers.py (and docs/internals.md): place it")


def _type_checking_lines(tree: ast.Module) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports(*, type_checking: bool = False) -> dict[str, set[str]]:
    """Each package module and the package modules it imports: at run time, or also for types (``type_checking``)."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = set() if type_checking else _type_checking_lines(tree)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found: set[str] = set()
        for node in ast.walk(tree):
            if getattr(node, "lineno", None) in skip:
                continue
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name.split(".")[0] == "pytest_rageval")
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - node.level + 1]
                    source = ".".join(base + ([node.module] if node.module else []))
                elif node.module and node.module.split(".")[0] == "pytest_rageval":
                    source = node.module
                else:
                    continue
                for alias in node.names:  # `from . import safejson` imports a module
                    sub = f"{source}.{alias.name}"
                    found.add(sub if sub in modules else source)
        graph[name] = {m for m in found if m in modules and m != name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every import circle a depth-first walk meets, each as the path that closes it."""
    found: list[list[str]] = []
    state: dict[str, int] = {}  # 1 on the path, 2 done
    path: list[str] = []

    def visit(module: str) -> None:
        state[module] = 1
        path.append(module)
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                found.append([*path[path.index(target) :], target])
            elif target not in state:
                visit(target)
        path.pop()
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module)
    return found


def test_every_module_has_a_layer() -> None:
    for module in imports():
        _layer(module)


def _upward(graph: dict[str, set[str]]) -> list[str]:
    return [
        f"{module} (layer {_layer(module)}) imports {target} (layer {_layer(target)})"
        for module, targets in sorted(graph.items())
        for target in sorted(targets)
        if _layer(target) > _layer(module) and not module.startswith("pytest_rageval.demo")
    ]


def test_no_upward_import() -> None:
    assert _upward(imports()) == []


def test_no_upward_import_for_types_either() -> None:
    """A type from a higher layer is a protocol of what the module reads; the package's ``__init__`` alone names
    the pytest surface's types (for its re-exports)."""
    graph = imports(type_checking=True)
    graph.pop("pytest_rageval")
    assert _upward(graph) == []


def test_the_demo_imports_nothing_of_the_plugin() -> None:
    outside = [
        f"{m} imports {t}"
        for m, ts in sorted(imports().items())
        if m.startswith("pytest_rageval.demo")
        for t in sorted(ts)
        if not t.startswith("pytest_rageval.demo")
    ]
    assert outside == []


def test_no_import_circle() -> None:
    assert circles(imports()) == []


def test_no_import_circle_counting_types() -> None:
    """Imports under ``if TYPE_CHECKING:`` close no circle either (a type the importer needs lives below it)."""
    assert circles(imports(type_checking=True)) == []


def test_pytest_only_in_the_pytest_surface() -> None:
    """The foundations, evaluation, targets, judges, gate, runs and reports (but the pytest-html glue) run without pytest."""
    importing = []
    for module, path in sorted(_modules().items()):
        if any(_matches(module, name) for name in PYTEST_USERS):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and not node.level
                else []
            )
            if any(n.split(".")[0] in ("pytest", "_pytest") for n in names):
                assert isinstance(node, (ast.Import, ast.ImportFrom))  # only imports name modules
                importing.append(f"{module}:{node.lineno}")
    assert importing == []


def test_the_engine_runs_without_the_pytest_surface() -> None:
    """Neither engine/ nor cli/ imports anything of plugin/: importing any ``plugin.x`` runs plugin/__init__.py,
    which loads pytest."""
    graph = imports()
    reaching = [
        f"{_short(module)} imports {_short(target)}"
        for module, targets in sorted(graph.items())
        if _short(module).startswith(("engine", "cli"))
        for target in sorted(targets)
        if _short(target).startswith("plugin")
    ]
    assert reaching == []


def _pytest_modules_loaded(*args: str, cwd: Path, status: int = 0) -> list[str]:
    """The ``_pytest`` modules that ``python -X importtime -m pytest_rageval.cli ARGS`` imports (its stderr)."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "pytest_rageval.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
    )
    assert proc.returncode == status, proc.stdout + proc.stderr[-2000:]
    names = [line.rpartition("|")[2].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")]
    return [name for name in names if name in ("pytest", "_pytest") or name.startswith(("_pytest.", "pytest."))]


def test_rageval_help_loads_no_pytest(tmp_path: Path) -> None:
    assert _pytest_modules_loaded("--help", cwd=tmp_path) == []


def test_rageval_commands_load_no_pytest(tmp_path: Path) -> None:
    """Real commands: ``rageval history`` over two stored runs, and ``rageval rescore``, which loads the engine's
    case evaluation before it refuses a folder without results.jsonl."""
    metrics = {"eval_set_hash": "h", "aggregates": {"hit_rate_at_k": 0.5}, "counts": {"total": 1}}
    for run_id in ("20260101-000000-aaaaaa", "20260102-000000-bbbbbb"):
        (tmp_path / "out" / run_id).mkdir(parents=True)
        (tmp_path / "out" / run_id / "metrics.json").write_text(
            json.dumps({**metrics, "run_id": run_id}), encoding="utf-8"
        )
    assert _pytest_modules_loaded("history", "out", cwd=tmp_path) == []
    assert _pytest_modules_loaded("rescore", "out/20260101-000000-aaaaaa", "--k", "1", cwd=tmp_path, status=2) == []


def test_the_importtime_check_sees_pytest(tmp_path: Path) -> None:
    """The check above can fail: ``-X importtime`` of a command that loads pytest names its ``_pytest`` modules."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import pytest"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert any(line.rpartition("|")[2].strip().startswith("_pytest.") for line in proc.stderr.splitlines())


def test_no_worker_branch_outside_the_one_place_that_decides() -> None:
    """Whether a process is an xdist worker is decided once, in plugin/session.py; no plugin object asks.

    ``compat.is_xdist_worker`` holds xdist's own test (``hasattr(config, "workerinput")``).
    """
    asking = sorted(
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if path.relative_to(PACKAGE).as_posix() not in ("plugin/session.py", "plugin/compat.py")
        and any(word in path.read_text(encoding="utf-8") for word in ("is_worker", "is_xdist_worker", '"workerinput")'))
    )
    assert asking == []


def test_the_checker_sees_what_breaks_the_plan(tmp_path: Path) -> None:
    """The rules above can fail: a lazy upward import, a circle, a circle through a type-only import and a
    module in no layer are each found."""
    global PACKAGE
    saved = PACKAGE
    fake = tmp_path / "pytest_rageval"
    for folder in ("evaluation", "plugin", "judges"):
        (fake / folder).mkdir(parents=True)
        (fake / folder / "__init__.py").write_text("")
    (fake / "__init__.py").write_text("")
    (fake / "evaluation" / "metrics.py").write_text("def f():\n    from ..plugin.runner import x\n")
    (fake / "plugin" / "runner.py").write_text(
        "from ..evaluation import metrics\nfrom pytest_rageval.judges import spot\n"
    )
    (fake / "judges" / "spot.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pytest_rageval.plugin.runner import Setup\n"
    )
    PACKAGE = fake
    try:
        graph = imports()
        assert graph["pytest_rageval.evaluation.metrics"] == {"pytest_rageval.plugin.runner"}
        assert _layer("pytest_rageval.evaluation.metrics") < _layer("pytest_rageval.plugin.runner")
        assert circles(graph) == [
            ["pytest_rageval.evaluation.metrics", "pytest_rageval.plugin.runner", "pytest_rageval.evaluation.metrics"]
        ]
        typed = [set(c) for c in circles(imports(type_checking=True))]
        assert {"pytest_rageval.judges.spot", "pytest_rageval.plugin.runner"} in typed  # only through the type
        test_every_module_has_a_layer()  # every module so far is placed
        (fake / "newthing.py").write_text("")
        (fake / "newpkg").mkdir()
        (fake / "newpkg" / "__init__.py").write_text("")
        for module in ("pytest_rageval.newthing", "pytest_rageval.newpkg"):
            try:
                _layer(module)
            except AssertionError as exc:
                assert module in str(exc)
            else:
                raise AssertionError(f"{module} is in no layer, and the checker did not say so")
    finally:
        PACKAGE = saved


def test_public_names_are_the_lazy_exports() -> None:
    """``__all__`` (what a type checker and ``import *`` see) names exactly what ``__getattr__`` serves."""
    import pytest_rageval

    assert set(pytest_rageval.__all__) - {"__version__"} == set(pytest_rageval._EXPORTS)
    for name in pytest_rageval._EXPORTS:
        assert getattr(pytest_rageval, name) is not None
