"""The eval-set file collector, its items, and the collection hooks of a ``--rageval`` session.

A good line becomes a ``CaseItem`` (a ``pytest.Function``, so it gets fixtures
like any test); a bad line becomes a ``BadLineItem`` that errors with the
file, line, field and problem. Case work happens in ``setup`` so that a RAG or
judge failure is an error (E); ``runtest`` only applies thresholds, so a
quality miss is a failure (F).
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import pytest

from pytest_rageval.engine.evaluate import NO_REL_PATH
from pytest_rageval.errors import RagevalWarning
from pytest_rageval.evaluation.evalpaths import expand_globs, loop_problem, loop_target, real_path
from pytest_rageval.evaluation.evalset import BadLine, gc_paused, iter_eval_file, parse_line
from pytest_rageval.evaluation.matrix import MatrixConfig, rewrite_keyword_expression
from pytest_rageval.evaluation.record import CaseRecord
from pytest_rageval.evaluation.schema import EvalCase, definition_hash
from pytest_rageval.evaluation.selection import Selection
from pytest_rageval.evaluation.thresholds import ThresholdError, check_metric_name, coerce_threshold

from . import compat
from .schedule import in_shard

if TYPE_CHECKING:
    from pytest_rageval.engine.run_setup import RunSetup


class CaseRunning(Protocol):
    """What ``CaseItem.setup`` asks of the case runner (case_runner.py's ``CaseRunner``)."""

    def run_case(self, item: CaseItem) -> CaseRecord: ...


#: Stash keys, set by session.py (the idiom of pytest's junitxml.py ``xml_key``): the collection hooks in every
#: process, the case runner where cases run. The runner's key is typed by what an item asks of it and lives here,
#: beside ``CaseItem``, because case_runner.py imports this module.
collection_key: pytest.StashKey[EvalCollection] = pytest.StashKey()
runner_key: pytest.StashKey[CaseRunning] = pytest.StashKey()


#: The marker of every eval-set item: one object that all of them share (a mark is immutable).
RAGEVAL_MARK = pytest.mark.rageval


def _case_function(rageval_client: Any, rageval_judge: Any) -> None:
    """Stands in for a test function so the item requests the plugin's fixtures."""


class EvalSetFile(pytest.File):
    """A ``.jsonl`` eval set: one item per line, in file order."""

    def collect(self) -> list[pytest.Item]:
        collection = self.config.stash.get(collection_key, None)
        if collection is not None and not collection.first_path_of_file(self.path):
            return []  # the same file reached by another path (a link) earlier: its cases are collected there
        display = _relative(self.path, self.config.rootpath)
        # One fixture closure serves every case of the file (as pytest does for a parametrized function).
        fixtureinfo = compat.shared_fixtureinfo(self, _case_function)
        configs: Sequence[MatrixConfig | None] = collection.configs if collection is not None else [None]
        items: list[pytest.Item] = []
        # Each line's case is parsed, made into items (which keep the line, not the case) and let go before the
        # next, in file order. Items are kept, nothing is freed: the cyclic GC would only rescan them.
        with gc_paused():
            for entry in iter_eval_file(self.path, display=display):
                if isinstance(entry, BadLine):
                    items.append(
                        BadLineItem.from_parent(self, name=f"line{entry.line}", message=entry.message, line=entry.line)
                    )
                    continue
                problem = _threshold_problem(entry.case, display, entry.line)
                if problem:
                    items.append(
                        BadLineItem.from_parent(self, name=f"line{entry.line}", message=problem, line=entry.line)
                    )
                    continue
                marks = collection.mark_decorators(entry.case) if collection is not None else ()
                for config in configs:
                    item = CaseItem.from_parent(
                        self,
                        name=entry.case.id if config is None else f"{entry.case.id}[{config.id}]",
                        callobj=_case_function,
                        fixtureinfo=fixtureinfo,
                        case=entry.case,
                        line=entry.line,
                        source=entry.source,
                        matrix_config=config,
                    )
                    for mark in marks:
                        item.add_marker(mark)
                    items.append(item)
        return items


def _relative(path: Any, root: Any) -> str:
    try:
        return str(path.relative_to(root).as_posix())
    except ValueError:
        return str(path)


def _threshold_problem(case: EvalCase, display: str, line: int) -> str | None:
    """Per-case thresholds name known metrics with values of the right type."""
    tables = [("thresholds", case.thresholds)]
    tables += [(f"turns[{i}].thresholds", turn.thresholds) for i, turn in enumerate(case.turns or ())]
    for field, table in tables:
        for metric, value in table.items():
            try:
                check_metric_name(metric, f"{display}:{line}: field {field!r}")
                coerce_threshold(metric, value, f"{display}:{line}: field '{field}.{metric}'")
            except ThresholdError as exc:
                return str(exc)
    return None


class CaseItem(pytest.Function):
    """One eval case as a test item.

    With its line's text (``source``) it keeps that, not the parsed case: ``case`` parses the line again when
    the item runs, and ``release`` lets go of it once the record is made (a run of 100,000 cases would
    otherwise hold 100,000 parsed cases from collection to the end). ``release`` lets go of the record too.
    """

    def __init__(
        self,
        *,
        case: EvalCase,
        line: int,
        source: bytes | None = None,
        matrix_config: MatrixConfig | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self._source = source or None
        self._case: EvalCase | None = None if self._source is not None else case
        self.line = line
        self.matrix_config = matrix_config  # the matrix's combination this item runs under (None without a matrix)
        self.record: CaseRecord | None = None
        self.add_marker(RAGEVAL_MARK)
        if case.skip is not None:
            self.add_marker(pytest.mark.skip(reason=case.skip))
        if case.xfail is not None:
            self.add_marker(pytest.mark.xfail(reason=case.xfail, strict=False))
        # tags and categories repeat from case to case: one string each, not one per item
        self.extra_keyword_matches.update(sys.intern(tag) for tag in case.tags)
        self.extra_keyword_matches.add(sys.intern(case.category))
        if matrix_config is not None:
            self.extra_keyword_matches.update(matrix_config.keywords())  # -k 'top_k=10', rewritten (matrix.py)

    @property
    def case(self) -> EvalCase:
        """The item's eval case (parsed again from its line when it was let go)."""
        if self._case is None:
            assert self._source is not None
            self._case = parse_line(self._source)
        return self._case

    def release(self) -> None:
        """Let go of the record (its report carries it now) and of the parsed case (``case`` parses the line again
        if asked; kept when there is no line)."""
        self.record = None
        if self._source is not None:
            self._case = None

    def setup(self) -> None:
        super().setup()
        from pytest_rageval.report.terminal import format_error

        record = self.record = self.config.stash[runner_key].run_case(self)
        if record.get("error"):
            pytest.fail(format_error(record, self.line), pytrace=False)

    def runtest(self) -> None:
        from pytest_rageval.report.terminal import format_failure

        assert self.record is not None
        warn_once(self.config, self.record)
        if self.record["misses"]:
            since = self.record.get("since_baseline") or {}
            if since.get("kind") == "known":  # failed in the baseline the same way: an xfail, not a regression
                pytest.xfail(since.get("text", "known failure"))
            pytest.fail(format_failure(self.record), pytrace=False)

    def reportinfo(self) -> tuple[Any, int, str]:
        # pytest shows the domain after the file, reading dots as "::": keep it the bare id.
        return self.path, self.line - 1, self.name  # the case id, and its config in brackets


#: What each ``record["warnings"]`` code means for the user, and what to change.
WARNINGS = {
    NO_REL_PATH: (
        "gold_supports can never match: no retrieved chunk or reference of the response has a "
        "rel_path, so recall and attribution against gold_supports score 0. Map the field that holds the source "
        "path in rageval_response_map, e.g. 'retrieved_chunks.rel_path = <your field>' and "
        "'references.rel_path = <your field>', or write the gold as gold_doc_ids (matched by doc_id)"
    ),
}
warned_key = pytest.StashKey[set[str]]()


def warn_once(config: pytest.Config, record: Mapping[str, Any]) -> None:
    """Warn about each of the record's warning codes once per process (xdist's summary merges the workers')."""
    warned = config.stash.setdefault(warned_key, set())
    for code in record.get("warnings") or ():
        if code in WARNINGS and code not in warned:
            warned.add(code)
            # One fixed location, so pytest's summary shows one entry whichever case and worker warned.
            warnings.warn_explicit(RagevalWarning(WARNINGS[code]), RagevalWarning, filename="pytest-rageval", lineno=0)


def broken_link_problem(path: Path) -> str | None:
    """Why ``path``, a symlink, cannot be read (dangling, or a loop), or None when it is no broken symlink."""
    if not path.is_symlink():
        return None
    try:
        path.stat()
    except OSError as exc:
        try:
            target = os.readlink(path)
        except OSError:
            target = "?"
        return f"cannot read eval set: broken symlink to {target!r} ({exc.strerror or exc})"
    return None


def broken_links(folder: Path) -> list[tuple[Path, str]]:
    """The ``.jsonl`` symlinks of ``folder`` that cannot be read, each with why, in name order."""
    try:
        names = sorted(
            entry.name for entry in os.scandir(folder) if entry.name.endswith(".jsonl") and entry.is_symlink()
        )
    except OSError:
        return []
    return [(folder / name, problem) for name in names if (problem := broken_link_problem(folder / name))]


class BrokenEvalSet(pytest.File):
    """An eval-set path that cannot be collected: one error item, ``<path>::line0``.

    A dangling symlink or a symlink loop (``<path>:0: <problem>``), or a folder link back to a folder it
    is in (``<path>: <problem>``: a folder has no lines).
    """

    def __init__(self, *, problem: str, folder: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.problem = problem
        self.folder = folder

    def collect(self) -> Iterator[pytest.Item]:
        where = _relative(self.path, self.config.rootpath) + ("" if self.folder else ":0")
        yield BadLineItem.from_parent(self, name="line0", message=f"{where}: {self.problem}", line=0)


def broken_set_items(session: pytest.Session, broken: list[tuple[Path, str]]) -> list[pytest.Item]:
    """The error items of the broken eval-set paths (collected apart: pytest cannot collect a missing path)."""
    return [
        item
        for path, problem in broken
        for item in BrokenEvalSet.from_parent(session, path=path, problem=problem, folder=path.is_dir()).collect()
    ]


def counts_in_eval_set(item: pytest.Item) -> bool:
    """A case or an invalid line of an eval-set file; not a broken path's error item (there is no file to count)."""
    return isinstance(item, CaseItem) or (isinstance(item, BadLineItem) and not isinstance(item.parent, BrokenEvalSet))


class EvalSetDir(getattr(pytest, "Dir", pytest.Collector)):  # type: ignore[misc]  # pytest.Dir: pytest >= 8
    """A folder as pytest walks it, and a dangling ``.jsonl`` link in it one error item (pytest skips it silently).

    Only the paths a run names are kept from it: a broken link beside a named file plays no part.
    """

    def collect(self) -> list[Any]:
        nodes = [
            *super().collect(),
            *(BrokenEvalSet.from_parent(self, path=path, problem=problem) for path, problem in broken_links(self.path)),
        ]
        return sorted(nodes, key=lambda node: node.path.name)  # stable: pytest's name order, the links in place


class BadLineItem(pytest.Item):
    """An eval-set line that could not be read: an error naming file, line and field."""

    def __init__(self, *, message: str, line: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.message = message
        self.line = line
        self.add_marker(RAGEVAL_MARK)

    def setup(self) -> None:
        from pytest_rageval.sanitize import terminal_safe

        pytest.fail(terminal_safe(self.message), pytrace=False)

    def runtest(self) -> None:  # never reached: setup always errors
        pass

    def reportinfo(self) -> tuple[Any, int, str]:
        return self.path, self.line - 1, self.name


class EvalCollection:
    """The collection hooks (every process that collects: a serial session, each xdist worker).

    Eval-set paths when none are given, ``.jsonl`` files as eval sets, broken symlinks as error
    items, the shard and a resumed run's finished cases left out, and the count of eval-set items
    collected and deselected (``selection``: what a partial run stands for).
    """

    def __init__(
        self, config: pytest.Config, setup: RunSetup, *, resumed: Mapping[str, str | None] | None = None
    ) -> None:
        self.config = config
        self.setup = setup
        self.settings = setup.settings
        # keys of the cases a resumed run has finished already, each with the definition hash it ran under
        self.resumed: Mapping[str, str | None] = resumed or {}
        self._registered_marks: set[str] = set()  # markers of lines and [tool.rageval.marks], registered once
        self._decorators: dict[str, pytest.MarkDecorator] = {}  # each marker's one object, by name
        self.broken_sets: list[tuple[Path, str]] = []  # eval-set globs' matches that are broken symlinks or loops
        self._first_paths: dict[Path, Path] = {}  # an eval-set file's real path -> the path it is collected under
        self.selection = Selection()
        self.session: pytest.Session | None = None
        matrix = self.settings.matrix
        # every case runs under each config (one item each); [None]: no matrix, one item per case as ever
        self.configs: list[MatrixConfig | None] = list(matrix.configs()) if matrix is not None else [None]
        keyword = str(getattr(config.option, "keyword", None) or "")
        if matrix is not None and keyword:  # -k 'top_k=10': pytest's -k has no '=' in a name
            config.option.keyword = rewrite_keyword_expression(keyword, matrix.names)

    def marks_for(self, case: EvalCase) -> list[str]:
        """The markers ``case``'s items carry besides ``rageval``, each registered (``--strict-markers`` works).

        ``judge`` when its outcome depends on a judge verdict: the line's ``judge`` field, else whether a
        threshold names a judge metric in a run with a judge. Then the line's ``marks`` and the markers of
        ``[tool.rageval.marks]`` that name one of its tags or its category.
        """
        from pytest_rageval.evaluation.thresholds import judge_metrics

        if case.judge is None:
            judged = self.setup.judge_setup is not None and not judge_metrics().isdisjoint(
                self.setup.thresholds_for(case)
            )
        else:
            judged = case.judge
        selectors = {case.category, *case.tags}
        names = ["judge"] if judged else []
        names += [*case.marks, *(name for name, chosen in self.settings.marks if not chosen.isdisjoint(selectors))]
        for name in names:
            if name not in self._registered_marks and name not in ("judge", "rageval"):
                self.config.addinivalue_line("markers", f"{name}: added by an eval-set line or [tool.rageval.marks]")
                self._registered_marks.add(name)
        return list(dict.fromkeys(names))

    def mark_decorators(self, case: EvalCase) -> list[pytest.MarkDecorator]:
        """The markers of :meth:`marks_for`, each one object that the items carrying it share."""
        return [
            self._decorators.get(name) or self._decorators.setdefault(name, getattr(pytest.mark, name))
            for name in self.marks_for(case)
        ]

    def choose_default_args(self) -> None:
        """``pytest --rageval`` without paths runs the eval sets of ``rageval_eval_sets``."""
        if self.config.args_source == pytest.Config.ArgsSource.ARGS:
            return
        root = self.settings.rootdir
        found = expand_globs(root, self.settings.eval_set_globs)
        # A dangling symlink or a loop would stop pytest ("file or directory not found"): an error item instead.
        broken = [(path, problem) for path in found.paths if (problem := broken_link_problem(path))]
        loops = [(link, loop_problem(target, root)) for link, target in found.loops.items()]
        self.broken_sets = sorted(broken + loops, key=lambda pair: str(pair[0]))
        files = [str(path) for path in found.paths if path not in dict(broken)]
        if not files and self.broken_sets:
            raise pytest.UsageError(
                "pytest-rageval: no eval set can be read: " + "; ".join(f"{p}: {why}" for p, why in self.broken_sets)
            )
        if not files:
            raise pytest.UsageError(
                f"pytest-rageval: no eval sets match {', '.join(self.settings.eval_set_globs)} "
                f"(rageval_eval_sets, relative to {root}); name files or folders on the command line"
            )
        self.config.args = files

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.session = session

    @pytest.hookimpl(tryfirst=True)
    def pytest_ignore_collect(self, collection_path: Path) -> bool | None:
        """Never collect the run artifacts themselves (results/**/results.jsonl)."""
        out = self.settings.output_dir
        if collection_path == out or out in collection_path.parents:
            return True
        if not hasattr(pytest, "Dir"):  # pytest 7 has no pytest_collect_directory: a loop's error item is made here
            target = loop_target(collection_path)
            if target is not None:
                if collection_path not in {path for path, _ in self.broken_sets}:
                    self.broken_sets.append((collection_path, loop_problem(target, self.settings.rootdir)))
                return True
        return None

    @pytest.hookimpl(optionalhook=True)  # pytest >= 8 only
    def pytest_collect_directory(self, path: Path, parent: pytest.Collector) -> pytest.Collector | None:
        """A folder link back to a folder it is in: one error item, not a walk round the loop; else an EvalSetDir.

        A Python package (``__init__.py``) is left to pytest.
        """
        target = loop_target(path)
        if target is not None:
            return BrokenEvalSet.from_parent(
                parent, path=path, problem=loop_problem(target, self.settings.rootdir), folder=True
            )
        if (path / "__init__.py").is_file():
            return None
        folder: EvalSetDir = EvalSetDir.from_parent(parent, path=path)
        return folder

    def first_path_of_file(self, path: Path) -> bool:
        """Whether ``path`` is the first path this session collects its file under (two links to one file count once)."""
        return self._first_paths.setdefault(real_path(path), path) == path

    def pytest_collect_file(self, file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
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
        shard = self.settings.shard
        if self.broken_sets and self.session is not None:
            broken = broken_set_items(self.session, self.broken_sets)
            for item in broken:
                config.hook.pytest_itemcollected(item=item)
            items[:0] = broken
        if self.resumed:
            self._refuse_changed_cases(items)
        if shard is not None or self.resumed:
            keep: list[pytest.Item] = []
            drop: list[pytest.Item] = []
            for item in items:
                eval_item = isinstance(item, (CaseItem, BadLineItem))
                out_of_shard = eval_item and shard is not None and not in_shard(item.nodeid, *shard)
                (drop if out_of_shard or item.nodeid in self.resumed else keep).append(item)
            if drop:
                config.hook.pytest_deselected(items=drop)
                items[:] = keep

    def _refuse_changed_cases(self, items: Sequence[pytest.Item]) -> None:
        """A resume completes a run: a case it finished whose line has changed since would mix two eval sets."""
        changed = []
        for item in items:
            if isinstance(item, CaseItem) and item.nodeid in self.resumed:
                recorded = self.resumed[item.nodeid]
                if recorded is not None and recorded != definition_hash(item.case):
                    changed.append(item.nodeid)
        if changed:
            shown = ", ".join(changed[:10]) + (f" and {len(changed) - 10} more" if len(changed) > 10 else "")
            raise pytest.UsageError(
                f"pytest-rageval: cannot resume {self.settings.resume}: {len(changed)} case{'' if len(changed) == 1 else 's'} "
                f"changed in the eval set since the run recorded {'it' if len(changed) == 1 else 'them'} ({shown}); "
                "start a new run (without --rageval-resume)"
            )

    def pytest_itemcollected(self, item: pytest.Item) -> None:
        """Count the eval set's items (cases and invalid lines) per file, before any deselection."""
        if counts_in_eval_set(item):
            self.selection.add_collected(item.nodeid.partition("::")[0])

    def pytest_deselected(self, items: Sequence[pytest.Item]) -> None:
        """Count eval-set items left out of this run: out of its shard, or by -k/-m/--lf (a resumed run's are not)."""
        shard = self.settings.shard
        for item in items:
            if not counts_in_eval_set(item):
                continue
            if shard is not None and not in_shard(item.nodeid, *shard):
                self.selection.out_of_shard += 1
            elif item.nodeid not in self.resumed:
                self.selection.deselected += 1
