"""Request and response maps (ini ``rageval_request_map``, ``rageval_response_map``): the body a question is sent
in, and a target's answer read into a ``RagResponse``.

Response mapping: one ``target = source`` line
per field to read from somewhere else than the default; sources are dotted paths
into the JSON (a numeric segment indexes a list). Targets and their defaults::

    answer           = answer                      (required; "" is allowed)
    references       = references
    retrieved_chunks = debug.retrieved_chunks      (falls back to retrieved_chunks)
    abstained        = abstained
    abstain_reason   = abstain_reason
    selected_folders = debug.folder_selection.selected_folders
                                                   (falls back to selected_folders)
    timings          = timings                     (non-numeric entries are dropped)

An empty source (``timings =``) stops a field from being read. Lines
``references.<key> = <item key>`` and ``retrieved_chunks.<key> = <item key>``
rename keys inside each item of the two chunk lists: the chunk's ``<key>`` gets
the value of the item's ``<item key>`` (a dotted path as well); all other keys
pass through. A response in another shape such as
``{answer, citations: [{proposal_id, stage, url, snippet}]}`` is read with::

    references = citations
    references.doc_id = proposal_id
    references.text = snippet
    retrieved_chunks = citations
    retrieved_chunks.doc_id = proposal_id
    retrieved_chunks.text = snippet

Request mapping (ini ``rageval_request_map``): ``question = query`` sends the
question under the key ``query``; ``k = topK`` renames ``k``; ``k =`` (empty)
leaves the field out. Any body key (also a case's params) can be renamed; a"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from pytest_rageval.evaluation.schema import Chunk, RagResponse
from pytest_rageval.suggest import did_you_mean

from .headers import check_headers
from .protocol import RagCallError, RagConfigError

_MISSING: Any = object()


# --------------------------------------------------------------------------- response mapping

_TOP_TARGETS = (
    "answer",
    "references",
    "retrieved_chunks",
    "abstained",
    "abstain_reason",
    "selected_folders",
    "timings",
)
LIST_TARGETS = ("references", "retrieved_chunks")
_CHUNK_KEYS = tuple(Chunk.model_fields)
# Used when the default source is absent, so that a dict in the package's own
# field names (e.g. RagResponse.model_dump()) reads without configuration.
_FALLBACKS = {"retrieved_chunks": "retrieved_chunks", "selected_folders": "selected_folders"}

KeyRenames = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class ResponseMap:
    """Where each part of the response is read from (dotted paths; "" = not read)."""

    answer: str = "answer"
    references: str = "references"
    retrieved_chunks: str = "debug.retrieved_chunks"
    abstained: str = "abstained"
    abstain_reason: str = "abstain_reason"
    selected_folders: str = "debug.folder_selection.selected_folders"
    timings: str = "timings"
    references_keys: KeyRenames = ()  # (chunk key, item key) pairs
    retrieved_chunks_keys: KeyRenames = ()

    def as_dict(self) -> dict[str, str]:
        """The mapping as ``{target: source}``, item renames as ``"references.doc_id"``."""
        out = {name: getattr(self, name) for name in _TOP_TARGETS}
        for name in LIST_TARGETS:
            for key, source in getattr(self, f"{name}_keys"):
                out[f"{name}.{key}"] = source
        return out

    def is_default(self, target: str) -> bool:
        return bool(getattr(self, target) == getattr(_DEFAULT_MAP, target))


_DEFAULT_MAP = ResponseMap()


def _all_response_targets() -> list[str]:
    return [*_TOP_TARGETS, *(f"{name}.{key}" for name in LIST_TARGETS for key in _CHUNK_KEYS)]


def _valid_response_targets() -> str:
    return ", ".join(_TOP_TARGETS) + ", references.<chunk key>, retrieved_chunks.<chunk key>"


def _ini_lines(text: str, setting: str) -> list[tuple[int, str, str]]:
    """``(line number, left, right)`` of the ``left = right`` lines; blanks and ``#`` comments skipped."""
    out = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if "=" not in line:
            raise RagConfigError(f"{setting} line {number}: expected 'target = source', got {line!r}")
        left, _, right = line.partition("=")
        left, right = left.strip(), right.strip()
        if not left:
            raise RagConfigError(f"{setting} line {number}: missing the name before '='")
        out.append((number, left, right))
    return out


def parse_response_map(text: str) -> ResponseMap:
    """Parse ini lines ``target = source`` into a ResponseMap (unset targets keep defaults)."""
    setting = "rageval_response_map"
    fields: dict[str, str] = {}
    renames: dict[str, dict[str, str]] = {name: {} for name in LIST_TARGETS}
    seen: set[str] = set()
    for number, target, source in _ini_lines(text, setting):
        if target in seen:
            raise RagConfigError(f"{setting} line {number}: {target!r} is set twice")
        seen.add(target)
        if target in _TOP_TARGETS:
            if target == "answer" and not source:
                raise RagConfigError(f"{setting} line {number}: 'answer' needs a source path")
            _check_path(source, setting, number)
            fields[target] = source
            continue
        head, dot, key = target.partition(".")
        if dot and head in LIST_TARGETS:
            if key not in _CHUNK_KEYS:
                raise RagConfigError(
                    f"{setting} line {number}: {key!r} is not a chunk key{did_you_mean(key, _CHUNK_KEYS)}; valid chunk keys: {', '.join(_CHUNK_KEYS)}"
                )
            if not source:
                raise RagConfigError(f"{setting} line {number}: {target!r} needs a source key")
            _check_path(source, setting, number)
            renames[head][key] = source
            continue
        raise RagConfigError(
            f"{setting} line {number}: unknown target {target!r}{did_you_mean(target, _all_response_targets())}; "
            f"valid targets: {_valid_response_targets()}"
        )
    return ResponseMap(
        **fields,
        references_keys=tuple(renames["references"].items()),
        retrieved_chunks_keys=tuple(renames["retrieved_chunks"].items()),
    )


def _check_path(path: str, setting: str, number: int) -> None:
    if path and any(not part for part in path.split(".")):
        raise RagConfigError(f"{setting} line {number}: {path!r} is not a dotted path")


def parse_request_map(text: str) -> dict[str, str]:
    """Parse ini lines ``field = sent_as`` (``k =`` drops ``k`` from the body)."""
    setting = "rageval_request_map"
    out: dict[str, str] = {}
    for number, name, sent_as in _ini_lines(text, setting):
        if name in out:
            raise RagConfigError(f"{setting} line {number}: {name!r} is set twice")
        if name == "question" and not sent_as:
            raise RagConfigError(f"{setting} line {number}: the question cannot be left out of the request")
        if sent_as:
            _check_path(sent_as, setting, number)
            if sent_as in out.values():
                raise RagConfigError(f"{setting} line {number}: two fields are sent as {sent_as!r}")
        out[name] = sent_as
    return out


def _get_path(data: Any, path: str) -> Any:
    """The value at a dotted path, or ``_MISSING``."""
    current = data
    for part in path.split("."):
        if isinstance(current, dict):
            if part not in current:
                return _MISSING
            current = current[part]
        elif isinstance(current, list) and re.fullmatch(r"-?\d+", part):
            index = int(part)
            if not -len(current) <= index < len(current):
                return _MISSING
            current = current[index]
        else:
            return _MISSING
    return current


def type_name(value: Any) -> str:
    if value is None:
        return "null"
    return {dict: "object", list: "array", str: "string", bool: "boolean"}.get(type(value), type(value).__name__)


def _invalid(message: str) -> RagCallError:
    return RagCallError("invalid_response", message)


def _read(data: dict[str, Any], response_map: ResponseMap, target: str) -> tuple[Any, str]:
    """The raw value of a target and the path it came from (``_MISSING`` if absent)."""
    source = getattr(response_map, target)
    if not source:
        return _MISSING, source
    value = _get_path(data, source)
    if value is _MISSING and target in _FALLBACKS and response_map.is_default(target):
        fallback = _get_path(data, _FALLBACKS[target])
        if fallback is not _MISSING:
            return fallback, _FALLBACKS[target]
    return value, source


def _map_items(value: Any, target: str, source: str, renames: KeyRenames) -> list[dict[str, Any]]:
    if value is _MISSING or value is None:
        return []
    if not isinstance(value, list):
        raise _invalid(f"response '{target}' is not a list (got {type_name(value)}; looked for '{source}')")
    items = []
    for index, item in enumerate(value):
        if not isinstance(item, dict):
            raise _invalid(
                f"response '{target}[{index}]' is not an object (got {type_name(item)}; looked for '{source}')"
            )
        mapped = dict(item)
        for key, item_source in renames:
            found = _get_path(item, item_source)
            if found is not _MISSING:
                mapped[key] = found
        items.append(mapped)
    return items


def _loc_text(loc: tuple[Any, ...]) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def relative_paths(items: list[Any], docs_root: Path | None) -> list[Any]:
    """The chunk dicts of ``items`` with an absolute ``rel_path`` under ``docs_root`` made relative to it
    (``/srv/app/docs/hr/leave.md`` gives ``hr/leave.md``); other items and paths as they are."""
    from pytest_rageval.evaluation.docpaths import is_absolute, relative_path

    out = []
    for item in items:
        path = item.get("rel_path") if isinstance(item, dict) else None
        if isinstance(path, str) and is_absolute(path):
            item = {**item, "rel_path": relative_path(path, docs_root) or path}
        out.append(item)
    return out


def map_response(data: Any, response_map: ResponseMap, docs_root: Path | None = None) -> RagResponse:
    """Normalise a decoded JSON response into a RagResponse (pure).

    Chunk paths are made relative to ``docs_root`` (:func:`relative_paths`).
    Raises RagCallError("invalid_response") naming what was missing or wrong.
    """
    if not isinstance(data, dict):
        raise _invalid(f"response is not a JSON object (got {type_name(data)})")
    answer, answer_source = _read(data, response_map, "answer")
    if answer is _MISSING:
        raise _invalid(f"response has no 'answer' (looked for '{answer_source}')")
    if not isinstance(answer, str):
        raise _invalid(f"response 'answer' is {type_name(answer)}, not a string (looked for '{answer_source}')")

    fields: dict[str, Any] = {"answer": answer}
    sources: dict[str, str] = {"answer": answer_source}
    for target in LIST_TARGETS:
        value, source = _read(data, response_map, target)
        sources[target] = source
        fields[target] = relative_paths(
            _map_items(value, target, source, getattr(response_map, f"{target}_keys")), docs_root
        )
    for target in ("abstained", "abstain_reason", "selected_folders"):
        value, source = _read(data, response_map, target)
        sources[target] = source
        if value is not _MISSING and value is not None:
            fields[target] = value
    timings, sources["timings"] = _read(data, response_map, "timings")
    if timings is not _MISSING and timings is not None:
        if not isinstance(timings, dict):
            raise _invalid(
                f"response 'timings' is not an object (got {type_name(timings)}; looked for '{sources['timings']}')"
            )
        fields["timings"] = {
            str(name): float(ms)
            for name, ms in timings.items()
            if isinstance(ms, (int, float)) and not isinstance(ms, bool)
        }

    try:
        return RagResponse.model_validate(fields)
    except ValidationError as exc:
        errors = exc.errors()
        first = errors[0]
        loc = tuple(first.get("loc", ()))
        where = _loc_text(loc) or "response"
        source = sources.get(str(loc[0]), "") if loc else ""
        more = f" (and {len(errors) - 1} more problems)" if len(errors) > 1 else ""
        looked = f"; looked for '{source}'" if source else ""
        raise _invalid(f"response '{where}' is invalid: {first.get('msg', 'invalid value')}{looked}{more}") from None


def check_maps(headers_text: str, request_map_text: str, response_map_text: str) -> None:
    """RagConfigError for a header, request-map or response-map line that does not parse.

    Header ``${VAR}`` references are checked for syntax only: without a target
    the headers are not sent, so their variables need not be set.
    """
    check_headers(headers_text)
    parse_request_map(request_map_text)
    parse_response_map(response_map_text)


def _set_path(body: dict[str, Any], path: str, value: Any) -> None:
    parts = path.split(".")
    current = body
    for part in parts[:-1]:
        nxt = current.get(part)
        if not isinstance(nxt, dict):
            nxt = current[part] = {}
        current = nxt
    current[parts[-1]] = value


def build_body(question: str, k: int, params: Mapping[str, Any], request_map: Mapping[str, str]) -> dict[str, Any]:
    merged: dict[str, Any] = {"question": question, "k": k, **params}
    body: dict[str, Any] = {}
    renamed: list[tuple[str, Any]] = []
    for key, value in merged.items():
        if key in request_map:
            if request_map[key]:
                renamed.append((request_map[key], value))
        else:
            body[key] = value
    for path, value in renamed:  # explicit renames win over plain keys
        _set_path(body, path, value)
    return body
