"""The package's house plan (docs/internals.md): modules in layers, imports only downward, no circle.

Read from the source, so a lazy import inside a function counts; imports under ``if TYPE_CHECKING:``
(annotations only, never run) do not.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "pytest_rageval"

#: lowest first; a module may import from its own layer or a lower one (docs/internals.md)
LAYERS: tuple[tuple[str, ...], ...] = (
    # 0 foundations: no pytest, no I/O beyond their one job
    ("pytest_rageval", "defaults", "safejson", "sanitize", "redact", "suggest", "retry", "daemon_calls", "compat", "registry",
     "record", "schema", "anchors", "selection", "resume", "schedule", "commit", "atomic", "docpaths",
     "cmdline", "signals"),
    # 1 pure logic
    ("metrics", "thresholds", "aggregate", "gate", "evalset", "config", "label_edit", "stability", "matrix", "configs", "reach",
     "evalpaths", "readback"),
    # 2 judges and the RAG client
    ("judges.*", "bounded_http", "client", "target_gate", "frameworks.*"),
    # 3 one case, one run folder, the session's set-up
    ("runner", "spotcheck", "artifacts", "runfolder", "rejudge", "rescore", "merge", "settings", "judges.factory", "run_setup",
     "label", "retrieval_cache", "targets", "inspect_target", "calibrations"),
    # 4 reports
    ("report.*",),
    # 5 the pytest surface
    ("keys", "collect", "handwritten", "progress", "case_runner", "controller", "session", "plugin"),
    # 6 the command line
    ("cli",),
    # the bundled demo RAG imports nothing of the plugin
    ("demo.*",),
)


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _layer(module: str) -> int:
    short = module.removeprefix("pytest_rageval.") if module != "pytest_rageval" else module
    found = None
    for index, names in enumerate(LAYERS):
        for name in names:
            exact = short == name
            if exact or (name.endswith(".*") and (short == name[:-2] or short.startswith(name[:-1]))):
                if exact:
                    return index
                found = index if found is None else found
    assert found is not None, f"{module} is in no layer of tests/test_layers.py (and docs/internals.md): place it"
    return found


def _type_checking_lines(tree: ast.Module) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


def imports() -> dict[str, set[str]]:
    """Each package module and the package modules it imports (at run time)."""
    modules = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = _type_checking_lines(tree)
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


def test_every_module_has_a_layer() -> None:
    for module in imports():
        _layer(module)


def test_no_upward_import() -> None:
    upward = [
        f"{module} (layer {_layer(module)}) imports {target} (layer {_layer(target)})"
        for module, targets in sorted(imports().items())
        for target in sorted(targets)
        if _layer(target) > _layer(module) and not module.startswith("pytest_rageval.demo")
    ]
    assert upward == []


def test_the_demo_imports_nothing_of_the_plugin() -> None:
    outside = [f"{m} imports {t}" for m, ts in sorted(imports().items()) if m.startswith("pytest_rageval.demo")
               for t in sorted(ts) if not t.startswith("pytest_rageval.demo")]
    assert outside == []


def test_no_import_circle() -> None:
    graph = imports()
    circles: list[list[str]] = []
    state: dict[str, int] = {}  # 1 on the path, 2 done
    path: list[str] = []

    def visit(module: str) -> None:
        state[module] = 1
        path.append(module)
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                circles.append(path[path.index(target):] + [target])
            elif target not in state:
                visit(target)
        path.pop()
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module)
    assert circles == []


def test_no_worker_branch_outside_the_one_place_that_decides() -> None:
    """Whether a process is an xdist worker is decided once, in session.py; no plugin object asks.

    ``compat.is_xdist_worker`` holds xdist's own test (``hasattr(config, "workerinput")``).
    """
    asking = sorted(
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if path.name not in ("session.py", "compat.py")
        and any(word in path.read_text(encoding="utf-8") for word in ("is_worker", "is_xdist_worker", '"workerinput")'))
    )
    assert asking == []


def test_the_checker_sees_a_circle_and_an_upward_import(tmp_path: Path) -> None:
    """The rules above can fail: a lazy upward import and a circle are both found."""
    global PACKAGE
    saved = PACKAGE
    fake = tmp_path / "pytest_rageval"
    fake.mkdir()
    (fake / "__init__.py").write_text("")
    (fake / "metrics.py").write_text("def f():\n    from .plugin import x\n")
    (fake / "plugin.py").write_text("from . import metrics\n")
    PACKAGE = fake
    try:
        graph = imports()
        assert graph["pytest_rageval.metrics"] == {"pytest_rageval.plugin"}
        assert _layer("pytest_rageval.metrics") < _layer("pytest_rageval.plugin")
        try:
            test_no_import_circle()
        except AssertionError as exc:
            assert "pytest_rageval.metrics" in str(exc)
        else:
            raise AssertionError("the circle metrics -> plugin -> metrics was not found")
    finally:
        PACKAGE = saved


def test_public_names_are_the_lazy_exports() -> None:
    """``__all__`` (what a type checker and ``import *`` see) names exactly what ``__getattr__`` serves."""
    import pytest_rageval

    assert set(pytest_rageval.__all__) - {"__version__"} == set(pytest_rageval._EXPORTS)
    for name in pytest_rageval._EXPORTS:
        assert getattr(pytest_rageval, name) is not None
