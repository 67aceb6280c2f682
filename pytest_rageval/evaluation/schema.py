"""Pydantic models of eval-set lines and of RAG responses.

Pure: no pytest, no I/O. Loading files and turning validation errors into
file/line/field messages lives in ``evalset.py``.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from typing import Annotated, Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator, model_validator

HeadingPath = str | list[str]

CATEGORY_DEFAULT = "factual"

#: The most runs one case may ask for with ``repeat``.
MAX_REPEAT = 100
#: What a case id may look like, for the JSON Schema; :func:`id_problem` is the check with the messages.
#: (ECMA-262 regex; it spells out C0/C1 controls and Unicode separators, the check refuses all non-printables.)
ID_PATTERN = (
    r"^(?!line[0-9]+$)(?!.*::)(?=\S)(?=.*\S$)"
    r"[^\u0000-\u001f\u007f-\u009f\u00ad\u2028\u2029\u200b-\u200f\u202a-\u202e\u2060-\u2064\ufeff\[\]]+$"
)
_ERROR_ITEM_NAME = re.compile(r"line[0-9]+")
#: What a marker name added by a line's ``marks`` (or ``[tool.rageval.marks]``) may look like: pytest refuses a
#: name starting with ``_`` (and ``__class__`` would name no marker at all).
MARK_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
#: The longest marker name a case may add.
MAX_MARK_CHARS = 100
#: Param names a line's ``params`` may not hold: the plugin sends them itself, and the record keeps its own.
RESERVED_PARAMS = {
    "question": "the question sent is the line's own 'question'",
    "k": "the k sent is the run's k, recorded with each result (set it with rageval_k or a matrix axis k or top_k)",
}
_PARAMS_SCHEMA: dict[str, Any] = {"propertyNames": {"not": {"enum": sorted(RESERVED_PARAMS)}}}
#: Marker names that mean something else: pytest's own, and the plugin's (``judge`` is the line's own field).
RESERVED_MARKS = frozenset(
    {"skip", "skipif", "xfail", "parametrize", "usefixtures", "filterwarnings", "rageval", "judge"}
)


def mark_problem(name: str) -> str | None:
    """Why ``name`` cannot be a marker a case adds, or None."""
    if len(name) > MAX_MARK_CHARS:
        return f"a marker name of {len(name)} characters ({name[:20]!r}...; at most {MAX_MARK_CHARS})"
    if not MARK_NAME.match(name):
        return f"{name!r} is no marker name (letters, digits and _, starting with a letter)"
    if name in RESERVED_MARKS:
        return f"{name!r} is reserved ({'use the field judge' if name == 'judge' else 'pytest or the plugin sets it'})"
    return None


def id_problem(value: str) -> str | None:
    """Why ``value`` cannot be a case id (it becomes a pytest node-id part and shows in every report), or None.

    Printable characters only (``str.isprintable``: no control characters such
    as newline, tab, NUL, ESC, DEL or C1, no format characters, no surrogates,
    no line or paragraph separators); no leading or trailing whitespace; no
    ``::`` (it splits node ids); no ``[`` or ``]`` (pytest reads them as a
    parametrization suffix when selecting by node id); not ``line<N>``, the
    name of a bad line's error item.
    """
    for char in value:
        if not char.isprintable():
            return f"must hold printable characters only, found {_char_name(char)}"
    if value != value.strip():
        return "must not start or end with whitespace"
    if "::" in value:
        return "must not contain '::' (it would split the test's node id)"
    if "[" in value or "]" in value:
        return "must not contain '[' or ']' (pytest reads them as parameters when selecting by node id)"
    if _ERROR_ITEM_NAME.fullmatch(value):
        return f"{value!r} is reserved: bad lines are reported as items named line<N>"
    return None


def _char_name(char: str) -> str:
    """``U+000A (a control character)``: how a refused character reads in a message."""
    kind = {"Cc": "a control character", "Cf": "a format character", "Cs": "a lone surrogate"}
    category = unicodedata.category(char)
    return f"U+{ord(char):04X} ({kind.get(category, 'not printable')})"


class GoldSupport(BaseModel):
    """An anchor of supporting content: a file and a heading prefix."""

    model_config = ConfigDict(extra="forbid", strict=True)

    rel_path: str = Field(min_length=1)
    heading_path: HeadingPath | None = None
    snippets: list[str] = Field(default_factory=list)


#: The input names of the fields a line and a turn share (each canonical name first).
QUESTION_NAMES = AliasChoices("question", "query")
REFERENCE_NAMES = AliasChoices("reference_answer", "referenceAnswer")
DOC_ID_NAMES = AliasChoices("gold_doc_ids", "expectedProposalIds", "expected_doc_ids")


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be blank")
    return value


class Turn(BaseModel):
    """One turn of a conversation: its question and what it is checked against (each as on a one-question line)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, strict=True)

    question: str = Field(
        min_length=1, validation_alias=QUESTION_NAMES, description="the question of this turn (alias `query`)"
    )
    answerable: bool = Field(default=True, description="false: the system must abstain on this turn")
    reference_answer: str | None = Field(
        default=None,
        validation_alias=REFERENCE_NAMES,
        description="this turn's expected answer: correctness judging, and the history sent with `history: reference`",
    )
    expected_key_facts: list[str] = Field(default_factory=list, description="facts a correct answer to it contains")
    gold_supports: list[GoldSupport] = Field(default_factory=list, description="anchors of this turn's support")
    gold_doc_ids: list[str] = Field(
        default_factory=list, validation_alias=DOC_ID_NAMES, description="id-based gold: matches a chunk's doc_id"
    )
    thresholds: dict[str, bool | float] = Field(
        default_factory=dict, description="this turn's threshold overrides, over the line's own `thresholds`"
    )

    @field_validator("question")
    @classmethod
    def _question_not_blank(cls, value: str) -> str:
        return _not_blank(value)


#: What each turn of a conversation is asked with: the earlier turns' answers as the target gave them (``live``)
#: or their reference answers (``reference``, each turn scored in isolation).
History = Literal["live", "reference"]
#: The fields of a line that a conversation sets per turn (``turns[N].<field>``) instead.
TURN_FIELDS = ("reference_answer", "expected_key_facts", "gold_supports", "gold_doc_ids", "answerable")
#: The most turns one conversation may hold.
MAX_TURNS = 50


class EvalCase(BaseModel):
    """One eval-set line. Field names are the documented ones; aliases are accepted on input."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, strict=True)  # "yes" is no bool, "2" no int

    id: str = Field(
        min_length=1,
        json_schema_extra={"pattern": ID_PATTERN},
        description="Printable characters only (no control characters, no leading or trailing whitespace), "
        "without '::', '[' or ']', and not of the form line<N> (the name of a bad line's error item).",
    )
    question: str = Field(
        min_length=1,
        validation_alias=QUESTION_NAMES,
        description="the question sent to the RAG (alias `query`); a conversation gives `turns` instead",
    )
    turns: Annotated[list[Turn], Field(min_length=1, max_length=MAX_TURNS)] | None = Field(
        default=None,
        description="A conversation, instead of `question`: the target is asked turn by turn with the history so "
        "far; each turn is scored with the usual metrics and the case fails when any turn fails.",
    )
    history: History = Field(
        default="live",
        description="With `turns`: the history each turn is sent with: `live` (the target's own earlier answers) "
        "or `reference` (the earlier turns' reference answers, to score each turn in isolation).",
    )
    answerable: bool = Field(default=True, description="false: the system must abstain")
    reference_answer: str | None = Field(
        default=None, validation_alias=REFERENCE_NAMES, description="for correctness judging (alias `referenceAnswer`)"
    )
    expected_key_facts: list[str] = Field(default_factory=list, description="facts a correct answer contains")
    gold_supports: list[GoldSupport] = Field(default_factory=list, description="anchors of supporting content")
    gold_doc_ids: list[str] = Field(
        default_factory=list,
        validation_alias=DOC_ID_NAMES,
        description="id-based gold: matches a chunk's doc_id (aliases `expectedProposalIds`, `expected_doc_ids`)",
    )
    required_support_groups: list[list[int]] | None = Field(
        default=None,
        description="Multi-hop: OR of groups, AND within a group. Indices into gold_supports; "
        "in a case without gold_supports, indices into gold_doc_ids.",
    )
    recency_conflict_rule: Literal["cite_newer", "acknowledge_both", "cite_both"] | None = Field(
        default=None,
        description="Expected behaviour on conflicting sources, judged on the references. The first gold "
        "support is the newer source; in a case without gold_supports, the first gold doc id.",
    )
    tags: list[str] = Field(default_factory=list, description="free tags, usable with `-k`")
    category: str = Field(
        default=CATEGORY_DEFAULT,
        description="factual, reasoning, multi_hop, recency/conflict, general, adversarial, ...",
    )
    difficulty: str | None = Field(default=None, description="easy / medium / hard")
    vaults: list[str] = Field(default_factory=list, description="scope of the question (carried into results)")
    folders: list[str] = Field(default_factory=list, description="scope of the question (carried into results)")
    thresholds: dict[str, bool | float] = Field(
        default_factory=dict, description="per-case threshold overrides, `{metric: value}`"
    )
    params: dict[str, Any] = Field(
        default_factory=dict,
        json_schema_extra=_PARAMS_SCHEMA,
        description="Extra request parameters of this case; not 'question' or 'k', which the plugin sends itself.",
    )
    flaky: bool = Field(
        default=False,
        description="run `repeat` times (3 when `repeat` is not given), pass on majority, report as flaky",
    )
    judge: bool | None = Field(
        default=None,
        description="true/false overrides whether the case is judge-dependent (adds/removes the judge marker); "
        "false also leaves the judge out of this case.",
    )
    marks: list[str] = Field(default_factory=list, description="extra pytest markers on the case's items")
    repeat: int | None = Field(
        default=None, ge=1, le=MAX_REPEAT, description="runs of this case, 1 to 100 (1; 3 when flaky)"
    )
    skip: str | None = Field(default=None, description="reason: pytest skip; nothing is sent for a skipped case")
    xfail: str | None = Field(default=None, description="reason: pytest xfail")
    metadata: dict[str, Any] = Field(default_factory=dict, description="free-form, carried into results")

    @field_validator("id")
    @classmethod
    def _id_fits_a_node_id(cls, value: str) -> str:
        problem = id_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @field_validator("marks")
    @classmethod
    def _marks_are_names(cls, value: list[str]) -> list[str]:
        for name in value:
            problem = mark_problem(name)
            if problem is not None:
                raise ValueError(problem)
        return list(dict.fromkeys(value))

    @field_validator("question")
    @classmethod
    def _question_not_blank(cls, value: str) -> str:
        return _not_blank(value)

    @model_validator(mode="before")
    @classmethod
    def _conversation_question(cls, data: Any) -> Any:
        """A conversation's question is its first turn's (what collection, ids and one-line views show)."""
        if not isinstance(data, dict) or data.get("turns") is None:
            return data
        turns = data["turns"]
        first = turns[0] if isinstance(turns, list) and turns else None
        asked = first.get("question", first.get("query")) if isinstance(first, dict) else None
        given = data.get("question", data.get("query"))
        if given is None:  # (no usable question in the first turn: the turn's own field is named, not the line's)
            return {**data, "question": asked if isinstance(asked, str) and asked.strip() else "-"}
        if given is not None and given != asked:
            raise ValueError("question: a conversation's questions are in 'turns'; leave out the top-level question")
        return data

    @model_validator(mode="after")
    def _conversation_fields_are_per_turn(self) -> EvalCase:
        if self.turns is None:
            if "history" in self.model_fields_set:
                raise ValueError("history: only a conversation (a line with 'turns') is sent a history")
            return self
        for name in (*TURN_FIELDS, "required_support_groups", "recency_conflict_rule"):
            if name in self.model_fields_set:
                where = f"turns[N].{name}" if name in TURN_FIELDS else "a line of its own, not a conversation"
                raise ValueError(f"{name}: a conversation sets it per turn; use {where}")
        if "history" in self.params:
            raise ValueError("params.history: reserved: a conversation's history is sent by the plugin")
        if self.history == "reference":
            for index, turn in enumerate(self.turns[:-1]):
                if turn.reference_answer is None:
                    raise ValueError(
                        f"turns[{index}].reference_answer: required with history 'reference' "
                        "(the later turns are sent it as this turn's answer)"
                    )
        return self

    @model_validator(mode="after")
    def _params_leave_the_question_and_k(self) -> EvalCase:
        for name, why in RESERVED_PARAMS.items():
            if name in self.params:
                raise ValueError(f"params.{name}: reserved: {why}")
        return self

    @model_validator(mode="after")
    def _check_groups_and_rules(self) -> EvalCase:
        basis = self.grouped_gold
        n = len(getattr(self, basis))
        if self.required_support_groups is not None:
            for group in self.required_support_groups:
                if not group:
                    raise ValueError("required_support_groups: a group must not be empty")
                for index in group:
                    if not 0 <= index < n:
                        raise ValueError(
                            f"required_support_groups: index {index} is not an index into {basis} (which has {n} entries)"
                        )
        if self.recency_conflict_rule is not None and not n:
            raise ValueError(
                "recency_conflict_rule needs gold_supports or gold_doc_ids (the first one is the newer source)"
            )
        return self

    @property
    def grouped_gold(self) -> Literal["gold_supports", "gold_doc_ids"]:
        """What ``required_support_groups`` indices and the recency rule refer to: gold_supports, else gold_doc_ids."""
        return "gold_doc_ids" if self.gold_doc_ids and not self.gold_supports else "gold_supports"

    @property
    def runs(self) -> int:
        """How many times the case runs: its ``repeat``, else 3 when flaky, else 1."""
        if self.repeat is not None:
            return self.repeat
        return 3 if self.flaky else 1

    @property
    def has_gold(self) -> bool:
        return bool(self.gold_supports or self.gold_doc_ids)

    def asked(self) -> list[EvalCase]:
        """What the target is asked: the case itself, or each turn of a conversation as a one-question case."""
        return [self.turn_case(i) for i in range(len(self.turns))] if self.turns is not None else [self]

    def turn_case(self, index: int) -> EvalCase:
        """Turn ``index`` (0-based) of a conversation as a one-question case: its question, gold, key facts,
        reference answer and answerable, the line's thresholds under its own; everything else the line's."""
        assert self.turns is not None
        turn = self.turns[index]
        return self.model_copy(
            update={
                "question": turn.question,
                "turns": None,
                "history": "live",
                "answerable": turn.answerable,
                "reference_answer": turn.reference_answer,
                "expected_key_facts": list(turn.expected_key_facts),
                "gold_supports": list(turn.gold_supports),
                "gold_doc_ids": list(turn.gold_doc_ids),
                "thresholds": {**self.thresholds, **turn.thresholds},
            }
        )


class Chunk(BaseModel):
    """A retrieved chunk or a reference, in the default response shape."""

    model_config = ConfigDict(extra="allow")

    chunk_id: str | None = None
    doc_id: str | None = None
    rel_path: str | None = None
    heading_path: HeadingPath | None = None
    score_vector: float | None = None
    score_lexical: float | None = None
    score_final: float | None = None
    text: str | None = None
    rank: int | None = None

    @field_validator("doc_id", "chunk_id", mode="before")
    @classmethod
    def _ids_as_text(cls, value: Any) -> Any:
        return str(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value


class RagResponse(BaseModel):
    """What the system under test answered, normalised to the default shape."""

    model_config = ConfigDict(extra="allow")

    answer: str
    references: list[Chunk] = Field(default_factory=list)
    retrieved_chunks: list[Chunk] = Field(default_factory=list)
    abstained: bool | None = None
    abstain_reason: str | None = None
    selected_folders: list[str] | None = None
    timings: dict[str, float] | None = None


#: The fields of a line that define what its case checks; tags, category, difficulty, scope, metadata and
#: the line number may change without making the case another case (the gate still compares it).
DEFINITION_FIELDS = (
    "question",
    "answerable",
    "reference_answer",
    "expected_key_facts",
    "gold_supports",
    "gold_doc_ids",
    "required_support_groups",
    "recency_conflict_rule",
    "thresholds",
    "params",
    "flaky",
    "repeat",
    "skip",
    "xfail",
    "judge",
    "marks",
)


#: What a conversation's definition also covers: every turn (question, gold, key facts, reference answer,
#: answerable, thresholds) and the history its turns are sent.
CONVERSATION_FIELDS = ("turns", "history")


def definition_hash(case: EvalCase) -> str:
    """A short stable hash of what ``case`` checks (:data:`DEFINITION_FIELDS`, canonical JSON).

    Two runs' results of a case are comparable when its definition hash is the same in both: the gate
    compares those cases, names the others as changed, and a resume refuses a run whose cases changed.
    """
    fields = set(DEFINITION_FIELDS)
    if case.turns is not None:  # (a one-question line's hash stays what it was before conversations existed)
        fields |= set(CONVERSATION_FIELDS)
    data = case.model_dump(mode="json", include=fields)
    canonical = json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()[:16]
