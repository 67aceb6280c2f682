"""Header lines (ini ``rageval_headers``): ``Name: value`` with ``${VAR}`` read from the environment; their values
are secrets, never shown."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping

from .protocol import RagConfigError

# --------------------------------------------------------------------------- headers

_VAR = re.compile(r"\$(\$?)\{([^}]*)\}")
_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")


def parse_headers(text: str, environ: Mapping[str, str]) -> dict[str, str]:
    """Parse ``Name: value`` lines, interpolating ``${VAR}`` from ``environ`` (``$${`` is a literal ``${``)."""
    setting = "rageval_headers"
    headers: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, colon, value = line.partition(":")
        name = name.strip()
        if not colon:
            # The line may hold a secret: report its number, never its text.
            raise RagConfigError(f"{setting} line {number}: expected 'Name: value'")
        if not _HEADER_NAME.fullmatch(name):
            raise RagConfigError(f"{setting} line {number}: the header name is not a valid HTTP header name")

        def substitute(match: re.Match[str], name: str = name, number: int = number) -> str:
            escaped, var = match.group(1), match.group(2)
            if escaped:
                return "${" + var + "}"
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", var):
                raise RagConfigError(f"{setting} line {number} (header {name!r}): '${{{var}}}' is not a variable name")
            if var not in environ:
                raise RagConfigError(
                    f"{setting}: environment variable {var!r} is not set (used in header {name!r}, line {number})"
                )
            return environ[var]

        value = _VAR.sub(substitute, value.strip())
        if "\r" in value or "\n" in value:
            raise RagConfigError(f"{setting}: the value of header {name!r} contains a line break")
        for existing in list(headers):
            if existing.lower() == name.lower():
                del headers[existing]
        headers[name] = value
    return headers


class _EveryVariable(Mapping[str, str]):
    """An environment in which every variable is set (to ""): to check header syntax alone."""

    def __getitem__(self, name: str) -> str:
        return ""

    def __contains__(self, name: object) -> bool:
        return True

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


def check_headers(text: str) -> None:
    """RagConfigError for a header line that does not parse; ``${VAR}`` references are checked for syntax only."""
    parse_headers(text, _EveryVariable())
