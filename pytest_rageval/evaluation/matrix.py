"""The config matrix: axes of parameter values, their combinations, and the ids that name them.

Pure logic (layer 1): no pytest, no I/O. A :class:`Matrix` comes from the
``[tool.rageval.matrix]`` table (:func:`matrix_from_table`) or from
``--rageval-matrix 'top_k=10,20;alpha=0.0,0.5'`` (:func:`parse_matrix_option`);
:meth:`Matrix.configs` lists every combination not excluded, in an order that
depends on nothing but the input: axes sorted by name, each axis's values in
the order given. A combination's id is ``alpha=0.5-strategy=none-top_k=10``
(params sorted by name, values escaped where they could blur it: :func:`id_value`),
the part of a node id between the brackets. ``k`` or
``top_k`` is the retrieval depth: :meth:`Matrix.ask_depth` is the depth a
config's question is asked at (the largest of the configs that share its other
params, unless ``slice_k`` is off). Every mistake is one :class:`MatrixError`
naming the option or key.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pytest_rageval.errors import ConfigError
from pytest_rageval.redact import public_url

__all__ = [
    "DEPTH_AXES",
    "OPTION",
    "TABLE",
    "Matrix",
    "MatrixConfig",
    "MatrixError",
    "config_keyword",
    "id_value",
    "matrix_from_table",
    "parse_matrix_option",
    "rewrite_keyword_expression",
    "value_text",
]

Value = str | int | float | bool | None

OPTION = "--rageval-matrix"
TABLE = "[tool.rageval.matrix]"
#: axis names that set the retrieval depth (the k a case is asked and scored at)
DEPTH_AXES = ("k", "top_k")
#: the axis whose values are targets (URLs or MOD:FN), not params sent to the system
TARGET_AXIS = "target"
#: keys of the table that are no axis
RESERVED = ("exclude", "slice_k")
#: param names the plugin sends itself: an axis of that name would replace what each case asks
SENT_BY_THE_PLUGIN = {"question": "the question sent is each case's own 'question'"}
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class MatrixError(ConfigError):
    """The matrix is wrong; the message names the option or key and the problem."""


def value_text(value: Value) -> str:
    """A value as it appears in a config id: JSON's spelling for numbers, booleans and null, a string as is."""
    if isinstance(value, str):
        return value
    if isinstance(value, float):
        return repr(value)
    return json.dumps(value)


def id_value(text: str) -> str:
    """``text`` as a config id shows it: as is, but for the characters that could blur the id or a node id.

    ``%``, ``=``, ``[``, ``]``, whitespace and every character that is not printable
    (control, format such as bidi overrides, separators, surrogates) become ``%XX``,
    the percent-encoding of their UTF-8 bytes; so does each ``:`` of a run of two or
    more (``::`` splits node ids), while a lone ``:`` stays (``http://host:8080/x``).
    ``-``, ``.``, ``/`` and other printable characters stay as they are.
    """
    out = []
    for index, char in enumerate(text):
        if _blurs(text, index, char):
            out.append("".join(f"%{byte:02X}" for byte in char.encode("utf-8", "surrogatepass")))
        else:
            out.append(char)
    return "".join(out)


def _blurs(text: str, index: int, char: str) -> bool:
    if char in "%=[]" or char.isspace() or not char.isprintable():
        return True
    return char == ":" and (text[index - 1 : index] == ":" or text[index + 1 : index + 2] == ":")


def _scalar(text: str) -> Value:
    """``text`` as a JSON scalar where it parses as one (numbers, true/false/null, "quoted"), else the string."""
    try:
        value = json.loads(text)
    except ValueError:
        return text
    if isinstance(value, float) and not math.isfinite(value):
        return text
    return value if isinstance(value, (str, int, float, bool)) or value is None else text


@dataclass(frozen=True)
class MatrixConfig:
    """One combination: its params sorted by name, and its id."""

    params: tuple[tuple[str, Value], ...]

    @property
    def id(self) -> str:
        """``name=value`` per param, joined by ``-``: ``alpha=0.5-model=gpt-4o-mini-top_k=10``.

        Two configs of a matrix never share an id. A name is letters, digits and
        ``_`` (:func:`_check_axis`), so it holds no ``-`` or ``=``; a value is
        :func:`id_value` of its text, which holds no ``=`` and turns ``%`` into
        ``%25``. Reading an id back is therefore unambiguous: split it at ``=``;
        the first piece is the first name, the last piece the last value, and in
        each piece between, the last ``-`` ends a value and starts the next name
        (a value may hold ``-``, a name cannot); percent-decoding a value gives its
        text back, since every ``%`` of the text was escaped. Within an axis no two
        values share a text (refused as "given twice"), so the id names one config.
        """
        return "-".join(f"{name}={id_value(value_text(value))}" for name, value in self.public_params())

    def public_params(self) -> tuple[tuple[str, Value], ...]:
        """The params as artifacts show them: a target URL without credentials or secret query values."""
        return tuple((name, _public(name, value)) for name, value in self.params)

    def as_dict(self) -> dict[str, Value]:
        """The params for records and metrics.json (public: see :meth:`public_params`)."""
        return dict(self.public_params())

    @property
    def k(self) -> int | None:
        """The retrieval depth this config sets (its ``k`` or ``top_k``), or None."""
        for name, value in self.params:
            if name in DEPTH_AXES:
                assert isinstance(value, int)
                return value
        return None

    @property
    def target(self) -> str | None:
        """The target this config asks (as given, credentials included: never written anywhere)."""
        value = dict(self.params).get(TARGET_AXIS)
        return None if value is None else str(value)

    def sent_params(self) -> dict[str, Value]:
        """The params the system is sent: every axis but the target and the depth (sent as ``k``)."""
        return {name: value for name, value in self.params if name != TARGET_AXIS and name not in DEPTH_AXES}

    def keywords(self) -> list[str]:
        """The extra ``-k`` keywords of an item in this config: ``matrix[top_k:10]`` per param (see rewrite)."""
        return [config_keyword(name, value) for name, value in self.public_params()]


def _public(name: str, value: Value) -> Value:
    return public_url(value) if name == TARGET_AXIS and isinstance(value, str) else value


def config_keyword(name: str, value: Value) -> str:
    """The keyword ``-k 'name=value'`` is rewritten to (pytest's ``-k`` has no ``=`` in a name)."""
    return f"matrix[{name}:{value_text(value)}]"


@dataclass(frozen=True)
class Matrix:
    """Axes (sorted by name) with their values, the excluded partial combinations, and whether k is sliced."""

    axes: tuple[tuple[str, tuple[Value, ...]], ...]
    exclude: tuple[tuple[tuple[str, Value], ...], ...] = ()
    slice_k: bool = True
    source: str = TABLE  # where it was given: the option or the table (for messages)

    def configs(self) -> list[MatrixConfig]:
        """Every combination not excluded: axes by name, values in the order given."""
        names = [name for name, _ in self.axes]
        out = []
        for values in itertools.product(*(vals for _, vals in self.axes)):
            params = tuple(zip(names, values))
            if not any(_matches(params, rule) for rule in self.exclude):
                out.append(MatrixConfig(params))
        return out

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.axes)

    def ask_depth(self, config: MatrixConfig, default_k: int) -> int:
        """The k ``config``'s question is asked at: the largest k of the configs sharing its other params (one
        request serves them all, each scored on its own slice), or its own k when ``slice_k`` is off."""
        own = config.k or default_k
        if not self.slice_k:
            return own
        others = _without_depth(config)
        return max((c.k or default_k) for c in self.configs() if _without_depth(c) == others)

    def request_group(self, config: MatrixConfig) -> tuple[Any, ...]:
        """What one request serves: the config's params but the depth (and its depth too when ``slice_k`` is off)."""
        return _without_depth(config) + (() if self.slice_k else (config.k,))

    def group_size(self, config: MatrixConfig) -> int:
        """How many configs one request of ``config``'s group serves."""
        group = self.request_group(config)
        return sum(1 for c in self.configs() if self.request_group(c) == group)

    def snapshot(self) -> dict[str, Any]:
        """What config.json and the config hash hold of it (target URLs public)."""
        return {
            "axes": {name: [_public(name, v) for v in values] for name, values in self.axes},
            "exclude": [dict(rule) for rule in self.exclude],
            "slice_k": self.slice_k,
        }


def _without_depth(config: MatrixConfig) -> tuple[tuple[str, Value], ...]:
    return tuple((n, v) for n, v in config.params if n not in DEPTH_AXES)


def _matches(params: tuple[tuple[str, Value], ...], rule: tuple[tuple[str, Value], ...]) -> bool:
    given = dict(params)
    return all(name in given and _same(given[name], value) for name, value in rule)


def _same(a: Value, b: Value) -> bool:
    """Equal and of the same kind (``1`` is not ``true``, ``1`` is ``1.0``)."""
    return isinstance(a, bool) == isinstance(b, bool) and isinstance(a, str) == isinstance(b, str) and a == b


def _check_axis(where: str, name: str, values: list[Value]) -> tuple[Value, ...]:
    if not _NAME.match(name):
        raise MatrixError(f"{where}: axis {name!r}: a name is letters, digits and _ (not starting with a digit)")
    if not values:
        raise MatrixError(f"{where}: axis {name!r} is empty: give at least one value")
    texts: dict[str, Value] = {}
    for value in values:
        if isinstance(value, float) and not math.isfinite(value):
            raise MatrixError(f"{where}: axis {name!r}: {value!r} is not a finite number")
        if not (isinstance(value, (str, int, float, bool)) or value is None):
            raise MatrixError(f"{where}: axis {name!r}: {value!r} is not a string, number, boolean or null")
        text = value_text(_public(name, value))
        if text in texts:
            raise MatrixError(f"{where}: axis {name!r}: the value {text!r} is given twice")
        if not text:
            raise MatrixError(f"{where}: axis {name!r}: an empty value cannot name a config")
        texts[text] = value
    if name in DEPTH_AXES:
        for value in values:
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise MatrixError(
                    f"{where}: axis {name!r} is the retrieval depth: every value must be a whole number >= 1, got {value_text(value)!r}"
                )
    if name == TARGET_AXIS:
        for value in values:
            if not isinstance(value, str):
                raise MatrixError(f"{where}: axis 'target': {value_text(value)!r} is no URL or 'module:callable'")
    return tuple(values)


def _build(where: str, axes: list[tuple[str, list[Value]]], exclude: Any, slice_k: Any) -> Matrix:
    seen: set[str] = set()
    checked: list[tuple[str, tuple[Value, ...]]] = []
    for name, values in axes:
        if name in seen:
            raise MatrixError(f"{where}: axis {name!r} is given twice")
        if name in RESERVED:
            raise MatrixError(f"{where}: {name!r} is no axis name (it is a key of {TABLE})")
        if name in SENT_BY_THE_PLUGIN:
            raise MatrixError(f"{where}: axis {name!r} is reserved: {SENT_BY_THE_PLUGIN[name]}")
        seen.add(name)
        checked.append((name, _check_axis(where, name, values)))
    if not checked:
        raise MatrixError(f"{where}: no axis: give at least one, e.g. 'top_k=5,10;alpha=0.0,0.5'")
    depth = [name for name in seen if name in DEPTH_AXES]
    if len(depth) > 1:
        raise MatrixError(f"{where}: 'k' and 'top_k' both set the retrieval depth: keep one")
    if not isinstance(slice_k, bool):
        raise MatrixError(f"{TABLE} slice_k: must be true or false, got {slice_k!r}")
    checked.sort(key=lambda pair: pair[0])
    matrix = Matrix(tuple(checked), _exclude(exclude, dict(checked)), slice_k, where)
    if not matrix.configs():
        raise MatrixError(f"{TABLE} exclude: leaves out every combination")
    return matrix


def _exclude(rules: Any, axes: Mapping[str, tuple[Value, ...]]) -> tuple[tuple[tuple[str, Value], ...], ...]:
    where = f"{TABLE} exclude"
    if rules is None:
        return ()
    if not isinstance(rules, list):
        raise MatrixError(f'{where}: must be a list of tables, e.g. exclude = [{{strategy = "hyde", top_k = 20}}]')
    out = []
    for index, rule in enumerate(rules):
        at = f"{where}[{index}]"
        if not isinstance(rule, Mapping) or not rule:
            raise MatrixError(f'{at}: must be a table of axis = value, e.g. {{strategy = "hyde", top_k = 20}}')
        for name, value in rule.items():
            if name not in axes:
                from pytest_rageval.suggest import did_you_mean

                raise MatrixError(
                    f"{at}: unknown axis {name!r}{did_you_mean(name, list(axes))} (axes: {', '.join(axes)})"
                )
            if not any(_same(value, v) for v in axes[name]):
                raise MatrixError(
                    f"{at}: {name} = {value_text(value)!r} is not a value of the axis ({', '.join(value_text(v) for v in axes[name])})"
                )
        out.append(tuple(sorted(rule.items())))
    return tuple(out)


def matrix_from_table(table: Mapping[str, Any], *, slice_k: bool | None = None) -> Matrix | None:
    """The matrix of a ``[tool.rageval.matrix]`` table (None when it is empty); ``slice_k`` overrides the table's."""
    if not table:
        return None
    axes: list[tuple[str, list[Value]]] = []
    for name, values in table.items():
        if name in RESERVED:
            continue
        if not isinstance(values, list):
            raise MatrixError(f"{TABLE} {name}: must be a list of values, e.g. {name} = [1, 2], got {values!r}")
        axes.append((name, values))
    if not axes:
        raise MatrixError(f"{TABLE}: no axis: add one, e.g. top_k = [5, 10]")
    return _build(TABLE, axes, table.get("exclude"), table.get("slice_k", True) if slice_k is None else slice_k)


def parse_matrix_option(text: str, *, slice_k: bool = True) -> Matrix:
    """``'top_k=10,20;alpha=0.0,0.5'``: axes separated by ``;``, values by ``,``, each a JSON scalar where it parses."""
    axes: list[tuple[str, list[Value]]] = []
    for part in (p.strip() for p in text.split(";")):
        if not part:
            continue
        name, eq, values = part.partition("=")
        name = name.strip()
        if not eq or not name:
            raise MatrixError(
                f"{OPTION}: expected NAME=V1,V2 in {part!r} (axes separated by ';', e.g. 'top_k=5,10;alpha=0.0,0.5')"
            )
        texts = [v.strip() for v in values.split(",")]
        if texts == [""]:
            raise MatrixError(f"{OPTION}: axis {name!r} is empty: give at least one value")
        if "" in texts:
            raise MatrixError(f"{OPTION}: axis {name!r}: an empty value in {values!r}")
        axes.append((name, [_scalar(t) for t in texts]))
    return _build(OPTION, axes, None, slice_k)


#: a ``name=value`` term of a ``-k`` expression (pytest's identifier characters on both sides)
_TERM = re.compile(r"(?<![\w:+.\[\]\\/-])([A-Za-z_]\w*)=([\w:+.\[\]\\/-]+)")


def rewrite_keyword_expression(expression: str, names: Iterable[str]) -> str:
    """``-k 'top_k=10 and not strategy=hyde'`` -> ``matrix[top_k:10] and not matrix[strategy:hyde]``.

    pytest's ``-k`` grammar has no ``=`` in a name, so each ``name=value`` term
    whose name is an axis becomes the exact keyword each item of that config
    carries (:func:`config_keyword`). ``value`` is read as in the option: ``0.50``
    matches the config ``alpha=0.5``. Other text is left as it is.
    """
    axes = set(names)

    def term(match: re.Match[str]) -> str:
        name, value = match.group(1), match.group(2)
        if name not in axes:
            return match.group(0)
        return config_keyword(name, _scalar(value))

    return _TERM.sub(term, expression)
