"""The page's building blocks: :class:`Html` fragments and the formatting every part of report.html shares.

A fragment is written as a template, ``Html("<td>{}</td>").format(value)``, and anything that is not already
``Html`` (what came from the RAG, the judge or the eval set) is escaped where it joins one (``format``, ``+``,
``join``), so a value cannot reach the page unescaped by being forgotten.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Iterable
from typing import Any

from markupsafe import Markup

from pytest_rageval import safejson

__all__ = [
    "DASH",
    "EMPTY",
    "OUTCOMES",
    "Html",
    "badge",
    "escape",
    "fmt",
    "fmt_count",
    "fmt_delta",
    "fmt_interval",
    "is_number",
    "join",
    "kv_list",
    "kv_value",
    "num_td",
    "outcome_class",
    "table",
]

OUTCOMES = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")
DASH = "\u2014"


class Html(Markup):
    """A fragment of the page: markup as it is; any other value joined to it (``format``, ``+``, ``join``, ``%``)
    is escaped with ``html.escape(..., quote=True)`` (the page's bytes as before: ``&#x27;``, ``&quot;``)."""

    __slots__ = ()

    @classmethod
    def escape(cls, s: Any, /) -> Html:
        """``s`` as text in HTML (text or a quoted attribute); markup (anything with ``__html__``) stays as is."""
        if hasattr(s, "__html__"):
            return cls(s.__html__())
        return cls(html.escape(s if isinstance(s, str) else str(s), quote=True))


EMPTY = Html("")


def escape(value: Any) -> Html:
    """Anything as text for HTML text or a quoted attribute (markup stays as is); ``None`` becomes ''."""
    if value is None:
        return EMPTY
    return Html.escape(value)


def join(parts: Iterable[Any]) -> Html:
    """The fragments one after another (a part that is no fragment is escaped)."""
    return EMPTY.join(parts)


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def fmt(value: Any) -> Html:
    """A metric value: 3 decimals for floats, '—' for null, escaped text otherwise."""
    if value is None:
        return Html(DASH)
    if isinstance(value, bool):
        return Html("true" if value else "false")
    if isinstance(value, float) and math.isfinite(value):
        return Html("{:.3f}").format(value)
    if isinstance(value, (dict, list)):
        return escape(safejson.dumps(value))
    return escape(value)


def fmt_delta(value: Any) -> Html:
    """A signed delta (``+0.050``)."""
    if is_number(value) and math.isfinite(value):
        return Html("{:+.3f}").format(value)
    return fmt(value)


def fmt_interval(low: Any, high: Any) -> Html:
    """A 95% interval as ``[-0.120, +0.030]``; '—' when it has no bounds."""
    if low is None and high is None:
        return Html(DASH)
    return Html("[{}, {}]").format(fmt_delta(low), fmt_delta(high))


def fmt_count(value: Any) -> Html:
    if value is None:
        return Html(DASH)
    if isinstance(value, float) and value.is_integer():
        return escape(int(value))
    return fmt(value)


def outcome_class(outcome: Any) -> str:
    """A CSS-safe class suffix for an outcome (never raw input)."""
    return outcome if outcome in OUTCOMES else "other"


def badge(label: str, kind: str) -> Html:
    return Html('<span class="badge b-{}">{}</span>').format(kind, label)


def table(headers: Iterable[str], rows: Iterable[Html], cls: str = "") -> Html:
    """A table from header labels (text) and rendered ``<tr>`` rows."""
    head = join(Html("<th>{}</th>").format(h) for h in headers)
    attr = Html(' class="{}"').format(cls) if cls else EMPTY
    return Html("<table{}><thead><tr>{}</tr></thead><tbody>{}</tbody></table>").format(attr, head, join(rows))


def num_td(value: Any, formatter: Callable[[Any], Html] = fmt) -> Html:
    return Html('<td class="num">{}</td>').format(formatter(value))


def kv_list(pairs: Iterable[tuple[Any, Any]]) -> Html:
    items = join(Html("<dt>{}</dt><dd>{}</dd>").format(escape(k), kv_value(v)) for k, v in pairs)
    return Html('<dl class="kv">{}</dl>').format(items)


def kv_value(value: Any) -> Html:
    if isinstance(value, str):
        return Html('<span class="mono">{}</span>' if len(value) < 200 else '<div class="text">{}</div>').format(value)
    return fmt(value)
