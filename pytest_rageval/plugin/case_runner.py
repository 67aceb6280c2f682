"""The case runner: where eval cases run (a serial session, or an xdist worker).

It owns the RAG client and judge lifetimes, the event loop, the look-ahead that starts the
next cases early, and each case's record on its test report (``report.rageval_case``).
What it learns beyond the reports (a stop, cases run in order) it hands on as ``RunnerTotals``:
to the run controller of the same process, or, on an xdist worker, through ``WorkerLink``
(``config.workeroutput``). It writes no file.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
from collections.abc import Callable, Coroutine, Generator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_rageval.engine.evaluate import Engine, RunOptions, as_rag_client, base_record, evaluate_case
from pytest_rageval.engine.judge_factory import SessionJudge
from pytest_rageval.engine.known_failures import KnownFailures
from pytest_rageval.engine.run_setup import RunSetup
from pytest_rageval.evaluation.record import CaseRecord, Outcome, error
from pytest_rageval.judges.base import JudgeAuthError
from pytest_rageval.judges.cache import JudgeCacheError
from pytest_rageval.judges.judging import JudgeSetup, stopped_answering
from pytest_rageval.report.terminal import escape_longrepr
from pytest_rageval.runs.artifacts import portable_record
from pytest_rageval.sanitize import error_message, terminal_safe
from pytest_rageval.targets.first_call import GatedClient, TargetMismatch
from pytest_rageval.targets.protocol import RagClient, RagConfigError
from pytest_rageval.targets.retrieval_cache import MatrixAsk, RetrievalCache
from pytest_rageval.targets.user_client import safe_describe

from .collect import BadLineItem, CaseItem
from .handwritten import EvaluateError, SessionClient, record_outcomes
from .progress import LiveProgress
from .schedule import NOTHING, Lookahead, cached_fixture, is_own_fixture, runs_conftest_setup, skipped_by_marks

if TYPE_CHECKING:
    from .collect import EvalCollection

handwritten_key = pytest.StashKey[list[CaseRecord]]()


@dataclass
class RunnerTotals:
    """What one runner tells the controller beyond its test reports."""

    stop_message: str | None = None  # it stopped the session (a refused judge key, a damaged cache)
    in_order: int = 0  # cases not started ahead: conftest code runs at their setup
    done: int = 0  # items whose protocol finished
    first_calls: tuple[tuple[str, float], ...] = ()  # (target, ms) of each target's first call, which went out alone
    judges_stopped: tuple[tuple[str, int], ...] = ()  # (endpoint, verdicts) of each judge that stopped answering


class CaseRunner:
    """Runs each eval-set item's case and puts its record on the item's report."""

    def __init__(
        self,
        config: pytest.Config,
        setup: RunSetup,
        *,
        stop_file: Path | None = None,
        lookahead: type[Lookahead] = Lookahead,
        live_progress: bool = True,
        retrieval_dir: Path | None = None,
    ) -> None:
        self.config = config
        self.setup = setup
        self.settings = setup.settings
        self.stop_file = stop_file  # an xdist worker: the controller creates it when SIGTERM stops the session
        self.lookahead_kind = lookahead  # WorkerLookahead on an xdist worker
        s = self.settings
        self.opts = RunOptions(
            k=s.k, require_snippets=s.require_snippets, store_full_text=s.store_full_text, limits=s.limits
        )
        self._engine: Engine | None = None
        self._session_client: SessionClient | None = None
        self._around: dict[
            int, tuple[Any, SessionClient]
        ] = {}  # a conftest fixture's target -> (it, its session client)
        self._started: dict[str, concurrent.futures.Future[CaseRecord]] = {}
        self._done = bytearray()  # per place in the session's list: 1 once that item's protocol finished
        self._done_elsewhere: set[str] = set()  # node ids of finished items that are not in the list
        self._done_count = 0
        self._lookahead: Lookahead | None = None
        self._progress: LiveProgress | None = None
        self._progress_due = live_progress  # made at the first case; never on an xdist worker (no terminal of its own)
        self.in_order: set[str] = set()
        self.current_item: pytest.Item | None = None
        self.session: pytest.Session | None = None
        self.stop_message: str | None = None
        self.on_stop: Callable[[str], None] = lambda message: None  # WorkerLink tells the xdist controller
        self.retrieval = RetrievalCache(
            retrieval_dir
        )  # the config matrix's requests, shared (xdist: a run-scoped folder)
        self._depths: dict[str, tuple[int, int]] = {}
        self._gates: dict[
            int, GatedClient
        ] = {}  # id of a target's client -> its gate (the clients live for the session)
        self.known = KnownFailures(s, setup.judge_info())  # the baseline's failures, read at the first case

    def totals(self) -> RunnerTotals:
        first = tuple(
            (gate.name, gate.first_latency_ms) for gate in self._gates.values() if gate.first_latency_ms is not None
        )
        setups = (self.setup.judge_setup, self.setup.spot_setup)
        stopped = tuple(
            found for setup in setups if setup is not None and (found := stopped_answering(setup.judge)) is not None
        )
        return RunnerTotals(
            stop_message=self.stop_message,
            in_order=len(self.in_order),
            done=self._done_count,
            first_calls=first,
            judges_stopped=stopped,
        )

    # -- clients and judge -------------------------------------------------

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            self._engine = Engine(self.settings.concurrency, stop_file=self.stop_file)
        return self._engine

    def session_client(self, judge: Any = NOTHING) -> SessionClient:
        """What the ``rageval_client`` fixture returns; ``judge`` is the ``rageval_judge`` fixture's value."""
        if self._session_client is None:
            problem = None
            try:
                self._session_client = SessionClient(self.setup.target_client(), runner=self)
            except (RagConfigError, ValueError) as exc:
                problem = str(exc)
            if problem is not None:
                pytest.fail(f"pytest-rageval: {problem}", pytrace=False)  # outside `except`: no chained traceback
        assert self._session_client is not None
        if judge is not NOTHING:
            self._session_client.judge = self.judge_for(judge)
        return self._session_client

    def session_judge(self) -> SessionJudge | None:
        """What the ``rageval_judge`` fixture returns."""
        setup = self.setup.judge_setup
        return SessionJudge(setup, self.engine.run) if setup else None

    @pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        """A hand-written test that requests ``rageval_judge``, or ``rageval_client`` in a run with a judge (its
        ``evaluate`` judges), carries the ``judge`` marker, so ``-m "not judge"`` deselects it."""
        judged = self.setup.judge_setup is not None
        for item in items:
            if isinstance(item, (CaseItem, BadLineItem)) or item.get_closest_marker("judge") is not None:
                continue
            info = getattr(item, "_fixtureinfo", None)
            requested = set(getattr(info, "argnames", ()) or ())
            if "rageval_judge" in requested or (judged and "rageval_client" in requested):
                item.add_marker("judge")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_fixture_setup(self, fixturedef: Any, request: Any) -> Generator[None, Any, None]:
        """A conftest ``rageval_client`` fixture supplies the target (a URL, a callable, a framework object, a
        client): tests get the session client around it, with ``ask`` and ``evaluate``, as eval-set cases use it."""
        outcome = yield
        if fixturedef.argname != "rageval_client" or outcome.excinfo is not None:
            return
        value = outcome.get_result()
        if isinstance(value, SessionClient) or fixturedef.cached_result is None:
            return
        kept = self._around.get(id(value))
        if kept is None or kept[0] is not value:
            try:
                client = self.setup.fixture_target_client(value)
            except (RagConfigError, ValueError):
                return  # left as it is: each case using it says why (as_rag_client)
            kept = self._around[id(value)] = (value, SessionClient(client, runner=self))
        wrapped = kept[1]
        wrapped.judge = self.judge_for(request.getfixturevalue("rageval_judge"))
        outcome.force_result(wrapped)
        fixturedef.cached_result = (wrapped, *fixturedef.cached_result[1:])

    def judge_for(self, fixture_value: Any) -> JudgeSetup | None:
        """The judge setup behind the ``rageval_judge`` fixture's value (which a conftest may override)."""
        if fixture_value is None:
            return None
        if isinstance(fixture_value, SessionJudge):
            return fixture_value.setup
        return JudgeSetup(fixture_value, self.settings.judge_metrics)

    def evaluate(self, work: concurrent.futures.Future[CaseRecord] | Coroutine[Any, Any, Any]) -> Any:
        """Wait for one case's future (or run its coroutine); a refused judge key stops the session once."""
        try:
            return self.engine.wait(work) if isinstance(work, concurrent.futures.Future) else self.engine.run(work)
        except JudgeAuthError as exc:
            message = terminal_safe(f"pytest-rageval: {exc.message}")  # the judge server's words may be in it
        except JudgeCacheError as exc:  # damaged after the start-up check: stop once, not an error per case
            message = terminal_safe(f"pytest-rageval: {exc}")
        except TargetMismatch as exc:  # the target cannot be called as targets are: one usage error, not one per case
            message = terminal_safe(f"pytest-rageval: {exc.message}")
        self.stop_message = message
        self.on_stop(message)
        pytest.exit(message, returncode=pytest.ExitCode.USAGE_ERROR)

    # -- running cases -------------------------------------------------------

    def run_case(self, item: CaseItem) -> CaseRecord:
        """The record of one eval-set item: its prefetched result, else run now with its fixtures."""
        future = self._started.pop(item.nodeid, None)
        if future is None:
            try:
                client = as_rag_client(item.funcargs["rageval_client"])
            except TypeError as exc:
                pytest.fail(str(exc), pytrace=False)
            judge = self.judge_for(item.funcargs["rageval_judge"])
            future = self.engine.submit(self._case_coro(item, client, judge), order=self._case_order(item))
        progress = self._live_progress(item.session)
        if progress is not None:  # say the cases that finish while this one is awaited
            progress.wait(item.nodeid, future, self._started)
        record: CaseRecord = self.evaluate(future)
        self.known.mark(record)  # a known failure, one that got worse, or fixed (against the baseline)
        return record

    def _live_progress(self, session: pytest.Session) -> LiveProgress | None:
        if self._progress_due:
            self._progress_due = False
            total = sum(1 for i in session.items if isinstance(i, CaseItem))
            self._progress = LiveProgress.for_session(self.config, total, self.settings.concurrency)
        return self._progress

    def handwritten_keys(self, item: pytest.Item | None) -> set[str]:
        """The keys of the cases ``item`` (a hand-written test) evaluated so far."""
        return {record["key"] for record in item.stash.get(handwritten_key, [])} if item is not None else set()

    def evaluate_handwritten(self, coro: Coroutine[Any, Any, CaseRecord]) -> CaseRecord:
        """Run a hand-written test's ``evaluate`` and keep its record for the test's report."""
        record: CaseRecord = self.evaluate(coro)
        item = self.current_item
        if item is not None:
            item.stash.setdefault(handwritten_key, []).append(record)
        return record

    def _case_order(self, item: pytest.Item) -> int:
        """The item's collection index: judge requests of earlier cases are served first."""
        return self._lookahead_for(item.session).order(item)

    def _is_done(self, place: int, item: pytest.Item) -> bool:
        return bool(self._done[place]) if place < len(self._done) else item.nodeid in self._done_elsewhere

    def _mark_done(self, item: pytest.Item) -> None:
        lookahead = self._lookahead_for(item.session)
        place = lookahead.index(item)
        if len(self._done) != len(lookahead.items):
            self._done = bytearray(len(lookahead.items))
        if place is None:
            if item.nodeid not in self._done_elsewhere:
                self._done_elsewhere.add(item.nodeid)
                self._done_count += 1
        elif not self._done[place]:
            self._done[place] = 1
            self._done_count += 1

    def _lookahead_for(self, session: pytest.Session) -> Lookahead:
        if self._lookahead is None:
            self._lookahead = self.lookahead_kind(self.config, session.items)
        return self._lookahead

    def _gated(self, client: RagClient) -> RagClient:
        """``client`` with its first call alone and its calls in flight capped (first_call), one gate per client."""
        gate = self._gates.get(id(client))
        if gate is None:
            described = safe_describe(client, "the target")
            name = str(described.get("callable") or described.get("url") or described.get("name") or "the target")
            gate = self._gates[id(client)] = GatedClient(
                client,
                limiter=self.setup.limits.target(name),
                name=name,
                stop_on_mismatch=described.get("kind") == "callable",
                timeout=self.settings.timeout,
            )
        return gate

    def _case_coro(
        self, item: CaseItem, client: RagClient, judge: JudgeSetup | None
    ) -> Coroutine[Any, Any, CaseRecord]:
        opts, params = self.opts, None
        client = self._gated(client)
        if item.matrix_config is not None:
            client, opts, params = self._matrix_ask(item, client)
        coro = evaluate_case(
            item.case,
            client,
            opts,
            self.setup.thresholds_for(item.case),
            key=item.nodeid,
            file=item.nodeid.partition("::")[0],
            line=item.line,
            judge=None if item.case.judge is False else judge,
            spot_input=self.setup.spot_checked and item.case.judge is not False,
            repeat=self.settings.repeat,
            params=params,
            resolve=self.setup.thresholds_for,
        )
        return coro if item.matrix_config is None else _with_config(coro, item)

    def _matrix_ask(self, item: CaseItem, client: RagClient) -> tuple[RagClient, RunOptions, dict[str, Any]]:
        """A config item's client (its target's, through the retrieval cache), its k, and the params it sends."""
        config, matrix = item.matrix_config, self.settings.matrix
        assert config is not None and matrix is not None
        target = config.target
        if target is not None:
            client = self._gated(self.setup.client_for(target))
        depth_name = next((name for name in matrix.names if name in ("k", "top_k")), None)
        if config.id not in self._depths:  # (depth asked, items one request serves), once per config
            self._depths[config.id] = (matrix.ask_depth(config, self.settings.k), matrix.group_size(config))
        depth, users = self._depths[config.id]
        ask = MatrixAsk(
            client,
            self.retrieval,
            target=target or self.settings.target or "rageval_client fixture",
            depth=depth,
            slice_k=matrix.slice_k,
            depth_name=depth_name,
            users=users,
        )
        opts = dataclasses.replace(self.opts, k=config.k or self.settings.k)
        return ask, opts, {**item.case.params, **config.sent_params()}

    def _early_fixtures(self, item: CaseItem) -> tuple[RagClient, JudgeSetup | None] | None:
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

    def prefetch(self, session: pytest.Session, item: pytest.Item, nextitem: pytest.Item | None) -> None:
        """Start the cases of the next ``2 x concurrency`` items (the engine runs ``concurrency`` at a time)."""
        if self.settings.concurrency <= 1:
            return
        for place, upcoming in self._lookahead_for(session).upcoming(item, nextitem, 2 * self.settings.concurrency):
            if (
                not isinstance(upcoming, CaseItem)
                or upcoming.nodeid in self._started
                or self._is_done(place, upcoming)
                or upcoming.nodeid in self.in_order
            ):
                continue
            if skipped_by_marks(upcoming):
                continue
            if runs_conftest_setup(upcoming):
                self.in_order.add(upcoming.nodeid)
                continue
            fixtures = self._early_fixtures(upcoming)
            if fixtures is None:
                continue
            self._started[upcoming.nodeid] = self.engine.submit(self._case_coro(upcoming, *fixtures), order=place)

    # -- hooks ------------------------------------------------------------------

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.session = session

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> Any:
        self.current_item = item
        self.prefetch(item.session, item, nextitem)
        try:
            yield
        finally:
            self.current_item = None
            self._mark_done(item)
            interrupted = self._interrupted()
            if interrupted is not None:  # after the case's report: its record is kept, the run folder written
                item.session.shouldstop = terminal_safe(f"pytest-rageval: {interrupted}")
            if self._progress is not None and isinstance(item, CaseItem):
                self._progress.done(item.nodeid)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
        outcome = yield
        report: pytest.TestReport = outcome.get_result()
        if not (report.when == "call" or (report.when == "setup" and not report.passed)):
            return
        state = _outcome(report)
        if isinstance(item, CaseItem):
            record = item.record or _config_fields(
                base_record(item.case, key=item.nodeid, file=item.nodeid.partition("::")[0], line=item.line), item
            )
            if record.get("error"):  # the RAG or judge call failed: an error in metrics.json, even under xfail
                state = "error"
            record["outcome"] = state
            if state == "error" and not record.get("error"):
                record["error"] = error("other", _longrepr_line(report, call))
            if report.failed:  # a traceback's text may come from outside too (an exception quoting a server)
                report.longrepr = escape_longrepr(report.longrepr)
            report.rageval_case = record  # type: ignore[attr-defined]
            item.release()  # the report carries the record from here on, and the record what the run needs of the case
            if self.config.getoption("xmlpath", None):  # JUnit XML asked for: metrics as properties
                item.user_properties.extend((f"rageval.{n}", v) for n, v in record["metrics"].items() if v is not None)
        elif isinstance(item, BadLineItem):
            report.rageval_case = {  # type: ignore[attr-defined]
                "key": item.nodeid,
                "file": item.nodeid.partition("::")[0],
                "line": item.line,
                "invalid_line": True,
                "outcome": "error",
                "error": error("invalid_line", item.message),
            }
        else:
            records = item.stash.get(handwritten_key, [])
            if call.excinfo is not None and isinstance(call.excinfo.value, EvaluateError) and report.failed:
                # the case's call failed: an error (E), as an eval-set case's would be. pytest, its JUnit XML and
                # pytest-html tell an error from a failure by the phase alone (a failed setup or teardown is an
                # error), so the report says setup: every count then agrees (errors=, <error>, "1 error")
                state = "error"
                report.when = "setup"
                report.longrepr = terminal_safe(str(call.excinfo.value))
            record_outcomes(records, state)
            if records:
                report.rageval_records = records  # type: ignore[attr-defined]

    def _interrupted(self) -> str | None:
        """Why a client of the user's own stopped the session (its ``aask`` raised KeyboardInterrupt), if one did."""
        clients = [gate.inner for gate in self._gates.values()] + [kept[1].rag_client for kept in self._around.values()]
        return next((found for client in clients if (found := getattr(client, "interrupted", None))), None)

    def pytest_keyboard_interrupt(self, excinfo: Any) -> None:
        """Ctrl-C or SIGTERM between waits: nothing more is sent for the cases started ahead."""
        if self._engine is not None:
            self._engine.cancel_all()

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self.finish()

    def finish(self) -> RunnerTotals:
        """Close the clients and judges on the loop that made them, then the loop (once); the totals."""
        if self._engine is None:
            return self.totals()
        closers = [client.aclose for client in self.setup.made_clients]
        for setup in (self.setup.judge_setup, self.setup.spot_setup):
            if setup is not None:
                closers.append(setup.judge.aclose)
        self._engine.close(*closers)
        self._engine = None
        return self.totals()


class WorkerLink:
    """On an xdist worker: records sent in written form, and the runner's totals and selection in ``workeroutput``."""

    def __init__(self, config: pytest.Config, runner: CaseRunner, collection: EvalCollection) -> None:
        self.config = config
        self.runner = runner
        self.collection = collection
        runner.on_stop = self._stopping

    def _stopping(self, message: str) -> None:
        """xdist takes a worker that exits without saying it should stop for a crash."""
        if self.runner.session is not None:
            self.runner.session.shouldstop = message

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
        """Outermost, so after the runner's: execnet refuses what JSON would (a lone surrogate)."""
        outcome = yield
        report = outcome.get_result()
        if hasattr(report, "rageval_case"):
            report.rageval_case = portable_record(report.rageval_case)
        if hasattr(report, "rageval_records"):
            report.rageval_records = [portable_record(r) for r in report.rageval_records]

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """xdist's wrapper sends ``workeroutput`` once every plain ``pytest_sessionfinish`` has run."""
        output = self.config.workeroutput  # type: ignore[attr-defined]
        totals = self.runner.totals()
        output["rageval_in_order"] = totals.in_order
        output["rageval_first_calls"] = [list(pair) for pair in totals.first_calls]
        output["rageval_judges_stopped"] = [list(pair) for pair in totals.judges_stopped]
        if totals.stop_message:
            output["rageval_stop"] = totals.stop_message
        output["rageval_selection"] = self.collection.selection.as_dict()
        # what this worker's own limiters did (a shared limit's figures are the controller's already)
        output["rageval_flow"] = [
            [name, dataclasses.asdict(stats)] for name, stats in self.runner.setup.limits.own_stats()
        ]


def _config_fields(record: CaseRecord, item: CaseItem) -> CaseRecord:
    """A config item's record names its config: ``matrix`` (the params) and ``config_id``."""
    if item.matrix_config is not None:
        record["matrix"] = item.matrix_config.as_dict()
        record["config_id"] = item.matrix_config.id
    return record


async def _with_config(coro: Coroutine[Any, Any, CaseRecord], item: CaseItem) -> CaseRecord:
    return _config_fields(await coro, item)


def _outcome(report: pytest.TestReport) -> Outcome:
    if hasattr(report, "wasxfail"):
        return "xfailed" if report.skipped else "xpassed"
    if report.when == "setup":
        return "skipped" if report.skipped else "error"
    return report.outcome


def _longrepr_line(report: pytest.TestReport, call: pytest.CallInfo[None] | None = None) -> str:
    """One line saying why an item errored: ``Type: message`` of its exception, never only ``file.py:N``."""
    if call is not None and call.excinfo is not None and not isinstance(call.excinfo.value, pytest.fail.Exception):
        return error_message(call.excinfo.value)
    text = str(report.longrepr or "").strip()
    return text.splitlines()[-1] if text else "error"
