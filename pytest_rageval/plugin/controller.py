"""The run controller: where results are kept (a serial session, or the xdist controller).

``RunController`` is the pytest plugin object; its hooks orchestrate the parts that do the work:

- before any case: run_folder_setup.py (the run folder checked; a resumed run locked, checked and mended) and
  preflight.py (the header, the judge check, the dry run, unreachable gold);
- each case's record: intake.py (results.jsonl, the aggregates, the spot check's sample);
- at the end: spot_check.py, gating.py (the baseline gate, each config's, updating the baseline) and writing.py
  (metrics.json, config.json, report.html, the CI summary); the terminal summary; a late SIGTERM noted.

It runs no case: the case runner does (case_runner.py). Under xdist, ``XdistControllerLink`` (xdist_link.py)
adds what the workers report beyond their test reports.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_rageval.engine import signals
from pytest_rageval.engine.canary_check import canary_check
from pytest_rageval.engine.endpoint_limits import flow_notes
from pytest_rageval.engine.gating import gate_run
from pytest_rageval.engine.intake import Intake
from pytest_rageval.engine.run_setup import RunSetup
from pytest_rageval.engine.spot_check import spot_check
from pytest_rageval.engine.writing import config_json, metrics_json, write_ci_summaries, write_report_html
from pytest_rageval.evaluation.selection import Selection
from pytest_rageval.flow import FlowStats
from pytest_rageval.gate.configs import add_ranking
from pytest_rageval.redact import public_url, scrub_urls
from pytest_rageval.report.session_verdict import SessionVerdict, session_verdict
from pytest_rageval.runs.artifacts import case_config, config_hash, file_digests, new_run_id, why_not_latest
from pytest_rageval.runs.commit import run_commit
from pytest_rageval.runs.crashes import crash_message, crash_record
from pytest_rageval.runs.folder import RunFolder, RunFolderError
from pytest_rageval.runs.user_fields import USER_KEY, UserFieldsError

from . import compat
from .extension_hooks import run_fields
from .preflight import check_judge, dry_run_lines, header_lines, unreachable_gold_lines, what_serves
from .run_folder_setup import PreparedRunFolder, prepare_run_folder, run_identity

if TYPE_CHECKING:
    from pytest_rageval.gate.compare import Comparison
    from pytest_rageval.report.baseline import BaselineCases, GateOutcome

    from .case_runner import RunnerTotals
    from .collect import EvalCollection

#: The run controller where results are kept (a serial session, the xdist controller); set by session.py
#: (the idiom of pytest's junitxml.py ``xml_key``).
controller_key: pytest.StashKey[RunController] = pytest.StashKey()


class RunController:
    """State of the run being recorded: the run folder, the aggregates, the gate."""

    def __init__(
        self,
        config: pytest.Config,
        setup: RunSetup,
        collection: EvalCollection,
        finish_runner: Callable[[], RunnerTotals] | None = None,
    ) -> None:
        self.config = config
        self.setup = setup
        self.settings = setup.settings
        self.collection = collection
        self.finish_runner = finish_runner  # the case runner of this process (a serial session), if any
        self.intake = Intake(
            spot_check=self.settings.spot_check,
            keep_keys=True,  # a run is complete only with one record per selected case
            on_write_error=self._stop_writing,
        )
        self.digests: dict[str, str] = {}
        self.writer: RunFolder | None = None
        self.metrics: dict[str, Any] | None = None
        self.comparison: Comparison | None = None
        self.baseline: dict[str, Any] | None = None  # the compared baseline's metrics.json: trend charts draw it
        self.outcome: GateOutcome | None = None  # the gate's outcome as the reports show it (None: not gated)
        self.gate_notes: list[str] = []
        self.user_fields: dict[str, Any] | None = None  # the pytest_rageval_run_fields hook's section
        self.gate_failed = False
        self.gate_reason = ""  # the session's last line when the gate failed
        self.stop_message: str | None = None  # why the session stopped (a worker's refused judge key, a full disk)
        self.in_order_elsewhere = 0  # cases run in order, counted by xdist workers
        self.first_calls: list[tuple[str, float]] = []  # (target, ms) of each process's first call of a target
        self.judges_stopped: list[
            tuple[str, int]
        ] = []  # (endpoint, verdicts) of each xdist worker's judge that stopped answering
        #: what each endpoint's limit did: the xdist workers' shared limits (xdist_link), else this process's own
        self.flow_stats: Callable[[], list[tuple[str, FlowStats]]] = setup.limits.stats
        self.session: pytest.Session | None = None
        self.prepared = PreparedRunFolder()  # the run folder as checked before any case (a resume's records, lock)
        self._previous_sigterm: Any = None
        self.late_sigterm = False  # a SIGTERM came while the run was being written (it ends as interrupted)
        self.stop_workers: Callable[[], None] = lambda: None  # XdistControllerLink sets it
        self.crashed: list[str] = []  # the node ids an xdist worker died running (crashes.py)

    @property
    def report_path(self) -> Path | None:
        """Where report.html is written (None before the run folder is known)."""
        return self.writer.report_path if self.writer is not None else None

    @property
    def selection(self) -> Selection:
        return self.collection.selection

    @property
    def resumed(self) -> list[dict[str, Any]]:
        """A resumed run's records as read back (readers give plain dicts); none for a new run."""
        return self.prepared.resumed

    # -- before any case ------------------------------------------------------

    def prepare_run_folder(self) -> None:
        """Before any case: the output folder must be writable; a resumed run is locked, made with this
        configuration and selection, and its results.jsonl mended. Each refusal is one usage error."""
        self.prepared = prepare_run_folder(self.config, self.settings)
        self.gate_notes.extend(self.prepared.notes)

    def release_resume_lock(self) -> None:
        self.prepared.release()

    @functools.cached_property
    def served_by(self) -> dict[str, str | None]:
        """What serves the eval-set cases (preflight.what_serves)."""
        return what_serves(self.config, self.setup)

    # -- hooks ----------------------------------------------------------------

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        return header_lines(self.setup, self.served_by)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if self.settings.dry_run:
            self._write_lines("rageval dry run", dry_run_lines(self.setup, session.items))
            pytest.exit("rageval dry run: nothing was sent", returncode=pytest.ExitCode.OK)

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.session = session
        s = self.settings
        if s.dry_run or self.config.option.collectonly:
            return
        if s.judge_check:
            self.gate_notes.extend(check_judge(self.setup))
        if s.resume is not None:
            self.writer = RunFolder(s.resume, config=self.build_config)
        else:
            self.writer = RunFolder.new(s.output_dir, new_run_id(), config=self.build_config)
        self.intake.start(
            self.writer, case_config(k=s.k, config_hash=config_hash(s.snapshot()), judge=self.setup.judge_info())
        )
        for record in self.resumed:
            self.intake.accept(record, write=False)
        self._previous_sigterm = signals.interrupt_on_sigterm(lambda: self.stop_workers())
        lines = unreachable_gold_lines(self.config, self.setup, self.served_by)
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            for line in lines:
                reporter.write_line(line, yellow=True)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.writer is not None:
            self.intake.take(report)

    @pytest.hookimpl(optionalhook=True)  # pytest-xdist's: a worker died running ``crashitem``
    def pytest_handlecrashitem(self, crashitem: str, report: pytest.TestReport, sched: Any) -> None:
        """The case an xdist worker died running gets a record saying so (the report comes next); the run is
        incomplete, so it updates no baseline."""
        gateway = getattr(getattr(report, "node", None), "gateway", None)
        worker = str(getattr(gateway, "id", "?"))
        self.crashed.append(crashitem)
        self.gate_notes.append(self._public(crash_message(worker, crashitem)))
        record = crash_record(crashitem, worker)
        report.when = "setup"  # xdist's "???": pytest, its JUnit XML and pytest-html count an error, as metrics.json
        if record is not None:
            report.rageval_case = record  # type: ignore[attr-defined]

    def _stop_writing(self, message: str) -> None:
        """results.jsonl could not be written (disk full): the session stops here, once, not as an INTERNALERROR."""
        self.stop_message = self.stop_message or message
        self.gate_notes.append(message.removeprefix("pytest-rageval: "))
        if self.session is not None:
            self.session.shouldstop = message

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
        self.gate_notes.extend(runner_notes(first_calls, in_order))
        self.gate_notes.extend(
            stopped_notes(self.judges_stopped + list(totals.judges_stopped if totals is not None else ()))
        )
        self.gate_notes.extend(self._public(line) for line in flow_notes(self.flow_stats()))
        if self.stop_message:  # the same exit status as a serial run that stopped on it
            session.exitstatus = pytest.ExitCode.USAGE_ERROR
        if not self.intake.accepted and self.settings.resume is None:
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
            and not self.crashed
            and self.intake.one_record_per_selected_case(self.selection)  # no case lost (a worker that died)
        )
        self.metrics = self.build_metrics(complete)
        add_ranking(self.metrics, self.settings.rank_by)  # a config matrix: its configs ranked
        self.add_user_fields(session)
        self.gate(session)  # before writing: metrics.json carries the comparison
        self.metrics["session"] = self.verdict(session).as_dict()  # report.html and the CI summary state it
        kept = why_not_latest(self.metrics, whole_share=self.selection.whole_share)
        if kept:
            self.gate_notes.append(f"{self.settings.output_dir / RunFolder.LATEST} not moved: {kept}")
        try:
            self.writer.finish(self.metrics, self.build_config(), move_latest=kept is None)
            self.write_html()
        except OSError as exc:
            self.gate_notes.append(
                f"the run folder is not complete: cannot write in {self.writer.run_dir}: {exc.strerror or exc}"
            )
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
        if reporter is None or self.metrics is None:
            return
        verdict = self.verdict(session)
        reporter.write_sep("=", f"rageval {verdict.line}", red=not verdict.passed, green=verdict.passed, bold=True)

    def verdict(self, session: pytest.Session) -> SessionVerdict:
        """The session's one verdict (its exit status now, and its parts): the last line, the CI summary's
        headline and report.html's header say it."""
        assert self.metrics is not None
        if self.gate_failed:  # the gate, or a config of a matrix against its baseline
            kind = "refused" if self.outcome is not None and self.outcome.refused else "failed"
        else:
            kind = self.outcome.kind if self.outcome is not None else "not gated"
        allowed = self.settings.known_failures == "allow"
        return session_verdict(
            self.metrics, int(session.exitstatus), kind, self._public(self.gate_reason), known=allowed
        )

    def _defer_sigterm(self) -> None:
        """SIGTERM from now on is noted (``late_sigterm``), not raised: the run folder and summary are finished."""
        if self._previous_sigterm is None:
            return

        def note() -> None:
            self.late_sigterm = True

        signals.note_sigterm(note)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        self._summary(terminalreporter)
        if self.late_sigterm and self.session is not None:
            terminalreporter.write_line(
                "rageval: SIGTERM arrived after the last case: the run was written and summed up first; the session ends as interrupted",
                yellow=True,
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
        for line, markup in styled_summary_lines(
            self.metrics, self.settings, self.comparison, self.gate_notes, self.writer.run_dir
        ):
            terminalreporter.write_line(line, **markup)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self.release_resume_lock()
        signals.restore_sigterm(self._previous_sigterm)
        self._previous_sigterm = None

    def _write_lines(self, title: str, lines: list[str]) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_sep("=", title)
            for line in lines:
                reporter.write_line(line)

    # -- the end of the run ---------------------------------------------------------

    @functools.cached_property
    def commit(self) -> str | None:
        """The run's source commit (commit.run_commit), asked once: config.json is written twice."""
        return run_commit(self.settings.rootdir, os.environ)

    def build_metrics(self, complete: bool) -> dict[str, Any]:
        """metrics.json: the aggregates (with the spot check's ``judge_reliability``) and the run's identity."""
        s = self.settings
        intake = self.intake
        result = intake.aggregator.result()
        if self.setup.spot_setup is not None:
            reliability, notes = spot_check(
                self.setup, intake.spot_sample, result["aggregate_metrics"], complete=complete
            )
            self.gate_notes.extend(notes)
            result["aggregate_metrics"]["judge_reliability"] = reliability
        canary, notes = canary_check(self.setup, result["aggregate_metrics"], complete=complete)
        self.gate_notes.extend(notes)
        assert self.writer is not None
        self.digests = file_digests(intake.eval_files | set(self.selection.collected), s.rootdir)
        metrics = metrics_json(
            self.setup,
            result,
            run_id=self.writer.run_id,
            complete=complete,
            config_hash=config_hash(s.snapshot()),
            digests=self.digests,
            selection=self.selection,
            served=self.served_by,
            commit=self.commit,
        )
        if canary is not None:
            metrics["judge_canary"] = canary
        return metrics

    def add_user_fields(self, session: pytest.Session) -> None:
        """metrics.json's (and config.json's) ``user`` section: what the ``pytest_rageval_run_fields`` hook returns,
        known secrets masked. A mistake is a note and exit status 4; the run is written without the section."""
        assert self.metrics is not None
        try:
            fields = run_fields(self.config, self.metrics)
        except UserFieldsError as exc:
            self.gate_notes.append(self._public(f"pytest-rageval: {exc}"))
            session.exitstatus = pytest.ExitCode.USAGE_ERROR
            return
        if fields:
            self.user_fields = self.settings.redactor(os.environ).mask_data(fields)
            self.metrics[USER_KEY] = self.user_fields

    def build_config(self) -> dict[str, Any]:
        """config.json (the run folder writes it with the first record too; the last time with the user section)."""
        if self.user_fields is not None:
            return {**self._config_json(), USER_KEY: self.user_fields}
        return self._config_json()

    def _config_json(self) -> dict[str, Any]:
        return config_json(
            self.setup,
            args=self.config.invocation_params.args,
            pytest_version=pytest.__version__,
            identity=run_identity(self.config, self.settings),
            run_id=self.writer.run_id if self.writer else None,
            eval_set_hash=self.metrics["eval_set_hash"] if self.metrics else None,
            digests=self.digests,
            served=self.served_by,
            commit=self.commit,
        )

    @functools.cached_property
    def baseline_cases(self) -> BaselineCases | None:
        """The baseline's cases (metrics.json ``cases``, its results.jsonl when beside it) for the "Since baseline"
        sections of report.html and pytest-html; None without a baseline to compare (or when updating it)."""
        from pytest_rageval.report.baseline import BaselineCases

        s = self.settings
        return None if s.baseline is None or s.update_baseline else BaselineCases.load(s.baseline)

    def gate(self, session: pytest.Session) -> None:
        """Compare with the baseline, or write it (gating.gate_run); fail the session unless the gate passed."""
        assert self.metrics is not None and self.writer is not None
        gated = gate_run(self.settings, self.metrics, results=self.writer.results_path, public=self._public)
        self.comparison, self.baseline, self.outcome = gated.comparison, gated.baseline, gated.outcome
        self.gate_notes.extend(gated.notes)
        if gated.comparison is not None:
            _ = self.baseline_cases  # read now: a baseline named by an output folder's `latest` moves to this run next
        if gated.failure is not None:
            self._fail(session, gated.failure)

    def write_html(self) -> None:
        assert self.writer is not None and self.metrics is not None
        write_report_html(
            self.writer,
            self.metrics,
            output_dir=self.settings.output_dir,
            comparison=self.comparison,
            outcome=self.outcome,
            baseline_cases=lambda: self.baseline_cases,
            baseline=self.baseline,
            notes=self.gate_notes,
            public=self._public,
        )

    def write_summaries(self) -> None:
        """The CI summary (writing.write_ci_summaries); a failed write is a note, not a failure."""
        assert self.writer is not None and self.metrics is not None
        write_ci_summaries(
            self.setup,
            self.writer,
            self.metrics,
            comparison=self.comparison,
            gate_failed=self.gate_failed,
            gate_reason=self.gate_reason,
            notes=self.gate_notes,
            cwd=Path(str(self.config.invocation_params.dir)),
            public=self._public,
        )

    def _public(self, text: str) -> str:
        """``text`` with URL credentials and known secrets masked (a hostile baseline may hold either)."""
        return self.settings.redactor(os.environ).mask(scrub_urls(text))

    def _fail(self, session: pytest.Session, reason: str) -> None:
        self.gate_failed = True
        self.gate_reason = reason
        if session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


def stopped_notes(stopped: list[tuple[str, int]]) -> list[str]:
    """One line per judge endpoint that stopped answering, with the verdicts it gave (every process's summed)."""
    verdicts: dict[str, int] = {}
    for url, n in stopped:
        verdicts[url] = verdicts.get(url, 0) + n
    return [
        f"the judge at {url} stopped answering after {n} verdict{'s' if n != 1 else ''}: the cases judged after that are errors"
        for url, n in sorted(verdicts.items())
    ]


def runner_notes(first_calls: list[tuple[str, float]], in_order: int) -> list[str]:
    """What the case runners report for the summary: each target's first calls (sent alone), the cases run in order."""
    notes = []
    for name in sorted({name for name, _ in first_calls}):
        times = ", ".join(f"{ms:,.0f} ms" for n, ms in first_calls if n == name)
        notes.append(f"first call of {public_url(name)}: {times} (it went out alone, the other cases waited for it)")
    if in_order:
        notes.append(
            f"{in_order} case{'s' if in_order != 1 else ''} ran one at a time: conftest code (a pytest_runtest_setup "
            "hook or a fixture) runs at their setup and may skip them, so nothing is sent for them ahead of it"
        )
    return notes
