"""Gold labelling: ask each question with debug on, show the retrieved chunks, write the gold.

:func:`label_set` is the whole workflow and what ``rageval label`` runs; a notebook calls it with its own
``choose`` (a function of a :class:`Question` returning an answer line such as ``"1 3"`` or a
:class:`~pytest_rageval.evaluation.label_edit.Choice`)::

    from pytest_rageval.targets.resolve import load_target
    from pytest_rageval.engine.label import label_set

    client = load_target("http://localhost:8080/api/v1/ask")
    result = label_set("eval_sets/new.jsonl", client, choose=lambda q: "1", ids=["q7"])

Each answer is written at once (the file rewritten atomically, only that line changed), so quitting or an
interrupt keeps every label made before it. The answer protocol, the anchors and the rewriting are
label_edit.py's; :class:`LineChooser` reads answers from a terminal (re-asking after a wrong one) or from
piped lines (a wrong one stops the labelling with a message naming its input line).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from pytest_rageval.engine.evaluate import Engine
from pytest_rageval.errors import RagevalError
from pytest_rageval.evaluation.anchors import top_k
from pytest_rageval.evaluation.evalset import EvalFile, LoadedCase
from pytest_rageval.evaluation.label_edit import (
    CHOICE_HELP,
    Choice,
    ChoiceError,
    EvalSetText,
    LabelEditError,
    labelled_line,
    parse_choice,
)
from pytest_rageval.evaluation.schema import Chunk, EvalCase
from pytest_rageval.evaluation.stored_chunk import heading_text
from pytest_rageval.sanitize import terminal_safe
from pytest_rageval.suggest import did_you_mean
from pytest_rageval.targets.protocol import RagCallError, RagClient

__all__ = ["LabelError", "LabelResult", "LineChooser", "Question", "format_question", "label_set", "select_cases"]

#: Characters of a chunk's text shown as its excerpt, and of the answer.
EXCERPT_CHARS = 160
ANSWER_CHARS = 200


class LabelError(RagevalError):
    """Labelling cannot go on; the message says why on one line (no traceback is shown for it)."""


@dataclass(frozen=True)
class Question:
    """One question as the person sees it: the case, where it is, and what the system retrieved (rank order)."""

    case: EvalCase
    line: int
    number: int  # 1-based among the questions asked this session
    total: int
    answer: str
    abstained: bool | None
    chunks: tuple[Chunk, ...]


Answer = str | Choice
Chooser = Callable[[Question], Answer]


@dataclass
class LabelResult:
    """What a labelling session did."""

    supported: list[str] = field(default_factory=list)  # ids given gold
    unanswerable: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    not_asked: list[str] = field(default_factory=list)  # left after a quit or an interrupt
    quit: bool = False
    interrupted: bool = False

    @property
    def written(self) -> int:
        return len(self.supported) + len(self.unanswerable)

    def summary(self) -> str:
        parts = [
            f"{len(self.supported)} given gold",
            f"{len(self.unanswerable)} marked unanswerable",
            f"{len(self.skipped)} skipped",
        ]
        if self.not_asked:
            parts.append(f"{len(self.not_asked)} not asked")
        how = " (interrupted)" if self.interrupted else " (quit)" if self.quit else ""
        return "labelled: " + ", ".join(parts) + how


# --------------------------------------------------------------------------- which questions


def lacks_gold(case: EvalCase) -> bool:
    """An answerable question with neither gold_supports nor gold_doc_ids: what ``rageval label`` asks by default
    (a conversation's gold is its turns': never asked)."""
    return case.turns is None and case.answerable and not case.has_gold


def select_cases(loaded: EvalFile, *, ids: Sequence[str] | None = None, every: bool = False) -> list[LoadedCase]:
    """The cases to ask, in file order: those named by ``ids`` (LabelError for an unknown one), else every case
    with ``every``, else those that lack gold."""
    if ids:
        by_id = {c.case.id: c for c in loaded.cases}
        wanted = list(dict.fromkeys(ids))
        for case_id in wanted:
            if case_id in by_id and by_id[case_id].case.turns is not None:
                raise LabelError(f"--ids {case_id}: a conversation: its gold is per turn (turns[N].gold_supports)")
            if case_id in by_id:
                continue
            bad = next((b for b in loaded.bad if b.case_id == case_id), None)
            if bad is not None:
                raise LabelError(f"--ids {case_id}: its line is invalid and is left untouched: {bad.message}")
            raise LabelError(
                f"--ids {case_id}: no question with that id in {loaded.display}{did_you_mean(case_id, list(by_id))}"
            )
        return [c for c in loaded.cases if c.case.id in wanted]
    return [c for c in loaded.cases if c.case.turns is None and (every or lacks_gold(c.case))]


# --------------------------------------------------------------------------- showing a question


def _one_line(value: Any, limit: int) -> str:
    """``value`` on one line, control characters escaped (sanitize.terminal_safe), cut to ``limit`` characters."""
    text = value if isinstance(value, str) else str(value)
    text = terminal_safe(" ".join(text[: limit * 8].split()), multiline=False)  # whitespace (\r, \n, tab) as one space
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _score(chunk: Chunk) -> str:
    for value in (chunk.score_final, chunk.score_lexical, chunk.score_vector):
        if value is not None:
            return f"score {value:.3f}"
    return ""


def format_question(question: Question) -> list[str]:
    """The lines shown for a question: header, answer, then each chunk numbered (where, heading, score, excerpt);
    every text from outside on one line with control characters escaped, so none can move the cursor."""
    case = question.case
    lines = [
        f"[{question.number}/{question.total}] {_one_line(case.id, 80)} (line {question.line}): {_one_line(case.question, 300)}"
    ]
    flag = " [abstained]" if question.abstained else ""
    lines.append(
        f"  answer: {_one_line(question.answer, ANSWER_CHARS) if question.answer.strip() else '(empty)'}{flag}"
    )
    if not question.chunks:
        lines.append("  no chunks were retrieved (the system returned no debug.retrieved_chunks): answer u, s or q")
    width = len(str(len(question.chunks)))
    for number, chunk in enumerate(question.chunks, start=1):
        where = (
            _one_line(chunk.rel_path, 120)
            if chunk.rel_path
            else f"(no rel_path) doc_id {_one_line(chunk.doc_id or '-', 60)}"
        )
        head = "  ".join(p for p in (where, _one_line(heading_text(chunk.heading_path), 120), _score(chunk)) if p)
        lines.append(f"  {number:>{width}}. {head}")
        lines.append(f"  {'':>{width}}  {_one_line(chunk.text or '', EXCERPT_CHARS) or '(no text)'}")
    return lines


# --------------------------------------------------------------------------- answers from lines


class LineChooser:
    """Answers read line by line: from a terminal (prompted; a wrong answer is explained and asked again) or
    from piped input (each line echoed after the prompt; a wrong answer is a LabelError naming its input line).
    The end of the input answers ``q``."""

    def __init__(
        self,
        lines: IO[str] | Iterable[str],
        out: Callable[[str], None],
        *,
        interactive: bool = False,
        read: Callable[[str], str] | None = None,
    ) -> None:
        self._lines = iter(lines)
        self._out = out
        self._interactive = interactive
        self._read = read  # input(): a terminal's line editing
        self.line_number = 0

    def _next(self, prompt: str) -> str | None:
        if self._read is not None:
            try:
                return self._read(prompt)
            except EOFError:
                return None
        line = next(self._lines, None)
        if line is not None and not self._interactive:
            self._out(prompt + terminal_safe(line.rstrip("\r\n"), multiline=False))
        return line

    def __call__(self, question: Question) -> Choice:
        prompt = f"label [{'1-' + str(len(question.chunks)) + ', ' if question.chunks else ''}u, s, q, ?]> "
        while True:
            line = self._next(prompt)
            if line is None:
                self._out("(end of input: quit)")
                return Choice("quit")
            self.line_number += 1
            try:
                choice = parse_choice(line, question.chunks)
            except ChoiceError as exc:
                if not self._interactive:
                    raise LabelError(
                        f"stdin line {self.line_number} ({_one_line(line.strip(), 60)!r}): {exc}"
                    ) from None
                self._out(f"  {exc}")
                continue
            if choice.kind == "help":
                self._out("  " + CHOICE_HELP)
                continue
            return choice


# --------------------------------------------------------------------------- the session


def _describe(choice: Choice) -> str:
    if choice.kind == "unanswerable":
        return "answerable: false"
    count = len(choice.supports) or len(choice.doc_ids)
    what = "gold support" if choice.supports else "gold doc id"
    text = f"{count} {what}{'s' if count != 1 else ''}"
    if choice.support_groups is not None:
        text += f", required_support_groups {[list(g) for g in choice.support_groups]}"
    return text


def _ask(engine: Engine, client: RagClient, loaded: LoadedCase, k: int) -> tuple[str, bool | None, tuple[Chunk, ...]]:
    case = loaded.case
    try:
        reply = engine.run(client.aask(case.question, k=k, params=dict(case.params)))
    except RagCallError as exc:
        raise LabelError(f"{case.id} (line {loaded.line}): asking the system failed: {exc.message}") from None
    response = reply.response
    return response.answer, response.abstained, tuple(top_k(response.retrieved_chunks, k))


def label_set(
    path: str | os.PathLike[str],
    client: RagClient,
    choose: Chooser,
    *,
    k: int = 20,
    ids: Sequence[str] | None = None,
    every: bool = False,
    show: Callable[[str], None] | None = None,
) -> LabelResult:
    """Label the questions of the eval set at ``path``: ask each through ``client`` (k chunks, debug on), show them
    through ``show`` (nothing when None), take ``choose``'s answer and write it into the file at once.

    Which questions: ``ids``, else every one with ``every``, else those that lack gold (:func:`lacks_gold`).
    Invalid lines are left untouched (``show`` says so). Raises LabelError for a file that cannot be read, an
    unknown id, a failed call to the system or an answer string that does not follow the protocol; labels
    written before it stay written. An interrupt (Ctrl-C) ends the session like ``q`` and sets ``interrupted``.
    """
    say = show or (lambda _line: None)
    try:
        text = EvalSetText.read(path)
    except LabelEditError as exc:
        raise LabelError(str(exc)) from None
    loaded = text.load(str(path))
    for bad in loaded.bad:
        say(f"note: line {bad.line} is invalid and is left untouched: {terminal_safe(bad.message, multiline=False)}")
    cases = select_cases(loaded, ids=ids, every=every)
    result = LabelResult()
    if not cases:
        say(f"nothing to label in {path}: every answerable question has gold (use --all or --ids to label again)")
        return result
    say(
        f"{len(cases)} question{'s' if len(cases) != 1 else ''} to label in {terminal_safe(str(path), multiline=False)}"
    )
    engine = Engine()
    try:
        for number, loaded_case in enumerate(cases, start=1):
            case = loaded_case.case
            try:
                answer, abstained, chunks = _ask(engine, client, loaded_case, k)
                question = Question(case, loaded_case.line, number, len(cases), answer, abstained, chunks)
                for line in format_question(question):
                    say(line)
                choice = _choose(choose, question)
            except KeyboardInterrupt:
                result.interrupted = True
                result.not_asked = [c.case.id for c in cases[number - 1 :]]
                break
            if choice.kind == "quit":
                result.quit = True
                result.not_asked = [c.case.id for c in cases[number - 1 :]]
                break
            if choice.kind == "skip":
                result.skipped.append(case.id)
                continue
            _write(text, loaded_case, choice, say)
            (result.supported if choice.kind == "supports" else result.unanswerable).append(case.id)
    finally:
        engine.close(client.aclose)
    return result


def _choose(choose: Chooser, question: Question) -> Choice:
    """The chooser's answer as a Choice (a string is read by the protocol; help is shown and asked again)."""
    for _ in range(100):
        answer = choose(question)
        if isinstance(answer, Choice):
            choice = answer
        else:
            try:
                choice = parse_choice(str(answer), question.chunks)
            except ChoiceError as exc:
                raise LabelError(f"{question.case.id}: answer {str(answer)!r}: {exc}") from None
        if choice.kind != "help":
            return choice
    raise LabelError(f"{question.case.id}: no answer after 100 requests for help")


def _write(text: EvalSetText, loaded: LoadedCase, choice: Choice, say: Callable[[str], None]) -> None:
    """Apply ``choice`` to the case's line and write the file; one line says what was written."""
    case_id = _one_line(loaded.case.id, 80)
    obj = text.object_at(loaded.line)
    try:
        new, notes = labelled_line(obj, choice)
    except ChoiceError as exc:
        raise LabelError(f"{case_id} (line {loaded.line}): {exc}") from None
    text.replace(loaded.line, new)
    try:
        text.write()
    except LabelEditError as exc:  # the label typed is shown, so it is not lost
        raise LabelError(
            f"{exc}; this label is not written: line {loaded.line} would read {text.line_text(loaded.line)}"
        ) from None
    extra = f" ({'; '.join(notes)})" if notes else ""
    say(f"  -> {case_id}: {_describe(choice)}{extra}")
