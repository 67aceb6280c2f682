"""Secrets out of every text the plugin keeps or prints: one place that masks them.

A ``Redactor`` knows the secret values of a run (header values, the judge key,
credentials in a URL) and replaces each with ``***`` wherever it shows up: as is,
URL-encoded, or hidden behind JSON ``\\uXXXX`` escapes (a text holding escapes is
decoded first when a secret is behind them). It masks whole texts: callers mask
what came from outside *after* decoding it and *before* cutting it to a length,
so no secret survives as a prefix at a cut edge.

URLs are made printable with :func:`public_url` (no ``user:pass@``, secret-looking
query values as ``***``) and command lines with :func:`public_args` (``-o`` values
of ini keys that carry secrets, values of secret-looking options and ``name=value``
arguments). HTTP libraries log each request's URL: :func:`guard_http_logs` puts a
filter on their loggers that makes those URLs public. No pytest, no I/O.
"""

from __future__ import annotations

import base64
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import quote, quote_plus, unquote, unquote_plus, urlsplit, urlunsplit

__all__ = [
    "MASK",
    "SECRET_ENV",
    "SECRET_INI",
    "Redactor",
    "environment_secrets",
    "guard_http_logs",
    "header_secrets",
    "is_secret_name",
    "public_args",
    "public_url",
    "scrub_urls",
    "url_secrets",
]

MASK = "***"
#: Shorter values are not masked: they would blank out ordinary words.
MIN_SECRET = 4
#: A part of a header value (``Bearer <token>``) is a secret of its own from this length on.
MIN_PART = 8
#: Environment variables whose values are secrets wherever they show up (the judge key).
SECRET_ENV = ("RAGEVAL_JUDGE_API_KEY", "OPENAI_API_KEY")
#: Ini keys whose values carry secrets (header values after ``${VAR}`` expansion).
SECRET_INI = ("rageval_headers",)

_SECRET_WORDS = frozenset(
    {
        "key",
        "apikey",
        "token",
        "secret",
        "password",
        "passwd",
        "pwd",
        "pass",
        "passphrase",
        "auth",
        "authorization",
        "signature",
        "sig",
        "credential",
        "credentials",
    }
)
_SECRET_SUFFIXES = ("key", "token", "secret", "password", "passwd", "signature", "credential", "credentials")


def is_secret_name(name: str) -> bool:
    """Whether a parameter, option or ini name looks like it holds a secret.

    ``api_key``, ``apiKey``, ``api-key``, ``X-Amz-Signature``, ``access_token``, ``client_secret``,
    ``password``, ``sig``, ``auth``: yes; ``lang``, ``keyword``, ``debug``: no.
    """
    words = re.findall(r"[a-z0-9]+", re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower())
    if any(word in _SECRET_WORDS for word in words):
        return True
    return "".join(words).endswith(_SECRET_SUFFIXES)


# --------------------------------------------------------------------------- JSON escapes

_ESCAPE = re.compile(r"(\\+)(?:u([0-9a-fA-F]{4})(?:\\u([dD][c-fC-F][0-9a-fA-F]{2}))?|/)")
_PERCENT = re.compile(r"%[0-9A-Fa-f]{2}")


def _decode_escape(match: re.Match[str]) -> str:
    """One ``\\uXXXX`` (or surrogate pair, or ``\\/``) as its character, unless that would change what
    the text means as JSON (a quote, a backslash, a control character or a lone surrogate stay escaped)."""
    run, high, low = match.group(1), match.group(2), match.group(3)
    if len(run) % 2 == 0:  # escaped backslashes: what follows is plain text
        return match.group(0)
    lead = run[:-1]
    if high is None:
        return lead + "/"
    code = int(high, 16)
    if 0xD800 <= code <= 0xDBFF and low is not None:
        return lead + chr(0x10000 + ((code - 0xD800) << 10) + (int(low, 16) - 0xDC00))
    char = chr(code)
    if char in '"\\' or code < 0x20 or 0xD800 <= code <= 0xDFFF:
        return match.group(0)
    return lead + char + ("\\u" + low if low else "")  # a low surrogate after a plain character stays escaped


def decode_json_escapes(text: str) -> str:
    """``text`` with its JSON ``\\uXXXX`` and ``\\/`` escapes decoded where that keeps JSON text equivalent."""
    return _ESCAPE.sub(_decode_escape, text) if "\\u" in text or "\\/" in text else text


# --------------------------------------------------------------------------- the redactor


def _variants(secret: str) -> set[str]:
    """The forms a secret travels in: as is, URL-encoded (upper and lower hex), form-encoded."""
    out = {secret}
    for encoded in (quote(secret, safe=""), quote(secret), quote_plus(secret)):
        out.add(encoded)
        out.add(re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), encoded))
    return out


class Redactor:
    """Masks a fixed set of secret values in texts and in decoded JSON data."""

    __slots__ = ("_pattern", "_secrets")

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._secrets = frozenset(s for s in secrets if isinstance(s, str) and len(s) >= MIN_SECRET)
        forms = sorted({v for s in self._secrets for v in _variants(s)}, key=lambda v: (-len(v), v))
        self._pattern = re.compile("|".join(map(re.escape, forms))) if forms else None

    def __bool__(self) -> bool:
        return self._pattern is not None

    def __repr__(self) -> str:
        return f"Redactor({len(self._secrets)} secrets)"  # never the values

    def __or__(self, other: Redactor) -> Redactor:
        return Redactor(self._secrets | other._secrets)

    def mask(self, text: str) -> str:
        """``text`` with every secret (as is, URL-encoded or behind JSON escapes) replaced by ``***``."""
        if self._pattern is None or not text:
            return text
        out = self._pattern.sub(MASK, text)
        decoded = decode_json_escapes(out)
        if decoded != out and self._pattern.search(decoded):
            out = self._pattern.sub(MASK, decoded)
        if "%" in out and _PERCENT.search(out):  # partly URL-encoded (the wholly encoded forms are matched as is)
            decoded = unquote(out)
            if self._pattern.search(decoded):
                out = self._pattern.sub(MASK, decoded)
        return out

    def mask_data(self, data: Any) -> Any:
        """A copy of decoded JSON data with every string masked, object keys included (iterative: any depth)."""
        if self._pattern is None:
            return data
        root = [data]
        stack: list[tuple[Any, Any]] = [(root, 0)]
        while stack:
            parent, slot = stack.pop()
            value = parent[slot]
            if isinstance(value, str):
                parent[slot] = self.mask(value)
            elif isinstance(value, dict):
                copy = {self.mask(k) if isinstance(k, str) else k: v for k, v in value.items()}
                parent[slot] = copy
                stack.extend((copy, k) for k in copy)
            elif isinstance(value, list):
                items = list(value)
                parent[slot] = items
                stack.extend((items, i) for i in range(len(items)))
        return root[0]


# --------------------------------------------------------------------------- where secrets come from


def environment_secrets(environ: Mapping[str, str]) -> list[str]:
    """The values of the environment variables that hold the judge key (``SECRET_ENV``)."""
    return [value.strip() for name in SECRET_ENV if (value := environ.get(name) or "").strip()]


def header_secrets(headers: Mapping[str, str]) -> list[str]:
    """Each header value, and each long part of it (the token of ``Bearer <token>``)."""
    out: list[str] = []
    for value in headers.values():
        out.append(value.strip())
        out.extend(part for part in value.split() if len(part) >= MIN_PART)
    return out


def url_secrets(url: str) -> list[str]:
    """The credentials a URL carries: its password, ``user:pass`` and its Basic-auth form, secret-looking query values."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return []
    out: list[str] = []
    userinfo = parts.netloc.rpartition("@")[0] if "@" in parts.netloc else ""
    if userinfo:
        user, _, password = (unquote(p) for p in userinfo.partition(":"))
        out += [password, userinfo]  # the user name alone is no secret (and often a common word)
        out.append(base64.b64encode(f"{user}:{password}".encode()).decode("ascii"))
    for piece in re.split(r"[&;]", f"{parts.query}&{parts.fragment}"):
        name, eq, value = piece.partition("=")
        if eq and value and is_secret_name(unquote_plus(name)):
            out += [value, unquote_plus(value)]
    return out


# --------------------------------------------------------------------------- printable forms


def _public_params(text: str) -> str:
    """``a=1&api_key=***``: secret-looking parameter values masked, the rest kept byte for byte."""
    pieces = []
    for piece in text.split("&"):
        name, eq, value = piece.partition("=")
        pieces.append(f"{name}={MASK}" if eq and value and is_secret_name(unquote_plus(name)) else piece)
    return "&".join(pieces)


def public_url(url: str) -> str:
    """``url`` without ``user:pass@`` and with secret-looking query (and fragment) values as ``***``.

    Anything that is not a ``scheme://host`` URL comes back unchanged, and so does a URL with nothing to hide.
    """
    try:
        parts = urlsplit(url)
    except ValueError:
        return re.sub(r"//[^/?#]*@", "//", url)
    if not parts.scheme or not parts.netloc:
        return url
    netloc = parts.netloc.rpartition("@")[2]
    query = _public_params(parts.query)
    fragment = _public_params(parts.fragment) if "=" in parts.fragment else parts.fragment
    if (netloc, query, fragment) == (parts.netloc, parts.query, parts.fragment):
        return url
    return urlunsplit((parts.scheme, netloc, parts.path, query, fragment))


_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")


def scrub_urls(text: str) -> str:
    """``text`` with every URL in it made public (:func:`public_url`)."""
    return _URL.sub(lambda m: public_url(m.group(0)), text) if "://" in text else text


def _public_ini(assignment: str) -> str:
    """An ``-o name=value`` value: the value masked when the key carries secrets (header names kept)."""
    name, eq, value = assignment.partition("=")
    if not eq:
        return assignment
    if name.strip() in SECRET_INI:
        lines = [
            f"{line.partition(':')[0].strip()}: {MASK}" if ":" in line else MASK
            for line in value.splitlines()
            if line.strip()
        ]
        return f"{name}={chr(10).join(lines)}"
    if is_secret_name(name):
        return f"{name}={MASK}"
    return assignment


def public_args(args: Sequence[str], redactor: Redactor | None = None) -> list[str]:
    """A command line fit to store: ``-o``/``--override-ini`` values of secret ini keys, values of
    secret-looking options (``--api-key X``, ``--token=X``) and ``name=value`` arguments masked, URLs made
    public, and every known secret masked."""
    redactor = redactor if redactor is not None else Redactor()
    out: list[str] = []
    pending = ""  # "ini": the next argument is an -o value; "value": the next argument is a secret
    for arg in args:
        if pending == "ini":
            arg = _public_ini(arg)
        elif pending == "value":
            arg = MASK
        pending = ""
        if arg in ("-o", "--override-ini"):
            pending = "ini"
        elif arg.startswith("--override-ini="):
            arg = "--override-ini=" + _public_ini(arg[len("--override-ini=") :])
        elif arg.startswith("-o") and len(arg) > 2:
            arg = "-o" + _public_ini(arg[2:])
        elif arg.startswith("--") and len(arg) > 2:
            name, eq, _value = arg[2:].partition("=")
            if is_secret_name(name):
                if eq:
                    arg = f"--{name}={MASK}"
                else:
                    pending = "value"
        elif "=" in arg and not arg.startswith("-"):
            arg = _public_ini(arg)
        out.append(redactor.mask(scrub_urls(arg)))
    return out


# --------------------------------------------------------------------------- logs

#: Loggers that print request URLs (httpx's "HTTP Request: POST <url>"; the openai SDK's httpx fork).
HTTP_LOGGERS = ("httpx", "httpx2")


class PublicUrlFilter(logging.Filter):
    """Rewrites a log record so every URL in its message is public (stateless: no secret values held)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:
            return True
        public = scrub_urls(message)
        if public != message:
            record.msg, record.args = public, None
        return True


def guard_http_logs() -> None:
    """Put a PublicUrlFilter on each HTTP library logger, once per process (idempotent)."""
    for name in HTTP_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, PublicUrlFilter) for f in logger.filters):
            logger.addFilter(PublicUrlFilter())
