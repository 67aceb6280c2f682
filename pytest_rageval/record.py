"""The per-case record (placeholder until the typed record lands)."""

from __future__ import annotations

from typing import Any, Literal

CaseRecord = dict[str, Any]
ErrorKind = Literal["timeout", "http", "connection", "invalid_response", "target", "judge", "other", "unwritable", "invalid_line"]


def error(kind: ErrorKind, message: str) -> dict[str, str]:
    """The ``error`` field of a record."""
    return {"kind": kind, "message": message}
