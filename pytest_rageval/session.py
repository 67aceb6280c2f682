"""The plugin object registered with ``--rageval``: collection, case runs, artifacts, gate.

Workers (pytest-xdist) and a serial session run cases; per-case data travels
on the test report (``report.rageval_case``); only the controller (the serial
session, or xdist's master) writes files and gates (docs/internals.md).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import glob
import sys
from pathlib import Path
from typing import Any, Callable, Generator, Optional, Sequence

import pytest

from . import __version__
from .aggregate import Aggregator
from .artifacts import (RunFolderError, RunLock, RunWriter, case_config, check_writable, compose_metrics, config_hash, file_digests,
                        git_commit, new_run_id, portable_record, read_json_object, read_records, repair_results, why_not_latest,
                        with_seed_keys, writable_record, write_json_atomic)
from .client import RagClient, RagConfigError, check_maps, load_target, parse_headers, parse_request_map, parse_response_map
from .collect import BadLineItem, CaseItem, EvalSetFile, broken_link_problem, broken_set_items
from .gate import Comparison, gate_runs, load_baseline
from .handwritten import SessionClient
from .judges.base import JudgeAuthError
from .judges.cache import JudgeCacheError
from .judges.factory import SessionJudge, build_judge, judge_info
from . import compat, spotcheck
from .redact import public_args, public_url
from .runner import Engine, JudgeSetup, RunOptions, as_rag_client, base_record, evaluate_case
from .report.terminal import escape_longrepr
from .sanitize import error_message, terminal_safe
from .spotcheck import SpotSample
from .schedule import NOTHING, Lookahead, cached_fixture, in_shard, is_own_fixture, runs_conftest_setup, skipped_by_marks
from .plugin import INI_KEYS
from .resume import differences, selection_of
from .selection import Selection
from .settings import Settings, SettingsError, build_settings, pyproject_path, read_pyproject_table
from .thresholds import resolve_thresholds


def create_plugin(config: pytest.Config) -> "RagevalPlugin":
    """Resolve settings (a bad value is a usage error, not a traceback) and build the plugin."""
    rootdir = Path(str(config.rootpath))
    try:
        pyproject = read_pyproject_table(pyproject_path(config.inipath, rootdir))
        ini = {name: config.getini(name) for name, *_ in INI_KEYS}
        settings = build_settings(
            rootdir=rootdir,
            invocation_dir=Path(str(config.invocation_params.dir)),
            option=config.option,
            ini=ini,
            pyproject=pyproject,
            environ=os.environ,
        )
    except SettingsError as exc:
        raise pytest.UsageError(f"pytest-rageval: {exc}") from None
    if settings.resume is not None and not (settings.resume / "results.jsonl").is_file():
        raise pytest.UsageError(f"pytest-rageval: --rageval-resume {settings.resume}: not a run folder (no results.jsonl)")
    plugin = RagevalPlugin(config, settings)
    if not plugin.is_worker:  # xdist starts its workers after this: a mistake stops the run once, before any case
        _check_target(plugin)
    plugin.choose_default_args()
    if not plugin.is_worker and not (settings.dry_run or config.option.collectonly):
        plugin.prepare_run_folder()
    if config.pluginmanager.hasplugin("html"):  # pytest-html loaded: per-case extras, summary table
        from .report.pytest_html import register

        register(config, plugin)
    if not plugin.is_worker:
        _prepare_cache(plugin, check=not (settings.dry_run or config.option.collectonly))
    return plugin


def _prepare_cache(plugin: "RagevalPlugin", *, check: bool) -> None:
    """Clear the judge cache when asked; then a corrupt or unreadable one is one usage error before any case.

    Runs on the controller only: xdist starts its workers after this.
    """
    from .judges.cache import JudgeCache, check_judge_cache

    settings = plugin.settings
    try:
        if settings.clear_cache:
            plugin.gate_notes.append(f"judge cache cleared: {JudgeCache(settings.cache_dir).clear()} entries ({settings.cache_dir})")
        for setup in (plugin.judge_setup, plugin.spot_setup) if check else ():
            check_judge_cache(setup.judge if setup is not None else None)
    except JudgeCacheError as exc:
        raise pytest.UsageError(f"pytest-rageval: {exc}") from None


def _check_target(plugin: "RagevalPlugin") -> None:
    """Import the target and parse its URL, headers and maps now; a mistake is one usage error.

    Without a target (a conftest ``rageval_client`` fixture serves the cases)
    the header and map lines are still checked, for syntax only.
    """
    s = plugin.settings
    try:
        if s.target:
            plugin.target_client()
        else:
            check_maps(s.headers_text, s.request_map_text, s.response_map_text)
    except RagConfigError as exc:
        raise pytest.UsageError(f"pytest-rageval: {exc}") from None


class RagevalPlugin:
    """State of one ``--rageval`` session (held in ``config.stash``)."""

    def __init__(self, config: pytest.Config, settings: Settings) -> None:
        self.config = config
        self.settings = settings
        self.is_worker = compat.is_xdist_worker(config)
        self.judge_setup: Optional[JudgeSetup] = build_judge(settings, os.environ)
        self.spot_setup: Optional[JudgeSetup] = (
            build_judge(settings, os.environ, model=settings.spot_check_model, share_endpoint_with=self.judge_setup)
            if settings.spot_check and self.judge_setup is not None
            else None
        )
        self.spot_sample = SpotSample(settings.spot_check)  # the judged cases to re-judge after the run
        self._started: dict[str, concurrent.futures.Future[dict[str, Any]]] = {}
        self._done: set[str] = set()
        self._lookahead: Optional[Lookahead] = None
        self._resumed: Optional[list[dict[str, Any]]] = None
        self._resume_lock: Optional[RunLock] = None
        self._stop_dir: Optional[Path] = None  # xdist controller: holds the file that stops the workers (SIGTERM)
        self._previous_sigterm: Any = None
        self.opts = RunOptions(k=settings.k, require_snippets=settings.require_snippets, store_full_text=settings.store_full_text,
                               limits=settings.limits)
        self._engine: Optional[Engine] = None
        self._target_client: Optional[RagClient] = None
        self._session_client: Optional[SessionClient] = None
        self.current_item: Optional[pytest.Item] = None
        self.aggregator = Aggregator()
        self.accepted = 0  # records folded in (resumed ones included)
        self._record_keys: list[tuple[Any, Any]] = []  # (key, file) of each: a resume checks one per selected case
        self.case_config: dict[str, Any] = {}  # seed 003's per-case `config` in results.jsonl
        self.eval_files: set[str] = set()
        self.broken_sets: list[tuple[Path, str]] = []  # eval-set globs' matches that are broken symlinks
        self.digests: dict[str, str] = {}
        self.writer: Optional[RunWriter] = None
        self.metrics: Optional[dict[str, Any]] = None
        self.comparison: Optional[Comparison] = None
        self.gate_notes: list[str] = []
        self.gate_failed = False
        self.gate_reason = ""  # the session's last line when the gate failed
        self.selection = Selection()  # eval-set items collected and deselected (partial runs)
        self.session: Optional[pytest.Session] = None
        self.stop_message: Optional[str] = None  # why this process or a worker stopped the whole session
        self.write_error: Optional[str] = None  # results.jsonl could not be written (disk full): the session stopped
        self.in_order: set[str] = set()  # cases not started ahead: conftest code runs at their setup
        self.in_order_elsewhere = 0  # the same, counted by xdist workers

    # -- collection -------------------------------------------------------

    def choose_default_args(self) -> None:
        """``pytest --rageval`` without paths runs the eval sets of ``rageval_eval_sets``."""
        if self.config.args_source == pytest.Config.ArgsSource.ARGS:
            return
        root = self.settings.rootdir
        files: list[str] = []
        for pattern in self.settings.eval_set_globs:
            matches = sorted(glob.glob(str(root / pattern), recursive=True))
            files.extend(m for m in matches if m not in files)
        # A dangling symlink or a loop would stop pytest ("file or directory not found"): an error item instead.
        self.broken_sets = [(Path(f), problem) for f in files if (problem := broken_link_problem(Path(f)))]
        files = [f for f in files if f not in {str(path) for path, _ in self.broken_sets}]
        if not files and self.broken_sets:
            raise pytest.UsageError("pytest-rageval: no eval set can be read: " + "; ".join(f"{p}: {why}" for p, why in self.broken_sets))
        if not files:
            raise pytest.UsageError(
                f"pytest-rageval: no eval sets match {', '.join(self.settings.eval_set_globs)} "
                f"(rageval_eval_sets, relative to {root}); name files or folders on the command line"
            )
        self.config.args = files

    @pytest.hookimpl(tryfirst=True)
    def pytest_ignore_collect(self, collection_path: Path) -> Optional[bool]:
        """Never collect the run artifacts themselves (results/**/results.jsonl)."""
        out = self.settings.output_dir
        if collection_path == out or out in collection_path.parents:
            return True
        return None

    @pytest.hookimpl(optionalhook=True)  # pytest >= 8 only; on pytest 7 such a link is skipped silently, as pytest does
    def pytest_collect_directory(self, path: Path, parent: pytest.Collector) -> None:
        """Note the broken ``.jsonl`` symlinks of a folder being collected (pytest's walk skips them silently)."""
        try:
            names = sorted(entry.name for entry in os.scandir(path) if entry.name.endswith(".jsonl") and entry.is_symlink())
        except OSError:
            return None
        known = {p for p, _ in self.broken_sets}
        for name in names:
            problem = broken_link_problem(path / name)
            if problem and path / name not in known:
                self.broken_sets.append((path / name, problem))
        return None

    def pytest_collect_file(self, file_path: Path, parent: pytest.Collector) -> Optional[pytest.Collector]:
        if file_path.suffix == ".jsonl":
            return EvalSetFile.from_parent(parent, path=file_path)
        return None

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """The collected items live for the whole session: keep the cyclic GC from rescanning them.

        With 50,000 cases, pytest's end-of-session ``gc.collect`` passes alone cost seconds otherwise.
        Given back when the session's config is cleaned up (compat.arm_gc_freeze).
        """
        compat.freeze_collected(self.config)

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        """Keep this shard's cases and those a resumed run lacks.

        Every xdist worker computes the same result (hashes and seeds over node ids).
        """
        s = self.settings
        if self.broken_sets and self.session is not None:
            broken = broken_set_items(self.session, self.broken_sets)
            for item in broken:
                config.hook.pytest_itemcollected(item=item)
            items[:0] = broken
        done = self.resumed_keys()
        if s.shard is not None or done:
            keep, drop = [], []
            for item in items:
                eval_item = isinstance(item, (CaseItem, BadLineItem))
                out_of_shard = eval_item and s.shard is not None and not in_shard(item.nodeid, *s.shard)
                (drop if out_of_shard or item.nodeid in done else keep).append(item)
            if drop:
                config.hook.pytest_deselected(items=drop)
                items[:] = keep
        if s.dry_run:
            self.dry_run(config, items)

    def pytest_itemcollected(self, item: pytest.Item) -> None:
        """Count the eval set's items (cases and invalid lines) per file, before any deselection."""
        if isinstance(item, (CaseItem, BadLineItem)):
            self.selection.add_collected(item.nodeid.partition("::")[0])

    def pytest_deselected(self, items: Sequence[pytest.Item]) -> None:
        """Count eval-set items left out of this run: out of its shard, or by -k/-m/--lf (a resumed run's are not)."""
        shard = self.settings.shard
        done = self.resumed_keys()
        for item in items:
            if not isinstance(item, (CaseItem, BadLineItem)):
                continue
            if shard is not None and not in_shard(item.nodeid, *shard):
                self.selection.out_of_shard += 1
            elif item.nodeid not in done:
                self.selection.deselected += 1

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        s = self.settings
        target = public_url(s.target) if s.target else "(the rageval_client fixture)"
        info = judge_info(self.judge_setup.judge if self.judge_setup else None)
        judge = info["name"] if info["name"] == "none" else f"{info['name']} ({info['model']}{', heuristic' if info['heuristic'] else ''})"
        return [f"rageval: target {target}, k={s.k}, judge {judge}, output {s.output_dir}"]

    # -- running cases ----------------------------------------------------

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            stop = self.config.workerinput.get("rageval_stop_file") if self.is_worker else None  # type: ignore[attr-defined]
            self._engine = Engine(self.settings.concurrency, stop_file=Path(stop) if stop else None)
        return self._engine

    def target_client(self) -> RagClient:
        """The client for the configured target; a clear error when there is none."""
        if self._target_client is None:
            s = self.settings
            if not s.target:
                raise RagConfigError(
                    "no system under test: set --rageval-target, ini rageval_target or env RAGEVAL_TARGET, "
                    "or override the rageval_client fixture in conftest.py"
                )
            self._target_client = load_target(
                s.target,
                folders=[os.getcwd(), str(s.rootdir)],
                concurrency=s.concurrency,
                headers=parse_headers(s.headers_text, os.environ),
                timeout=s.timeout,
                request_map=parse_request_map(s.request_map_text),
                response_map=parse_response_map(s.response_map_text),
            )
        return self._target_client

    def session_client(self, judge: Any = NOTHING) -> SessionClient:
        """What the ``rageval_client`` fixture returns; ``judge`` is the ``rageval_judge`` fixture's value."""
        if self._session_client is None:
            problem = None
            try:
                self._session_client = SessionClient(self.target_client(), plugin=self)
            except (RagConfigError, ValueError) as exc:
                problem = str(exc)
            if problem is not None:
                pytest.fail(f"pytest-rageval: {problem}", pytrace=False)  # outside `except`: no chained traceback
        assert self._session_client is not None
        if judge is not NOTHING:
            self._session_client.judge = self.judge_for(judge)
        return self._session_client

    def session_judge(self) -> Optional[SessionJudge]:
        """What the ``rageval_judge`` fixture returns."""
        return SessionJudge(self.judge_setup, self.engine.run) if self.judge_setup else None

    def judge_for(self, fixture_value: Any) -> Optional[JudgeSetup]:
        """The judge setup behind the ``rageval_judge`` fixture's value (which a conftest may override)."""
        if fixture_value is None:
            return None
        if isinstance(fixture_value, SessionJudge):
            return fixture_value.setup
        return JudgeSetup(fixture_value, self.settings.judge_metrics)

    def evaluate(self, work: Any) -> dict[str, Any]:
        """Wait for one case's future (or run its coroutine); a refused judge key stops the session once."""
        try:
            return self.engine.wait(work) if isinstance(work, concurrent.futures.Future) else self.engine.run(work)
        except JudgeAuthError as exc:
            message = terminal_safe(f"pytest-rageval: {exc.message}")  # the judge server's words may be in it
        except JudgeCacheError as exc:  # damaged after the start-up check: stop once, not an error per case
            message = terminal_safe(f"pytest-rageval: {exc}")
        self.stop_message = message
        if self.is_worker:
            # xdist takes an exiting worker for a crash unless it says it should stop; the controller
            # then stops every worker and shows the message once (pytest_testnodedown below).
            self.config.workeroutput["rageval_stop"] = message  # type: ignore[attr-defined]
            if self.session is not None:
                self.session.shouldstop = message
        pytest.exit(message, returncode=pytest.ExitCode.USAGE_ERROR)

    def pytest_keyboard_interrupt(self, excinfo: Any) -> None:
        """Ctrl-C or SIGTERM between waits: nothing more is sent for the cases started ahead."""
        if self._engine is not None:
            self._engine.cancel_all()

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        """On the xdist controller: name the file whose appearance stops a worker waiting for a case."""
        node.workerinput["rageval_stop_file"] = str(self._stop_file_path())

    def _stop_file_path(self) -> Path:
        if self._stop_dir is None:
            import tempfile

            self._stop_dir = Path(tempfile.mkdtemp(prefix="rageval-stop-"))
        return self._stop_dir / "stop"

    def _stop_workers(self) -> None:
        """SIGTERM reaches the controller only: tell the xdist workers to stop too (they watch this file)."""
        if self._stop_dir is not None:
            try:
                self._stop_file_path().touch()
            except OSError:
                pass

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """On the xdist controller: what a worker reports beyond its test reports."""
        output = getattr(node, "workeroutput", {})
        if output.get("rageval_stop"):  # it stopped the session (a refused judge key)
            self.stop_message = output["rageval_stop"]
        self.in_order_elsewhere += output.get("rageval_in_order", 0)
        if output.get("rageval_selection") and not self.selection.collected:  # every worker collects the same items
            self.selection = Selection.from_dict(output["rageval_selection"])

    def thresholds_for(self, case: Any) -> dict[str, Any]:
        return resolve_thresholds(case, self.settings.thresholds, judge=self.settings.judge_enabled)

    def run_case(self, item: CaseItem) -> dict[str, Any]:
        """The record of one eval-set item: its prefetched result, else run now with its fixtures."""
        future = self._started.pop(item.nodeid, None)
        if future is None:
            try:
                client = as_rag_client(item.funcargs["rageval_client"])
            except TypeError as exc:
                pytest.fail(str(exc), pytrace=False)
            future = self.engine.submit(self._case_coro(item, client, self.judge_for(item.funcargs["rageval_judge"])),
                                        order=self._case_order(item))
        return self.evaluate(future)

    def _case_order(self, item: pytest.Item) -> int:
        """The item's collection index: judge requests of earlier cases are served first."""
        if self._lookahead is None:
            self._lookahead = Lookahead(self.config, item.session.items)
        return self._lookahead.position.get(id(item), len(self._lookahead.items))

    def _case_coro(self, item: CaseItem, client: RagClient, judge: Optional[JudgeSetup]) -> Any:
        return evaluate_case(
            item.case,
            client,
            self.opts,
            self.thresholds_for(item.case),
            key=item.nodeid,
            file=item.nodeid.partition("::")[0],
            line=item.line,
            judge=judge,
            spot_input=self.spot_setup is not None,
        )

    def _early_fixtures(self, item: CaseItem) -> Optional[tuple[RagClient, Optional[JudgeSetup]]]:
        """The client and judge of ``item`` if known before its setup (else it runs in setup)."""
        values = []
        for name, own in (("rageval_client", self.session_client), ("rageval_judge", self.session_judge)):
            value = cached_fixture(item, name)
            if value is NOTHING and is_own_fixture(item, name):
                try:
                    value = own()
                except BaseException:  # a configuration error: setup reports it cleanly
                    return None
            if value is NOTHING:
                return None
            values.append(value)
        try:
            return as_rag_client(values[0]), self.judge_for(values[1])
        except TypeError:
            return None

    def prefetch(self, session: pytest.Session, item: pytest.Item, nextitem: Optional[pytest.Item]) -> None:
        """Start the cases of the next ``2 x concurrency`` items (the engine runs ``concurrency`` at a time)."""
        if self.settings.concurrency <= 1:
            return
        if self._lookahead is None:
            self._lookahead = Lookahead(self.config, session.items)
        for upcoming in self._lookahead.upcoming(item, nextitem, 2 * self.settings.concurrency):
            if not isinstance(upcoming, CaseItem) or upcoming.nodeid in self._started or upcoming.nodeid in self._done \
                    or upcoming.nodeid in self.in_order:
                continue
            if skipped_by_marks(upcoming):
                continue
            if runs_conftest_setup(upcoming):
                self.in_order.add(upcoming.nodeid)
                continue
            fixtures = self._early_fixtures(upcoming)
            if fixtures is None:
                continue
            self._started[upcoming.nodeid] = self.engine.submit(self._case_coro(upcoming, *fixtures),
                                                                order=self._case_order(upcoming))

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: Optional[pytest.Item]) -> Any:
        self.current_item = item
        self.prefetch(item.session, item, nextitem)
        try:
            yield
        finally:
            self.current_item = None
            self._done.add(item.nodeid)

    def record_handwritten(self, record: dict[str, Any]) -> None:
        """Keep a record made by ``rageval_client.evaluate`` in a hand-written test."""
        item = self.current_item
        if item is not None:
            item.stash.setdefault(handwritten_key, []).append(record)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
        outcome = yield
        report: pytest.TestReport = outcome.get_result()
        final = report.when == "call" or (report.when == "setup" and not report.passed)
        if not final:
            return
        state = _outcome(report)
        if isinstance(item, CaseItem):
            record = item.record or base_record(item.case, key=item.nodeid, file=item.nodeid.partition("::")[0], line=item.line)
            if record.get("error"):  # the RAG or judge call failed: an error in metrics.json, even under xfail
                state = "error"
            record["outcome"] = state
            if state == "error" and not record.get("error"):
                record["error"] = {"kind": "other", "message": _longrepr_line(report, call)}
            if report.failed:  # a traceback's text may come from outside too (an exception quoting a server)
                report.longrepr = escape_longrepr(report.longrepr)
            report.rageval_case = record  # type: ignore[attr-defined]
            item.record = None  # the report carries it from here on
            if self.config.getoption("xmlpath", None):  # JUnit XML asked for: metrics as properties
                item.user_properties.extend((f"rageval.{n}", v) for n, v in record["metrics"].items() if v is not None)
        elif isinstance(item, BadLineItem):
            report.rageval_case = {  # type: ignore[attr-defined]
                "key": item.nodeid,
                "file": item.nodeid.partition("::")[0],
                "line": item.line,
                "invalid_line": True,
                "outcome": "error",
                "error": {"kind": "invalid_line", "message": item.message},
            }
        else:
            records = item.stash.get(handwritten_key, [])
            for record in records:
                record["outcome"] = state
            if records:
                report.rageval_records = records  # type: ignore[attr-defined]
        if self.is_worker:  # execnet refuses what JSON would (a lone surrogate): send the records as they will be written
            if hasattr(report, "rageval_case"):
                report.rageval_case = portable_record(report.rageval_case)  # type: ignore[attr-defined]
            if hasattr(report, "rageval_records"):
                report.rageval_records = [portable_record(r) for r in report.rageval_records]  # type: ignore[attr-defined]

    # -- the controller: artifacts and gate -------------------------------

    def dry_run(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        """Print the planned requests, tokens and cost, and stop before anything is sent."""
        from .judges.estimate import plan
        from .judges.factory import DEFAULT_PRICES

        s = self.settings
        lexical = s.judge == "lexical"
        result = plan(
            [item.case for item in items if isinstance(item, CaseItem)],
            k=s.k,
            metrics=s.judge_metrics,
            judge_enabled=s.judge_enabled,
            model=None if lexical else s.judge_model,
            prices={**DEFAULT_PRICES, **s.judge_prices},
            lexical=lexical,
        )
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_sep("=", "rageval dry run")
            for line in result.lines:
                reporter.write_line(line)
        pytest.exit("rageval dry run: nothing was sent", returncode=pytest.ExitCode.OK)

    def check_judge(self) -> None:
        """``--rageval-judge-check``: the judge must tell seed 000's faithful answer from the hallucinated one."""
        from .judges.calibration import check_judge

        if self.judge_setup is None:
            raise pytest.UsageError("pytest-rageval: --rageval-judge-check needs a judge (not --rageval-judge none)")
        result = self.evaluate(check_judge(self.judge_setup.judge))
        if not result.passed:
            pytest.exit("pytest-rageval: " + "\n".join(result.lines), returncode=pytest.ExitCode.TESTS_FAILED)
        self.gate_notes.extend(result.lines)

    def prepare_run_folder(self) -> None:
        """Before any case: the output folder must be writable; a resumed run is locked, made with this
        configuration and selection, and its results.jsonl mended. Each refusal is one usage error."""
        s = self.settings
        try:
            if s.resume is None:
                check_writable(s.output_dir)
                return
            check_writable(s.resume.parent)  # `latest` is written there
            self._resume_lock = RunLock(s.resume)
            self._resume_lock.acquire()
            check_writable(s.resume)
            changed = differences(self.recorded_identity(s.resume), self.identity())
            if changed:
                raise RunFolderError(
                    f"{s.resume} was made with another configuration ({'; '.join(changed)}): "
                    "resume it with the options it was made with, or start a new run"
                )
            repair = repair_results(s.resume)
        except (RunFolderError, OSError) as exc:
            self.release_resume_lock()
            where = "--rageval-resume" if s.resume is not None else "--rageval-output"
            raise pytest.UsageError(f"pytest-rageval: {where}: {exc}") from None
        self._resumed = repair.records
        if repair.cut_bytes:
            self.gate_notes.append(
                f"resume: results.jsonl ended in a torn line ({repair.cut_bytes} bytes), cut; "
                f"{len(repair.records)} records kept"
            )

    def identity(self) -> dict[str, Any]:
        """What a resume must share with its run: the configuration snapshot, its hash, the selection."""
        s, option = self.settings, self.config.option
        return {
            "config_hash": config_hash(s.snapshot()),
            "config": s.snapshot(),
            "selection": selection_of(
                args=[str(a) for a in self.config.args],
                invocation_dir=Path(str(self.config.invocation_params.dir)),
                rootdir=s.rootdir,
                keyword=getattr(option, "keyword", "") or "",
                markexpr=getattr(option, "markexpr", "") or "",
                deselect=[str(d) for d in getattr(option, "deselect", None) or []],
                shard=f"{s.shard[0]}/{s.shard[1]}" if s.shard else None,
            ),
        }

    @staticmethod
    def recorded_identity(run_dir: Path) -> dict[str, Any]:
        """The run's config.json; without one (a run folder of an older version, killed) its first case's ``config``."""
        recorded = read_json_object(run_dir / "config.json")
        if recorded:
            return recorded
        per_case = next((r["config"] for r in read_records(run_dir) if isinstance(r.get("config"), dict)), None)
        if per_case is None:  # invalid-line records carry no `config`
            return {}
        return {"config_hash": per_case.get("config_hash"),
                "config": {name: per_case[name] for name in ("k", "judge", "judge_model") if name in per_case}}

    def release_resume_lock(self) -> None:
        if self._resume_lock is not None:
            self._resume_lock.release()
            self._resume_lock = None

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self.release_resume_lock()
        if self._stop_dir is not None:
            import shutil

            shutil.rmtree(self._stop_dir, ignore_errors=True)

    def resumed_keys(self) -> set[str]:
        """Keys of the cases the run being resumed has already finished."""
        if self.settings.resume is None:
            return set()
        if self._resumed is None:
            self._resumed = list(read_records(self.settings.resume))
        return {r["key"] for r in self._resumed if r.get("key")}

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.session = session
        if self.is_worker or self.settings.dry_run or self.config.option.collectonly:
            return
        if self.settings.judge_check:
            self.check_judge()
        resume = self.settings.resume
        if resume is not None:
            self.writer = RunWriter(resume.parent, resume.name, config=self.build_config)
            self.resumed_keys()
            for record in self._resumed or []:
                self._accept(record, write=False)
        else:
            self.writer = RunWriter(self.settings.output_dir, new_run_id(), config=self.build_config)
        self.case_config = case_config(
            k=self.settings.k,
            config_hash=config_hash(self.settings.snapshot()),
            judge=judge_info(self.judge_setup.judge if self.judge_setup else None),
        )
        self._previous_sigterm = _interrupt_on_sigterm(self._stop_workers)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.is_worker or self.writer is None:
            return
        record = getattr(report, "rageval_case", None)
        for rec in [record] if record else list(getattr(report, "rageval_records", None) or []):
            self._accept(rec, write=True)
        # Streamed to disk and folded into the aggregates: pytest keeps every report until the end,
        # so drop the record from it to keep memory flat on long runs.
        for name in ("rageval_case", "rageval_records"):
            if hasattr(report, name):
                delattr(report, name)

    def _accept(self, rec: dict[str, Any], *, write: bool) -> None:
        """Stream one CaseRecord to results.jsonl and fold it into the aggregates."""
        assert self.writer is not None
        spot = rec.pop("spot_input", None)  # full contexts: never written
        if write:  # a record that cannot be written becomes an error saying why (counted so in metrics.json too)
            written = self._write(rec)
            if written is None:
                return  # metrics.json counts only what results.jsonl holds
            rec = written
        self.accepted += 1
        if self.settings.resume is not None:
            self._record_keys.append((rec.get("key"), rec.get("file")))
        if spot is not None:
            self.spot_sample.offer(rec["key"], spot)
        self.aggregator.add(rec)
        if rec.get("file"):
            self.eval_files.add(rec["file"])

    def _write(self, rec: dict[str, Any]) -> Optional[dict[str, Any]]:
        """Append ``rec`` as written (``writable_record``) to results.jsonl and return it; None when the write failed.

        A failed write (disk full) stops the session once, not as an INTERNALERROR.
        """
        assert self.writer is not None
        if self.write_error is not None:
            return None
        rec = writable_record(with_seed_keys(rec, self.case_config))
        try:
            self.writer.add(rec)
        except OSError as exc:
            self.write_error = (f"pytest-rageval: cannot write {self.writer.results_path}: {exc.strerror or exc}; "
                                "the run stops here (resume it once it can be written)")
            self.stop_message = self.stop_message or self.write_error
            self.gate_notes.append(self.write_error.removeprefix("pytest-rageval: "))
            if self.session is not None:
                self.session.shouldstop = self.write_error
            return None
        return rec

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self._engine is not None:
            closers = [self._target_client.aclose] if self._target_client is not None else []
            for setup in (self.judge_setup, self.spot_setup):
                if setup is not None:
                    closers.append(setup.judge.aclose)
            self._engine.close(*closers)
            self._engine = None
        if self.is_worker:
            self.config.workeroutput["rageval_in_order"] = len(self.in_order)  # type: ignore[attr-defined]
        if self.is_worker or self.writer is None:
            return
        in_order = len(self.in_order) + self.in_order_elsewhere
        if in_order:
            self.gate_notes.append(
                f"{in_order} case{'s' if in_order != 1 else ''} ran one at a time: conftest code (a pytest_runtest_setup "
                "hook or a fixture) runs at their setup and may skip them, so nothing is sent for them ahead of it"
            )
        _restore_sigterm(self._previous_sigterm)
        if self.stop_message:  # the same exit status as a serial run that stopped on it
            session.exitstatus = pytest.ExitCode.USAGE_ERROR
        if not self.accepted and self.settings.resume is None:
            self.gate_notes.append("no case ran: no run folder written, no baseline compared")
            return
        # -x on the last case stops nothing; under xdist the controller has no items to count, so it says incomplete.
        stopped = bool(session.shouldfail or session.shouldstop)
        items = (compat.session_items(session) or []) if stopped else []  # pytest 7 sets none on the xdist controller
        ran_everything = bool(items) and len(self._done) >= len(items)
        complete = (exitstatus != pytest.ExitCode.INTERRUPTED and not self.stop_message
                    and (ran_everything or not stopped)
                    and (self.settings.resume is None or self._one_record_per_selected_case()))
        self.metrics = self.build_metrics(complete)
        self.gate(session)  # before writing: metrics.json carries the comparison
        kept = why_not_latest(self.metrics, whole_share=self.selection.whole_share)
        if kept:
            self.gate_notes.append(f"{self.settings.output_dir / 'latest'} not moved: {kept}")
        try:
            self.writer.finish(self.metrics, self.build_config(), move_latest=kept is None)
            self.write_html()
        except OSError as exc:
            self.gate_notes.append(f"the run folder is not complete: cannot write in {self.writer.run_dir}: {exc.strerror or exc}")
            session.exitstatus = pytest.ExitCode.USAGE_ERROR
        except RunFolderError as exc:  # a results.jsonl line changed under the run: no report rather than a wrong one
            self.gate_notes.append(f"report.html not written: {exc}")
            session.exitstatus = pytest.ExitCode.USAGE_ERROR
        self.release_resume_lock()

    def _one_record_per_selected_case(self) -> bool:
        """A resumed run is complete only when every selected eval-set item has exactly one record."""
        files = set(self.selection.collected)
        keys = [k for k, f in self._record_keys if f in files]
        return len(keys) == len(set(keys)) == self.selection.selected

    @pytest.hookimpl(hookwrapper=True, tryfirst=True, specname="pytest_sessionfinish")
    def pytest_sessionfinish_last_line(self, session: pytest.Session) -> Generator[None, Any, None]:
        """Outermost: a worker reports its selection; a failed gate gets the session's last line, after pytest's summary."""
        if self.is_worker:
            self.config.workeroutput["rageval_selection"] = self.selection.as_dict()  # type: ignore[attr-defined]
        yield
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if self.gate_failed and not self.is_worker and reporter is not None:
            reporter.write_sep("=", f"rageval gate FAILED: {self.gate_reason}", red=True, bold=True)

    def build_metrics(self, complete: bool) -> dict[str, Any]:
        s = self.settings
        result = self.aggregator.result()
        if self.spot_setup is not None:
            result["aggregate_metrics"]["judge_reliability"] = self.spot_check(result["aggregate_metrics"], complete)
        assert self.writer is not None
        self.digests = file_digests(self.eval_files | set(self.selection.collected), s.rootdir)
        return compose_metrics(
            run_id=self.writer.run_id,
            complete=complete,
            config_hash=config_hash(s.snapshot()),
            digests=self.digests,
            judge=judge_info(self.judge_setup.judge if self.judge_setup else None),
            k=s.k,
            aggregated=result,
            selection=self.selection.fields(f"{s.shard[0]}/{s.shard[1]}" if s.shard else None),
        )

    def spot_check(self, aggregate: dict[str, Any], complete: bool) -> dict[str, Any]:
        """Re-judge the sample with the second model, now that every case ran; its spend counts in ``aggregate``."""
        assert self.spot_setup is not None
        s, sample = self.settings, self.spot_sample
        chosen = sample.chosen() if complete else []
        results: list[dict[str, Any]] = []
        if chosen:
            engine = Engine(s.concurrency)
            try:
                results = engine.run(spotcheck.rejudge(self.spot_setup, chosen))
            except JudgeAuthError as exc:
                self.gate_notes.append(f"spot check not made: {exc.message}")
            finally:
                engine.close(self.spot_setup.judge.aclose)
        for result in results:
            spent = result.pop("spent")
            aggregate["cost"]["judge_total_tokens"] += spent["judge_tokens"]
            aggregate["cost"]["judge_total_usd"] += spent["judge_cost_usd"]
            aggregate["judge_cache"]["hits"] += spent["hits"]
            aggregate["judge_cache"]["misses"] += spent["misses"]
        reliability = spotcheck.reliability(results, requested=s.spot_check, judged=sample.judged, model=s.spot_check_model)
        if not complete:
            self.gate_notes.append("spot check not made: the run is incomplete")
        elif sample.judged < s.spot_check:
            self.gate_notes.append(
                f"spot check: {s.spot_check} cases asked for, but only {sample.judged} got a judge verdict; re-judged {len(chosen)}"
            )
        failed = [r for r in results if r["error"]]
        if failed:
            self.gate_notes.append(f"spot check: {len(failed)} of {len(results)} re-judgings failed ({failed[0]['error']})")
        return reliability

    def build_config(self) -> dict[str, Any]:
        s = self.settings
        identity = self.identity()
        return {
            "run_id": self.writer.run_id if self.writer else None,
            "config_hash": identity["config_hash"],
            "eval_set_hash": self.metrics["eval_set_hash"] if self.metrics else None,
            "eval_set_files": self.digests,
            "git_commit": git_commit(s.rootdir),
            "plugin_version": __version__,
            "python": sys.version.split()[0],
            "pytest": pytest.__version__,
            "args": public_args(self.config.invocation_params.args, s.redactor(os.environ)),
            "config": identity["config"],
            "selection": identity["selection"],  # what a resume must select again (resume.py)
            "client": self._target_client.describe() if self._target_client is not None else None,
            "judge": self.judge_setup.judge.describe() if self.judge_setup is not None else None,
        }

    def write_html(self) -> None:
        from .report.html import load_history, write_report

        assert self.writer is not None and self.metrics is not None
        history = [m for m in load_history(self.settings.output_dir) if m.get("run_id") != self.writer.run_id]
        write_report(
            self.writer.run_dir / "report.html",
            self.metrics,
            read_records(self.writer.run_dir),
            deltas=[dataclasses.asdict(d) for d in self.comparison.deltas] if self.comparison else None,
            history=history,
        )

    def gate(self, session: pytest.Session) -> None:
        """Compare with the baseline (gate.gate_runs), or write it; fail the session unless the gate passed."""
        s = self.settings
        assert self.metrics is not None
        if s.baseline is None:
            if s.update_baseline:
                self.gate_notes.append("--rageval-update-baseline needs --rageval-baseline PATH (or ini rageval_baseline)")
                self._fail(session, self.gate_notes[-1])
            return
        # A folder, or a new path not naming a .json file, gets metrics.json inside.
        is_folder = s.baseline.is_dir() or (not s.baseline.exists() and s.baseline.suffix != ".json")
        target = s.baseline / "metrics.json" if is_folder else s.baseline
        if s.update_baseline:
            write_json_atomic(target, self.metrics)
            self.gate_notes.append(f"baseline updated: {target}")
            m = self.metrics
            if m.get("failed") or m.get("errors"):
                self.gate_notes.append(
                    f"warning: the new baseline has {m.get('failed', 0)} failed and {m.get('errors', 0)} errored cases"
                )
            if m.get("partial"):
                self.gate_notes.append(
                    f"warning: the new baseline covers {m.get('cases_selected')} of the {m.get('cases_in_eval_set')} "
                    "cases of the eval set (a partial run); later runs are compared on the cases it holds"
                )
            return
        try:
            baseline = load_baseline(s.baseline)
        except ValueError as exc:
            self.gate_notes.append(f"baseline refused: {exc}")
            self._fail(session, self.gate_notes[-1])
            return
        if baseline is None:
            self.gate_notes.append(f"warning: baseline {s.baseline} not found; no regression gate this run")
            return
        comparison = self.comparison = gate_runs(
            baseline, self.metrics, gate=s.gate, significance=s.gate_significance, ignore_invariants=s.ignore_invariants
        )
        self.metrics["comparison"] = {"baseline": str(s.baseline), **comparison.as_dict()}
        if comparison.regressed and s.allow_regressions:
            self.gate_notes.append("regressions allowed (--rageval-allow-regressions): not failing the session")
        elif not comparison.passed:
            self._fail(session, comparison.reason())

    def _fail(self, session: pytest.Session, reason: str) -> None:
        self.gate_failed = True
        self.gate_reason = reason
        if session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.is_worker or self.writer is None:
            return
        if self.metrics is None:
            for note in self.gate_notes:
                terminalreporter.write_line(f"rageval: {note}")
            return
        from .report.terminal import styled_summary_lines

        terminalreporter.write_sep("=", "rageval summary")
        for line, markup in styled_summary_lines(self.metrics, self.settings, self.comparison, self.gate_notes,
                                                 self.writer.run_dir if self.writer else None):
            terminalreporter.write_line(line, **markup)


handwritten_key = pytest.StashKey[list]()


def _interrupt_on_sigterm(on_signal: Callable[[], None]) -> Any:
    """Treat SIGTERM like Ctrl-C for this session, so finished cases and metrics.json are kept; ``on_signal`` first."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return None

    def interrupt(signum: int, frame: Any) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM ends the process at once
        on_signal()
        raise KeyboardInterrupt("SIGTERM: stopping; finished cases are kept")

    return signal.signal(signal.SIGTERM, interrupt)


def _restore_sigterm(previous: Any) -> None:
    import signal

    if previous is not None:
        signal.signal(signal.SIGTERM, previous)


def _outcome(report: pytest.TestReport) -> str:
    if hasattr(report, "wasxfail"):
        return "xfailed" if report.skipped else "xpassed"
    if report.when == "setup":
        return "skipped" if report.skipped else "error"
    return str(report.outcome)


def _longrepr_line(report: pytest.TestReport, call: Optional[pytest.CallInfo[None]] = None) -> str:
    """One line saying why an item errored: ``Type: message`` of its exception, never only ``file.py:N``."""
    if call is not None and call.excinfo is not None and not isinstance(call.excinfo.value, pytest.fail.Exception):
        return error_message(call.excinfo.value)
    text = str(report.longrepr or "").strip()
    return text.splitlines()[-1] if text else "error"
