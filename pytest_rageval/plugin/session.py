"""Start and end a ``--rageval`` session: settings resolved once, then each process's part registered.

A process has one of three parts (pytest-xdist's own split, as pytest's junitxml registers its
writer only where ``config`` has no ``workerinput``):

- a serial session runs the cases and keeps the results: collection, case runner, run controller;
- an xdist worker runs cases: collection, case runner, and ``WorkerLink`` to the controller;
- the xdist controller keeps the results: run controller and ``XdistControllerLink``.

Which part is decided here, once; the plugin objects themselves never ask.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest

from pytest_rageval.config.pyproject import find_pyproject
from pytest_rageval.config.rootdir_check import root_moved_by
from pytest_rageval.config.settings import Settings, SettingsError, build_settings, read_pyproject_table
from pytest_rageval.engine.flow_share import FlowAddress
from pytest_rageval.engine.run_setup import RunSetup
from pytest_rageval.judges.cache import JudgeCacheError
from pytest_rageval.judges.calibration_measure import CalibrationError
from pytest_rageval.judges.calibration_store import CalibrationRefused
from pytest_rageval.judges.external_judges import JudgePluginError
from pytest_rageval.runs.folder import RunFolder, read_records
from pytest_rageval.targets.protocol import RagConfigError

from . import compat
from .case_runner import CaseRunner, WorkerLink
from .collect import EvalCollection, collection_key, runner_key
from .controller import RunController, controller_key
from .schedule import Lookahead, WorkerLookahead
from .xdist_link import XdistControllerLink


def start_session(config: pytest.Config, ini_keys: Sequence[str]) -> None:
    """Resolve the settings and register this process's plugin objects (a mistake is one usage error)."""
    invocation = Path(str(config.invocation_params.dir))
    named = (
        [invocation / a.partition("::")[0] for a in config.args]
        if config.args_source == pytest.Config.ArgsSource.ARGS
        else []
    )
    moved = root_moved_by(
        list(config.invocation_params.args), [p for p in named if p.exists()] or [invocation], config.rootpath
    )
    if moved is not None:
        raise pytest.UsageError(f"pytest-rageval: {moved}")
    worker = compat.is_xdist_worker(config)
    # a worker never spot-checks: the controller re-judges after the run
    try:
        setup = RunSetup.build(
            _settings(config, ini_keys), shared_limits=_flow_address(config) if worker else None, spot_judge=not worker
        )
    except JudgePluginError as exc:  # a judge of the pytest_rageval_judges hook could not be made
        raise pytest.UsageError(f"pytest-rageval: {exc}") from None
    collection = EvalCollection(config, setup)
    controller = None if worker else _controller(config, setup, collection)
    runner = (
        None if controller is not None and _distributes(config) else _runner(config, setup, collection, worker=worker)
    )
    plugins: list[tuple[str, Any]] = [("rageval-collection", collection)]
    if controller is not None:
        config.stash[controller_key] = controller
        controller.finish_runner = runner.finish if runner is not None else None
        plugins.append(("rageval-controller", controller))
        if runner is None:
            plugins.append(("rageval-xdist-controller", XdistControllerLink(controller)))
    if runner is not None:
        config.stash[runner_key] = runner
        plugins.append(("rageval-runner", runner))
        if worker:
            plugins.append(("rageval-worker", WorkerLink(config, runner, collection)))
    config.stash[collection_key] = collection
    for name, plugin in plugins:
        config.pluginmanager.register(plugin, name)
    if config.pluginmanager.hasplugin("html"):  # pytest-html loaded: per-case extras, summary table
        from pytest_rageval.report.pytest_html import register

        register(config, runs_cases=runner is not None, run=controller)


def _controller(config: pytest.Config, setup: RunSetup, collection: EvalCollection) -> RunController:
    """Where results are kept: check the target, the run folder and the judge cache now, before xdist starts
    its workers, so that a mistake stops the run once, before any case."""
    settings = setup.settings
    try:
        setup.check_target()
        setup.check_calibration()
        setup.check_canary()
    except (RagConfigError, CalibrationRefused, CalibrationError) as exc:
        raise pytest.UsageError(f"pytest-rageval: {exc}") from None
    collection.choose_default_args()
    controller = RunController(config, setup, collection)
    running = not (settings.dry_run or config.option.collectonly)
    if running:
        controller.prepare_run_folder()
    _prepare_cache(setup, controller, check=running)
    collection.resumed = _keys(controller.resumed)
    return controller


def _runner(config: pytest.Config, setup: RunSetup, collection: EvalCollection, *, worker: bool) -> CaseRunner:
    """Where cases run: a serial session, or an xdist worker (which the controller has set up for already)."""
    stop_file = retrieval_dir = None
    if worker:
        collection.choose_default_args()
        if setup.settings.resume is not None:  # the controller mended results.jsonl before starting the workers
            collection.resumed = _keys(read_records(setup.settings.resume))
        stop_file = config.workerinput.get("rageval_stop_file")  # type: ignore[attr-defined]
        retrieval_dir = config.workerinput.get("rageval_retrieval_dir")  # type: ignore[attr-defined]
        if stop_file:
            share_judge_stop(setup, Path(stop_file).parent)
    return CaseRunner(
        config,
        setup,
        stop_file=Path(stop_file) if stop_file else None,
        lookahead=WorkerLookahead if worker else Lookahead,
        live_progress=not worker,
        retrieval_dir=Path(retrieval_dir) if retrieval_dir else None,
    )


def share_judge_stop(setup: RunSetup, run_folder: Path) -> None:
    """An xdist worker's judges learn from a file in the run's folder when another worker's judge found that the
    endpoint stopped answering (each endpoint a file of its own)."""
    from pytest_rageval.judges.openai_judge import OpenAIJudge, StoppedFlag

    for judge_setup in (setup.judge_setup, setup.spot_setup):
        inner = getattr(judge_setup.judge, "inner", None) if judge_setup is not None else None
        if isinstance(inner, OpenAIJudge):
            digest = hashlib.sha256(inner.base_url.encode("utf-8", "surrogatepass")).hexdigest()[:16]
            inner.stopped_flag = StoppedFlag(run_folder / f"judge-stopped-{digest}")


def _keys(records: Iterable[dict[str, Any]]) -> dict[str, str | None]:
    """The keys of a resumed run's records (the cases it has finished), each with the definition hash it was run
    under (None in a record written before definitions were kept)."""
    return {
        str(r["key"]): r.get("definition") if isinstance(r.get("definition"), str) else None
        for r in records
        if r.get("key")
    }


def end_session(config: pytest.Config) -> None:
    """Unregister what ``start_session`` registered (the stash goes with ``config``)."""
    for name in (
        "rageval-collection",
        "rageval-controller",
        "rageval-xdist-controller",
        "rageval-runner",
        "rageval-worker",
    ):
        plugin = config.pluginmanager.get_plugin(name)
        if plugin is not None:
            config.pluginmanager.unregister(plugin)


def _flow_address(config: pytest.Config) -> FlowAddress | None:
    """Where this xdist worker reaches the endpoint limits the workers share, and the session's key (None: none)."""
    given: dict[str, Any] = config.workerinput  # type: ignore[attr-defined]
    path, key = given.get("rageval_flow"), given.get("rageval_flow_key")
    return FlowAddress(Path(path), key) if path and key else None


def _distributes(config: pytest.Config) -> bool:
    """Whether pytest-xdist will run the cases on workers (its ``pytest_configure`` registers ``DSession`` then)."""
    return (getattr(config.option, "dist", "no") or "no") != "no" and not config.option.collectonly


def _settings(config: pytest.Config, ini_keys: Sequence[str]) -> Settings:
    rootdir = Path(str(config.rootpath))
    try:
        pyproject = read_pyproject_table(find_pyproject(rootdir, config.inipath))
        settings = build_settings(
            rootdir=rootdir,
            invocation_dir=Path(str(config.invocation_params.dir)),
            option=config.option,
            ini={name: config.getini(name) for name in ini_keys},
            pyproject=pyproject,
            environ=os.environ,
        )
    except SettingsError as exc:
        raise pytest.UsageError(f"pytest-rageval: {exc}") from None
    if settings.resume is not None and not RunFolder(settings.resume).results_path.is_file():
        raise pytest.UsageError(
            f"pytest-rageval: --rageval-resume {settings.resume}: not a run folder (no results.jsonl)"
        )
    return settings


def _prepare_cache(setup: RunSetup, controller: RunController, *, check: bool) -> None:
    """Clear the judge cache when asked; then a corrupt or unreadable one is one usage error before any case.

    Runs where results are kept only: xdist starts its workers after this.
    """
    from pytest_rageval.judges.cache import JudgeCache, check_judge_cache

    settings = setup.settings
    try:
        if settings.clear_cache:
            controller.gate_notes.append(
                f"judge cache cleared: {JudgeCache(settings.cache_dir).clear()} entries ({settings.cache_dir})"
            )
        for judge_setup in (setup.judge_setup, setup.spot_setup) if check else ():
            check_judge_cache(judge_setup.judge if judge_setup is not None else None)
    except JudgeCacheError as exc:
        raise pytest.UsageError(f"pytest-rageval: {exc}") from None
