"""The run controller: where results are kept (a serial session, or the xdist controller).

It takes each case's record off the test reports, streams it to results.jsonl and folds it into
the aggregates; at the end it writes metrics.json, config.json and report.html, gates against the
baseline, prints the summary and writes the CI summary (``--rageval-summary-md``,
``$GITHUB_STEP_SUMMARY``). Before any case it checks the run folder (and a resumed run's identity)
and the judge. It runs no case: the case runner does (case_runner.py). Under xdist,
``XdistControllerLink`` adds what the workers report beyond their test reports.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import sys
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_rageval import __version__
from pytest_rageval.evaluation.evalset import load_eval_file
from pytest_rageval.evaluation.reach import unreachable_gold
from pytest_rageval.evaluation.schema import EvalCase
from pytest_rageval.evaluation.selection import Selection
from pytest_rageval.gate.aggregate import Aggregator
from pytest_rageval.gate.compare import Comparison, gate_runs, gate_verdict, load_baseline
from pytest_rageval.gate.configs import add_ranking, gate_configs
from pytest_rageval.judges import spotcheck
from pytest_rageval.judges.base import JudgeAuthError
from pytest_rageval.judges.cache import JudgeCacheError
from pytest_rageval.judges.spotcheck import SpotSample
from pytest_rageval.redact import public_args, public_url, scrub_urls
from pytest_rageval.runs.artifacts import (
    case_config,
    compose_metrics,
    config_hash,
    file_digests,
    new_run_id,
    why_not_latest,
    with_seed_keys,
    writable_record,
)
from pytest_rageval.runs.commit import run_commit, tree_dirty
from pytest_rageval.runs.folder import (
    RunFolder,
    RunFolderError,
    RunLock,
    append_to_regular_file,
    check_writable,
    read_json_object,
    read_records,
    repair_results,
    write_json_atomic,
    write_text_atomic,
)
from pytest_rageval.runs.resume import differences, selection_of
from pytest_rageval.sanitize import terminal_safe

from . import compat, signals
from .collect import CaseItem
from .run_setup import RunSetup
from .runner import Engine

if TYPE_CHECKING:
    from pytest_rageval.report.baseline import BaselineCases, GateOutcome

    from .case_runner import RunnerTotals
    from .collect import EvalCollection


#: Unreachable gold supports named at the start of a run (rageval inspect lists every one).
MAX_UNREACHABLE_SHOWN = 20

#: The run controller where results are kept (a serial session, the xdist controller); set by session.py
#: (the idiom of pytest's junitxml.py ``xml_key``).
controller_key: pytest.StashKey[RunController] = pytest.StashKey()


class RunController:
    """State of the run being recorded: the run folder, the aggregates, the gate."""

    def __init__(
        self, config: pytest.Config, setup: RunSetup, collection: EvalCollection, finish_runner: Callable[[], RunnerTotals] | None = None
    ) -> None:
        self.config = config
        self.setup = setup
        self.settings = setup.settings
        self.collection = collection
        self.finish_runner = finish_runner  # the case runner of this process (a serial session), if any
        self.spot_sample = SpotSample(self.settings.spot_check)  # the judged cases to re-judge after the run
        self.aggregator = Aggregator()
        self.accepted = 0  # records folded in (resumed ones included)
        self._record_keys: list[tuple[Any, Any]] = []  # (key, file) of each: a resume checks one per selected case
        self.case_config: dict[str, Any] = {}  # the per-case `config` of results.jsonl
        self.eval_files: set[str] = set()
        self.digests: dict[str, str] = {}
        self.writer: RunFolder | None = None
        self.metrics: dict[str, Any] | None = None
        self.comparison: Comparison | None = None
        self.baseline: dict[str, Any] | None = None  # the compared baseline's metrics.json: trend charts draw it
        self.outcome: GateOutcome | None = None  # the gate's outcome as the reports show it (None: not gated)
        self.gate_notes: list[str] = []
        self.gate_failed = False
        self.gate_reason = ""  # the session's last line when the gate failed
        self.stop_message: str | None = None  # why the session stopped (a worker's refused judge key, a full disk)
        self.write_error: str | None = None  # results.jsonl could not be written (disk full): the session stopped
        self.in_order_elsewhere = 0  # cases run in order, counted by xdist workers
        self.first_calls: list[tuple[str, float]] = []  # (target, ms) of each process's first call of a target
        self.session: pytest.Session | None = None
        self.resumed: list[dict[str, Any]] = []  # records as read back (readers give plain dicts)
        self._resume_lock: RunLock | None = None
        self._previous_sigterm: Any = None
        self.late_sigterm = False  # a SIGTERM came while the run was being written (it ends as interrupted)
        self.stop_workers: Callable[[], None] = lambda: None  # XdistControllerLink sets it

    @property
    def report_path(self) -> Path | None:
        """Where report.html is written (None before the run folder is known)."""
        return self.writer.report_path if self.writer is not None else None

    @property
    def selection(self) -> Selection:
        return self.collection.selection

    # -- before any case ------------------------------------------------------

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
        self.resumed = repair.records
        if repair.cut_bytes:
            self.gate_notes.append(f"resume: results.jsonl ended in a torn line ({repair.cut_bytes} bytes), cut; {len(repair.records)} records kept")

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
        return {
            "config_hash": per_case.get("config_hash"),
            "config": {name: per_case[name] for name in ("k", "judge", "judge_model") if name in per_case},
        }

    def release_resume_lock(self) -> None:
        if self._resume_lock is not None:
            self._resume_lock.release()
            self._resume_lock = None

    def check_judge(self) -> None:
        """``--rageval-judge-check``: the judge must tell a faithful answer from a hallucinated one."""
        from pytest_rageval.judges.calibration import check_judge

        setup = self.setup.judge_setup
        if setup is None:
            raise pytest.UsageError("pytest-rageval: --rageval-judge-check needs a judge (not --rageval-judge none)")
        engine = Engine(1)
        try:
            result = engine.run(check_judge(setup.judge))
        except (JudgeAuthError, JudgeCacheError) as exc:
            pytest.exit(terminal_safe(f"pytest-rageval: {getattr(exc, 'message', exc)}"), returncode=pytest.ExitCode.USAGE_ERROR)
        finally:
            engine.close(setup.judge.aclose)  # the judge opens a new client on the runner's loop
        if not result.passed:
            pytest.exit("pytest-rageval: " + "\n".join(result.lines), returncode=pytest.ExitCode.TESTS_FAILED)
        self.gate_notes.extend(result.lines)

    def dry_run(self, items: list[pytest.Item]) -> None:
        """Print the planned requests, tokens and cost, and stop before anything is sent."""
        from pytest_rageval.judges.estimate import plan

        from .judge_factory import DEFAULT_PRICES

        s = self.settings
        lexical = s.judge == "lexical"
        result = plan(
            [self._as_run(item.case) for item in items if isinstance(item, CaseItem)],
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
                for item in items
                if isinstance(item, CaseItem) and item.matrix_config is not None and item.case.skip is None
            }
            lines.append(
                f"config matrix: {len(matrix.configs())} configs; the retrieval cache sends {sum(groups.values())} "
                "RAG requests (the count above is one per item)"
            )
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_sep("=", "rageval dry run")
            for line in lines:
                reporter.write_line(line)
        pytest.exit("rageval dry run: nothing was sent", returncode=pytest.ExitCode.OK)

    def _as_run(self, case: EvalCase) -> EvalCase:
        """``case`` with the runs ``--rageval-repeat`` gives it (what the runner will do; stability.with_repeat)."""
        from pytest_rageval.evaluation.stability import with_repeat
        from pytest_rageval.evaluation.thresholds import judge_metrics

        return with_repeat(
            case, self.settings.repeat, self.setup.thresholds_for(case), judge_metrics(), judge_in_use=self.setup.judge_setup is not None
        )

    # -- hooks ----------------------------------------------------------------

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        s = self.settings
        target = self.served_by["name"] or "(the rageval_client fixture)"
        if self.served_by["kind"] == "fixture" and s.target:
            target += f" (rageval_target {public_url(s.target)} is not used)"
        info = self.setup.judge_info()
        judge = info["name"] if info["name"] == "none" else f"{info['name']} ({info['model']}{', heuristic' if info['heuristic'] else ''})"
        repeat = (
            ""
            if s.repeat is None
            # --rageval-repeat: which cases it repeats (stability.judge_dependent)
            else (f", {s.repeat} runs of each {'judge-dependent case' if self.setup.judge_setup is not None else 'case (no judge)'}")
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

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if self.settings.dry_run:
            self.dry_run(session.items)

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.session = session
        s = self.settings
        if s.dry_run or self.config.option.collectonly:
            return
        if s.judge_check:
            self.check_judge()
        if s.resume is not None:
            self.writer = RunFolder(s.resume, config=self.build_config)
            for record in self.resumed:
                self._accept(record, write=False)
        else:
            self.writer = RunFolder.new(s.output_dir, new_run_id(), config=self.build_config)
        self.case_config = case_config(k=s.k, config_hash=config_hash(s.snapshot()), judge=self.setup.judge_info())
        self._previous_sigterm = signals.interrupt_on_sigterm(lambda: self.stop_workers())
        self.warn_unreachable_gold()

    def warn_unreachable_gold(self) -> None:
        """Name, once and before the first case, each gold support that no chunk could ever match (reach.py):
        with ``docs_root`` set, or a framework object as the target (whose documents lie under it)."""
        s = self.settings
        if s.docs_root is None and self.served_by["kind"] != "framework":
            return
        found = unreachable_gold(_eval_cases(self.config.args, s.rootdir), s.docs_root_or_rootdir)
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if not found or reporter is None:
            return
        for problem in found[:MAX_UNREACHABLE_SHOWN]:
            reporter.write_line(terminal_safe(f"rageval warning: {problem.describe()}"), yellow=True)
        if len(found) > MAX_UNREACHABLE_SHOWN:
            reporter.write_line(
                f"rageval warning: ... and {len(found) - MAX_UNREACHABLE_SHOWN} more gold supports "
                "that can never match (rageval inspect TARGET QUESTION --eval-set FILE lists them all)",
                yellow=True,
            )

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.writer is None:
            return
        record = getattr(report, "rageval_case", None)
        for rec in [record] if record else list(getattr(report, "rageval_records", None) or []):
            with signals.held():  # a Ctrl-C between writing and counting would leave metrics.json one record short
                self._accept(rec, write=True)
        # Streamed to disk and folded into the aggregates: pytest keeps every report until the end,
        # so drop the record from it to keep memory flat on long runs.
        for name in ("rageval_case", "rageval_records"):
            if hasattr(report, name):
                delattr(report, name)

    def _accept(self, rec: dict[str, Any], *, write: bool) -> None:
        """Stream one CaseRecord to results.jsonl and fold it into the aggregates."""
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
        if rec.get("file") and not rec.get("invalid_line"):  # a bad line's file counts where it was collected
            self.eval_files.add(rec["file"])

    def _write(self, rec: dict[str, Any]) -> dict[str, Any] | None:
        """Append ``rec`` as written (``writable_record``) to results.jsonl and return it; None when the write failed.

        A failed write (disk full) stops the session once, not as an INTERNALERROR.
        """
        assert self.writer is not None
        if self.write_error is not None:
            return None
        rec = writable_record(with_seed_keys(rec, self._case_config(rec)))
        try:
            self.writer.add(rec)
        except OSError as exc:
            self.write_error = (
                f"pytest-rageval: cannot write {self.writer.results_path}: {exc.strerror or exc}; "
                "the run stops here (resume it once it can be written)"
            )
            self.stop_message = self.stop_message or self.write_error
            self.gate_notes.append(self.write_error.removeprefix("pytest-rageval: "))
            if self.session is not None:
                self.session.shouldstop = self.write_error
            return None
        return rec

    def _case_config(self, rec: dict[str, Any]) -> dict[str, Any]:
        """Seed 003's per-case ``config``; a config of the matrix holds the k it was scored at."""
        params = rec.get("matrix")
        if not isinstance(params, dict):
            return self.case_config
        depth = params.get("k", params.get("top_k"))
        return {**self.case_config, "k": depth if depth is not None else self.case_config["k"]}

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        """Metrics, gate, artifacts; before pytest-html's ``trylast`` one renders its summary from them."""
        # From here a SIGTERM no longer interrupts: the run is written and summed up first, then the session ends
        # as interrupted (pytest_terminal_summary); the handler of before the session is back at unconfigure.
        self._defer_sigterm()
        totals = self.finish_runner() if self.finish_runner is not None else None  # its clients closed first
        if self.writer is None:
            return
        if totals is not None and totals.stop_message:
            self.stop_message = self.stop_message or totals.stop_message
        in_order = (totals.in_order if totals is not None else 0) + self.in_order_elsewhere
        first_calls = self.first_calls + list(totals.first_calls if totals is not None else ())
        for name in sorted({name for name, _ in first_calls}):
            times = ", ".join(f"{ms:,.0f} ms" for n, ms in first_calls if n == name)
            self.gate_notes.append(f"first call of {public_url(name)}: {times} (it went out alone, the other cases waited for it)")
        if in_order:
            self.gate_notes.append(
                f"{in_order} case{'s' if in_order != 1 else ''} ran one at a time: conftest code (a pytest_runtest_setup "
                "hook or a fixture) runs at their setup and may skip them, so nothing is sent for them ahead of it"
            )
        if self.stop_message:  # the same exit status as a serial run that stopped on it
            session.exitstatus = pytest.ExitCode.USAGE_ERROR
        if not self.accepted and self.settings.resume is None:
            self.gate_notes.append("no case ran: no run folder written, no baseline compared")
            return
        # -x on the last case stops nothing; the xdist controller runs no item itself, so it cannot tell.
        stopped = bool(session.shouldfail or session.shouldstop)
        items = (compat.session_items(session) or []) if stopped else []  # pytest 7 sets none on the xdist controller
        ran_everything = bool(items) and totals is not None and totals.done >= len(items)
        complete = (
            exitstatus != pytest.ExitCode.INTERRUPTED
            and not self.stop_message
            and (ran_everything or not stopped)
            and (self.settings.resume is None or self._one_record_per_selected_case())
        )
        self.metrics = self.build_metrics(complete)
        add_ranking(self.metrics, self.settings.rank_by)  # a config matrix: its configs ranked
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
        self.write_summaries()
        self.release_resume_lock()

    @pytest.hookimpl(hookwrapper=True, tryfirst=True, specname="pytest_sessionfinish")
    def pytest_sessionfinish_last_line(self, session: pytest.Session) -> Generator[None, Any, None]:
        """Outermost: a failed gate gets the session's last line, after pytest's summary."""
        yield
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if self.gate_failed and reporter is not None:
            reporter.write_sep("=", f"rageval gate FAILED: {self.gate_reason}", red=True, bold=True)

    def _defer_sigterm(self) -> None:
        """SIGTERM from now on is noted (``late_sigterm``), not raised: the run folder and summary are finished."""
        if self._previous_sigterm is None:
            return
        import signal

        def note(signum: int, frame: Any) -> None:
            self.late_sigterm = True

        signal.signal(signal.SIGTERM, note)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        self._summary(terminalreporter)
        if self.late_sigterm and self.session is not None:
            terminalreporter.write_line(
                "rageval: SIGTERM arrived after the last case: the run was written and summed up first; the session ends as interrupted", yellow=True
            )
            self.session.exitstatus = pytest.ExitCode.INTERRUPTED

    def _summary(self, terminalreporter: Any) -> None:
        if self.writer is None:
            return
        if self.metrics is None:
            for note in self.gate_notes:
                terminalreporter.write_line(f"rageval: {note}")
            return
        from pytest_rageval.report.terminal import styled_summary_lines

        terminalreporter.write_sep("=", "rageval summary")
        for line, markup in styled_summary_lines(self.metrics, self.settings, self.comparison, self.gate_notes, self.writer.run_dir):
            terminalreporter.write_line(line, **markup)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self.release_resume_lock()
        signals.restore_sigterm(self._previous_sigterm)
        self._previous_sigterm = None

    # -- the end of the run ---------------------------------------------------------

    def _one_record_per_selected_case(self) -> bool:
        """A resumed run is complete only when every selected eval-set item has exactly one record."""
        files = set(self.selection.collected)
        keys = [k for k, f in self._record_keys if f in files]
        return len(keys) == len(set(keys)) == self.selection.selected

    @functools.cached_property
    def served_by(self) -> dict[str, str | None]:
        """What serves the eval-set cases: ``{"kind": "fixture" | "http" | "callable" | None, "name": ...}``.

        A ``rageval_client`` fixture in a conftest.py (loaded at start-up) replaces the configured target, which
        is then not what ran; else the configured target's client.
        """
        for plugin in self.config.pluginmanager.get_plugins():
            file = getattr(plugin, "__file__", None)
            if file and os.path.basename(file) == "conftest.py" and hasattr(plugin, "rageval_client"):
                try:
                    where = Path(file).resolve().relative_to(self.settings.rootdir.resolve()).as_posix()
                except ValueError:
                    where = str(file)
                return {"kind": "fixture", "name": f"the rageval_client fixture of {where}"}
        s = self.settings
        client = self.setup.made_target_client
        kind = client.describe().get("kind") if client is not None else None
        return {"kind": str(kind) if kind else None, "name": public_url(s.target) if s.target else None}

    def build_metrics(self, complete: bool) -> dict[str, Any]:
        s = self.settings
        result = self.aggregator.result()
        if self.setup.spot_setup is not None:
            result["aggregate_metrics"]["judge_reliability"] = self.spot_check(result["aggregate_metrics"], complete)
        assert self.writer is not None
        self.digests = file_digests(self.eval_files | set(self.selection.collected), s.rootdir)
        return compose_metrics(
            run_id=self.writer.run_id,
            complete=complete,
            config_hash=config_hash(s.snapshot()),
            digests=self.digests,
            judge=self.setup.judge_info(),
            k=s.k,
            aggregated=result,
            git_commit=self.commit,
            selection=self.selection.fields(f"{s.shard[0]}/{s.shard[1]}" if s.shard else None),
            run={
                "target": self.served_by,
                "git_dirty": tree_dirty(s.rootdir),
                **({"matrix": s.matrix.snapshot()["axes"]} if s.matrix is not None else {}),
                **({"judge_calibration": self.setup.calibration} if self.setup.calibration is not None else {}),
            },
        )

    def spot_check(self, aggregate: dict[str, Any], complete: bool) -> dict[str, Any]:
        """Re-judge the sample with the second model, now that every case ran; its spend counts in ``aggregate``."""
        spot_setup = self.setup.spot_setup
        assert spot_setup is not None
        s, sample = self.settings, self.spot_sample
        chosen = sample.chosen() if complete else []
        results: list[dict[str, Any]] = []
        if chosen:
            engine = Engine(s.concurrency)
            try:
                results = engine.run(spotcheck.rejudge(spot_setup, chosen))
            except JudgeAuthError as exc:
                self.gate_notes.append(f"spot check not made: {exc.message}")
            finally:
                engine.close(spot_setup.judge.aclose)
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

    @functools.cached_property
    def commit(self) -> str | None:
        """The run's source commit (commit.run_commit), asked once: config.json is written twice."""
        return run_commit(self.settings.rootdir, os.environ)

    def build_config(self) -> dict[str, Any]:
        s = self.settings
        identity = self.identity()
        client = self.setup.made_target_client
        judge_setup = self.setup.judge_setup
        return {
            "run_id": self.writer.run_id if self.writer else None,
            "config_hash": identity["config_hash"],
            "eval_set_hash": self.metrics["eval_set_hash"] if self.metrics else None,
            "eval_set_files": self.digests,
            "git_commit": self.commit,
            "plugin_version": __version__,
            "python": sys.version.split()[0],
            "pytest": pytest.__version__,
            "args": public_args(self.config.invocation_params.args, s.redactor(os.environ)),
            "config": identity["config"],
            "selection": identity["selection"],  # what a resume must select again (resume.py)
            "client": (
                {"kind": "fixture", "fixture": "rageval_client", "served_by": self.served_by["name"]}
                if self.served_by["kind"] == "fixture"
                else client.describe()
                if client is not None
                else None
            ),
            "judge": judge_setup.judge.describe() if judge_setup is not None else None,
        }

    @functools.cached_property
    def baseline_cases(self) -> BaselineCases | None:
        """The baseline's cases (metrics.json ``cases``, its results.jsonl when beside it) for the "Since baseline"
        sections of report.html and pytest-html; None without a baseline to compare (or when updating it)."""
        from pytest_rageval.report.baseline import BaselineCases

        s = self.settings
        return None if s.baseline is None or s.update_baseline else BaselineCases.load(s.baseline)

    def write_html(self) -> None:
        from pytest_rageval.report.html import write_report
        from pytest_rageval.runs.store import RunStore

        assert self.writer is not None and self.metrics is not None
        skipped: list[str] = []
        history = [m for m in RunStore(self.settings.output_dir).history(skipped=skipped) if m.get("run_id") != self.writer.run_id]
        self.gate_notes.extend(self._public(note) for note in skipped)
        compared = self.comparison is not None and not self.comparison.refused
        write_report(
            self.writer.report_path,
            self.metrics,
            read_records(self.writer.run_dir),
            deltas=[dataclasses.asdict(d) for d in self.comparison.deltas] if self.comparison else None,
            history=history,
            outcome=self.outcome,
            baseline_cases=self.baseline_cases if compared else None,
            baseline=self.baseline,
        )

    def _public(self, text: str) -> str:
        """``text`` with URL credentials and known secrets masked (a hostile baseline may hold either)."""
        return self.settings.redactor(os.environ).mask(scrub_urls(text))

    def write_summaries(self) -> None:
        """The CI summary (report/markdown.py): written anew to ``--rageval-summary-md``, appended to
        ``$GITHUB_STEP_SUMMARY`` (GitHub shows what every step appended). A failed write is a note, not a failure."""
        from pytest_rageval.report.html import case_anchors
        from pytest_rageval.report.markdown import report_href, summary_markdown

        s = self.settings
        targets = [(path, append) for path, append in ((s.summary_md, False), (s.step_summary, True)) if path is not None]
        if not targets:
            return
        assert self.writer is not None and self.metrics is not None
        comparison = self.comparison
        flipped = set(comparison.flipped_to_fail + comparison.flipped_to_pass) if comparison is not None else set()
        try:
            anchors = (
                case_anchors(read_records(self.writer.run_dir), flipped, to_fail=comparison.flipped_to_fail, to_pass=comparison.flipped_to_pass)
                if comparison is not None and flipped
                else {}
            )
        except (RunFolderError, OSError):
            anchors = {}  # the report was not written either (a note says why): cases are listed without links
        public = self._public
        report = self.writer.report_path
        cwd = Path(str(self.config.invocation_params.dir))
        for path, append in targets:
            text = summary_markdown(
                self.metrics,
                comparison,
                anchors=anchors,
                report=report_href(report, path, cwd) if report.is_file() else None,
                gate_failed=self.gate_failed,
                gate_reason=public(self.gate_reason),
                notes=[public(n) for n in self.gate_notes],
            )
            try:
                if append:
                    append_to_regular_file(path, text)
                else:
                    write_text_atomic(path, text)
            except OSError as exc:
                self.gate_notes.append(f"summary not written: cannot write {path}: {exc.strerror or exc}")

    def gate(self, session: pytest.Session) -> None:
        """Compare with the baseline (gate.gate_runs, gate.gate_verdict), or write it; fail the session unless the gate passed."""
        s = self.settings
        assert self.metrics is not None
        from pytest_rageval.report.baseline import GateOutcome

        if s.baseline is None:
            if s.update_baseline:
                self.gate_notes.append("--rageval-update-baseline needs --rageval-baseline PATH (or ini rageval_baseline)")
                self._fail(session, self.gate_notes[-1])
                self.outcome = GateOutcome(failed=True, reason=self.gate_notes[-1])
            return
        # A folder, or a new path not naming a .json file, gets metrics.json inside.
        is_folder = s.baseline.is_dir() or (not s.baseline.exists() and s.baseline.suffix != ".json")
        target = RunFolder(s.baseline).metrics_path if is_folder else s.baseline
        if s.update_baseline:
            write_json_atomic(target, self.metrics)
            self.gate_notes.append(f"baseline updated: {target}")
            self._keep_baseline_records(target, is_folder)
            m = self.metrics
            if m.get("failed") or m.get("errors"):
                self.gate_notes.append(f"warning: the new baseline has {m.get('failed', 0)} failed and {m.get('errors', 0)} errored cases")
            if m.get("partial"):
                self.gate_notes.append(
                    f"warning: the new baseline covers {m.get('cases_selected')} of the {m.get('cases_in_eval_set')} "
                    "cases of the eval set (a partial run); later runs are compared on the cases it holds"
                )
            return
        try:
            baseline = load_baseline(s.baseline)
        except ValueError as exc:
            self.gate_notes.append(f"baseline refused: {self._public(str(exc))}")
            self._fail(session, self.gate_notes[-1])
            self.outcome = GateOutcome(failed=True, reason=self.gate_notes[-1], refused=True, baseline=str(s.baseline))
            self.metrics["comparison"] = {"baseline": str(s.baseline), "status": "refused", "gate": self.outcome.as_dict()}
            return
        if baseline is None:
            self.gate_notes.append(f"warning: baseline {s.baseline} not found; no regression gate this run")
            return
        comparison = self.comparison = gate_runs(
            baseline,
            self.metrics,
            gate=s.gate,
            significance=s.gate_significance,
            ignore_invariants=s.ignore_invariants,
            min_shared_cases=s.min_shared_cases,
        )
        self.metrics["comparison"] = {"baseline": str(s.baseline), "baseline_run_id": baseline.get("run_id"), **comparison.as_dict()}
        self.baseline = None if comparison.refused else baseline
        verdict = gate_verdict(comparison, allow_regressions=s.allow_regressions)
        _ = self.baseline_cases  # read now: a baseline named by an output folder's `latest` moves to this run next
        self.outcome = GateOutcome(
            comparison, failed=verdict.failed, reason=self._public(verdict.reason), refused=comparison.refused, baseline=str(s.baseline)
        )
        self.metrics["comparison"]["gate"] = self.outcome.as_dict()  # `rageval report` shows the same verdict
        if verdict.note:
            self.gate_notes.append(verdict.note)
        if verdict.failed:
            self._fail(session, verdict.reason)
        self.gate_each_config(session, baseline)

    def gate_each_config(self, session: pytest.Session, baseline: dict[str, Any]) -> None:
        """A matrix run: each config gated against the same config of the baseline (configs.gate_configs)."""
        s = self.settings
        assert self.metrics is not None
        configs = gate_configs(
            baseline,
            self.metrics,
            gate=s.gate,
            significance=s.gate_significance,
            ignore_invariants=s.ignore_invariants,
            allow_regressions=s.allow_regressions,
        )
        if configs is None:
            return
        self.metrics["comparison"]["by_config"] = configs.as_dict()
        if configs.failed and not self.gate_failed:
            self._fail(session, configs.reason())

    def _keep_baseline_records(self, target: Path, is_folder: bool) -> None:
        """A baseline folder gets this run's results.jsonl beside its metrics.json, so later reports can show each
        case's old answer and chunks; a baseline named as a .json file gets nothing else (a note says so)."""
        import shutil

        assert self.writer is not None
        results = target.parent / RunFolder.RESULTS
        if not is_folder:
            self.gate_notes.append(
                f"{target} holds metric values only: later reports show no old answers (name a folder "
                "as --rageval-baseline to keep results.jsonl beside it)"
            )
            return
        try:
            shutil.copyfile(self.writer.results_path, results)
        except OSError as exc:
            self.gate_notes.append(f"baseline answers not kept: cannot write {results}: {exc.strerror or exc}")

    def _fail(self, session: pytest.Session, reason: str) -> None:
        self.gate_failed = True
        self.gate_reason = reason
        if session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


class XdistControllerLink:
    """On the xdist controller: the stop file the workers watch, and what they report beyond test reports."""

    def __init__(self, controller: RunController) -> None:
        self.controller = controller
        self._stop_dir: Path | None = None
        controller.stop_workers = self._stop_workers

    def _stop_file_path(self) -> Path:
        if self._stop_dir is None:
            import tempfile

            remove_orphaned_temp_folders(Path(tempfile.gettempdir()))
            self._stop_dir = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX))
            (self._stop_dir / "owner").write_text(str(os.getpid()))
        return self._stop_dir / "stop"

    def _stop_workers(self) -> None:
        """SIGTERM reaches the controller only: tell the xdist workers to stop too (they watch this file)."""
        if self._stop_dir is not None:
            try:
                self._stop_file_path().touch()
            except OSError:
                pass

    def pytest_configure_node(self, node: Any) -> None:
        """Name the file whose appearance stops a worker waiting for a case."""
        node.workerinput["rageval_stop_file"] = str(self._stop_file_path())
        # the config matrix's retrieval cache, shared by the workers for this run only (removed with the stop file)
        node.workerinput["rageval_retrieval_dir"] = str(self._stop_file_path().parent / "retrieval")

    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """What a worker reports beyond its test reports."""
        controller = self.controller
        output = getattr(node, "workeroutput", {})
        if output.get("rageval_stop"):  # it stopped the session (a refused judge key)
            controller.stop_message = output["rageval_stop"]
        controller.in_order_elsewhere += output.get("rageval_in_order", 0)
        controller.first_calls.extend((str(name), float(ms)) for name, ms in output.get("rageval_first_calls") or ())
        collection = controller.collection
        if output.get("rageval_selection") and not collection.selection.collected:  # every worker collects the same items
            collection.selection = Selection.from_dict(output["rageval_selection"])

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self._stop_dir is not None:
            import shutil

            shutil.rmtree(self._stop_dir, ignore_errors=True)


#: the run-scoped temp folder of an xdist session (the stop file, the retrieval cache), removed at its end
TEMP_PREFIX = "rageval-stop-"


def remove_orphaned_temp_folders(tmp: Path) -> None:
    """Remove the temp folders of sessions whose process is gone (killed with SIGKILL, so never cleaned up)."""
    import shutil

    for folder in tmp.glob(f"{TEMP_PREFIX}*"):
        try:
            pid = int((folder / "owner").read_text())
        except (OSError, ValueError):
            continue  # not ours, or still being made
        if not _alive(pid):
            shutil.rmtree(folder, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: alive
        return True
    return True


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
        for loaded in load_eval_file(file, display=display).cases:
            yield display, loaded.line, loaded.case
