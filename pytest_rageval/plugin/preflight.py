"""What the run controller says and checks before any case: what serves the cases, the report header, the judge
check (``--rageval-judge-check``), the dry run's plan (``--rageval-dry-run``) and the gold supports that no chunk
could ever match. Each gives lines; the controller writes them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_rageval.engine.evaluate import Engine
from pytest_rageval.engine.run_setup import RunSetup
from pytest_rageval.evaluation.evalset import LoadedCase, iter_eval_file
from pytest_rageval.evaluation.reach import unreachable_gold
from pytest_rageval.evaluation.schema import EvalCase
from pytest_rageval.judges.base import JudgeAuthError
from pytest_rageval.judges.cache import JudgeCacheError
from pytest_rageval.redact import public_url
from pytest_rageval.sanitize import terminal_safe

from .collect import CaseItem

#: Unreachable gold supports named at the start of a run (rageval inspect lists every one).
MAX_UNREACHABLE_SHOWN = 20


def what_serves(config: pytest.Config, setup: RunSetup) -> dict[str, str | None]:
    """What serves the eval-set cases: ``{"kind": "fixture" | "http" | "callable" | None, "name": ...}``.

    A ``rageval_client`` fixture in a conftest.py (loaded at start-up) replaces the configured target, which
    is then not what ran; else the configured target's client.
    """
    s = setup.settings
    for plugin in config.pluginmanager.get_plugins():
        file = getattr(plugin, "__file__", None)
        if file and os.path.basename(file) == "conftest.py" and hasattr(plugin, "rageval_client"):
            try:
                where = Path(file).resolve().relative_to(s.rootdir.resolve()).as_posix()
            except ValueError:
                where = str(file)
            return {"kind": "fixture", "name": f"the rageval_client fixture of {where}"}
    client = setup.made_target_client
    kind = client.describe().get("kind") if client is not None else None
    return {"kind": str(kind) if kind else None, "name": public_url(s.target) if s.target else None}


def header_lines(setup: RunSetup, served: dict[str, str | None]) -> list[str]:
    """The session header: target, k, judge, output folder, repeats; the config matrix."""
    s = setup.settings
    target = served["name"] or "(the rageval_client fixture)"
    if served["kind"] == "fixture" and s.target:
        target += f" (rageval_target {public_url(s.target)} is not used)"
    info = setup.judge_info()
    judge = (
        info["name"]
        if info["name"] == "none"
        else f"{info['name']} ({info['model']}{', heuristic' if info['heuristic'] else ''})"
    )
    repeat = (
        ""
        if s.repeat is None
        # --rageval-repeat: which cases it repeats (stability.judge_dependent)
        else (
            f", {s.repeat} runs of each {'judge-dependent case' if setup.judge_setup is not None else 'case (no judge)'}"
        )
    )
    lines = [f"rageval: target {target}, k={s.k_shown}, judge {judge}, output {s.output_dir}{repeat}"]
    if s.matrix is not None:  # the config matrix: how many configs, and how k is asked
        how = (
            "asked once at the largest k, sliced"
            if s.matrix.slice_k
            else "each k asked: the answer depends on k"
            if s.judge_enabled
            else "each k asked (slice_k off)"
        )
        lines.append(f"rageval matrix: {len(s.matrix.configs())} configs over {', '.join(s.matrix.names)} ({how})")
    return lines


def check_judge(setup: RunSetup) -> list[str]:
    """``--rageval-judge-check``: the judge must tell a faithful answer from a hallucinated one; its lines when
    it does, else the session ends here (``pytest.exit``)."""
    from pytest_rageval.judges.judge_check import check_judge

    judge_setup = setup.judge_setup
    if judge_setup is None:
        raise pytest.UsageError("pytest-rageval: --rageval-judge-check needs a judge (not --rageval-judge none)")
    engine = Engine(1)
    try:
        result = engine.run(check_judge(judge_setup.judge))
    except (JudgeAuthError, JudgeCacheError) as exc:
        pytest.exit(
            terminal_safe(f"pytest-rageval: {getattr(exc, 'message', exc)}"), returncode=pytest.ExitCode.USAGE_ERROR
        )
    finally:
        engine.close(judge_setup.judge.aclose)  # the judge opens a new client on the runner's loop
    if not result.passed:
        pytest.exit("pytest-rageval: " + "\n".join(result.lines), returncode=pytest.ExitCode.TESTS_FAILED)
    return list(result.lines)


def dry_run_lines(setup: RunSetup, items: list[pytest.Item]) -> list[str]:
    """The planned requests, tokens and cost of ``items``; a config matrix's requests after the retrieval cache."""
    from pytest_rageval.engine.judge_factory import DEFAULT_PRICES
    from pytest_rageval.judges.estimate import plan

    s = setup.settings
    lexical = s.judge == "lexical"
    result = plan(
        [_as_run(setup, item.case) for item in items if isinstance(item, CaseItem)],
        k=s.k,
        metrics=s.judge_metrics,
        judge_enabled=s.judge_enabled,
        model=None if lexical else s.judge_model,
        prices={**DEFAULT_PRICES, **s.judge_prices},
        lexical=lexical,
    )
    lines = list(result.lines)
    if s.matrix is not None:  # the retrieval cache: one request serves the configs that differ in k only
        matrix = s.matrix
        groups = {
            (item.nodeid.partition("[")[0], matrix.request_group(item.matrix_config)): item.case.runs
            * len(item.case.turns or (None,))  # a conversation asks each of its turns
            for item in items
            if isinstance(item, CaseItem) and item.matrix_config is not None and item.case.skip is None
        }
        lines.append(
            f"config matrix: {len(matrix.configs())} configs; the retrieval cache sends {sum(groups.values())} "
            "RAG requests (the count above is one per item)"
        )
    return lines


def _as_run(setup: RunSetup, case: EvalCase) -> EvalCase:
    """``case`` with the runs ``--rageval-repeat`` gives it (what the runner will do; stability.with_repeat)."""
    from pytest_rageval.evaluation.stability import with_repeat
    from pytest_rageval.evaluation.thresholds import judge_metrics

    return with_repeat(
        case,
        setup.settings.repeat,
        setup.thresholds_for(case),
        judge_metrics(),
        judge_in_use=setup.judge_setup is not None,
    )


def unreachable_gold_lines(config: pytest.Config, setup: RunSetup, served: dict[str, str | None]) -> list[str]:
    """Each gold support that no chunk could ever match (reach.py), at most ``MAX_UNREACHABLE_SHOWN`` named:
    with ``docs_root`` set, or a framework object as the target (whose documents lie under it)."""
    s = setup.settings
    if s.docs_root is None and served["kind"] != "framework":
        return []
    found = unreachable_gold(_eval_cases(config.args, s.rootdir), s.docs_root_or_rootdir)
    lines = [terminal_safe(f"rageval warning: {problem.describe()}") for problem in found[:MAX_UNREACHABLE_SHOWN]]
    if len(found) > MAX_UNREACHABLE_SHOWN:
        lines.append(
            f"rageval warning: ... and {len(found) - MAX_UNREACHABLE_SHOWN} more gold supports "
            "that can never match (rageval inspect TARGET QUESTION --eval-set FILE lists them all)"
        )
    return lines


def _eval_cases(args: list[str], rootdir: Path) -> Iterator[tuple[str, int, EvalCase]]:
    """``(file, line, case)`` of the valid lines of the eval sets the run was given (files and folders)."""
    files: list[Path] = []
    for arg in args:
        path = Path(arg.partition("::")[0])
        path = path if path.is_absolute() else Path.cwd() / path
        if path.is_dir():
            files.extend(sorted(path.rglob("*.jsonl")))
        elif path.suffix == ".jsonl" and path.is_file():
            files.append(path)
    for file in dict.fromkeys(files):
        try:
            display = file.resolve().relative_to(rootdir.resolve()).as_posix()
        except ValueError:
            display = str(file)
        for loaded in iter_eval_file(file, display=display):  # one parsed case at a time
            if isinstance(loaded, LoadedCase):
                yield display, loaded.line, loaded.case
