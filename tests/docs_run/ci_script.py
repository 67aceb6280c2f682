"""Whether the commands of a page's block are commands that CI runs: a block marked ``<!-- ci: SCRIPT -->``.

A page shows a command as a reader types it (``pip install -e '.[dev]'``); the CI script runs the same command
through its interpreter and quieter (``python -m pip install --disable-pip-version-check -q -e '.[dev]'``), with
shell variables where the page has their values. A page's command is in the script when some command of the
script runs the same program (``pip`` and ``python -m pip`` are one program) and holds the page's words in the
page's order, word for word: the script may add words (its quieter flags), not change one. In the script's words,
a variable assigned a plain value (``flags="-DGGML_NATIVE=OFF"``, ``py=${1:-python}``) is that value, and any other
expansion (``"$wheels"/x.whl``, ``$(mktemp -d)``) stands for any text. Comments do not count.
"""

from __future__ import annotations

import re
import shlex

#: What separates the commands of a line.
SEPARATORS = frozenset({"&&", "||", ";", "|", "&"})
ASSIGNMENT = re.compile(r"^(?P<name>[A-Za-z_]\w*)=(?P<value>.*)$")
#: A shell expansion inside a word: ``${...}``, ``$(...)`` or ``$NAME``.
EXPANSION = re.compile(r"\$\{(?P<braced>[^}]*)\}|\$\((?P<command>[^)]*)\)|\$(?P<name>[A-Za-z_]\w*|\d)")


def commands(text: str) -> list[list[str]]:
    """The commands of a shell text, each as its words (lines joined at a trailing backslash, comments dropped)."""
    found: list[list[str]] = []
    for line in text.replace("\\\n", " ").splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|")
        lexer.whitespace_split = True
        current: list[str] = []
        for word in lexer:
            if word in SEPARATORS:
                found.append(current)
                current = []
            else:
                current.append(word)
        found.append(current)
    return [command for command in found if command]


def _values(script: list[list[str]]) -> dict[str, str]:
    """The script's variables that are assigned a plain value, or a positional parameter's default."""
    values: dict[str, str] = {}
    for command in script:
        match = ASSIGNMENT.match(command[0]) if len(command) == 1 else None
        if match is None:
            continue
        value = match.group("value")
        default = re.fullmatch(r"\$\{\d+:-([^}$]*)\}", value)
        if default is not None:
            values[match.group("name")] = default.group(1)
        elif "$" not in value:
            values[match.group("name")] = value
    return values


def _pattern(word: str, values: dict[str, str]) -> re.Pattern[str]:
    """A script's word as a pattern of the page's words: known variables as their values, others as any text."""
    parts: list[str] = []
    position = 0
    for match in EXPANSION.finditer(word):
        parts.append(re.escape(word[position : match.start()]))
        name = match.group("name") or match.group("braced") or ""
        parts.append(re.escape(values[name]) if name in values else ".*")
        position = match.end()
    parts.append(re.escape(word[position:]))
    return re.compile("".join(parts))


def _program(words: list[str]) -> tuple[str, int]:
    """The program a command runs (the module of ``python -m MODULE``) and where its arguments start."""
    start = 0
    while start < len(words) - 1 and ASSIGNMENT.match(words[start]):
        start += 1
    program = words[start].rsplit("/", 1)[-1]
    if re.fullmatch(r"python[\d.]*", program) and words[start + 1 : start + 2] == ["-m"] and len(words) > start + 2:
        return words[start + 2], start + 3
    return program, start + 1


def _holds(script_command: list[str], page_command: list[str], values: dict[str, str]) -> bool:
    resolved = [
        EXPANSION.sub(lambda m: values.get(m.group("name") or m.group("braced") or "", m.group(0)), w)
        for w in script_command
    ]
    script_program, script_start = _program(resolved)
    page_program, page_start = _program(page_command)
    if script_program != page_program:
        return False
    assignments = [_pattern(word, values) for word in script_command[: script_start - 1] if ASSIGNMENT.match(word)]
    for word in page_command[: page_start - 1]:
        if ASSIGNMENT.match(word) and not any(pattern.fullmatch(word) for pattern in assignments):
            return False
    patterns = iter(_pattern(word, values) for word in script_command[script_start:])
    return all(any(pattern.fullmatch(word) for pattern in patterns) for word in page_command[page_start:])


def missing(page_text: str, script_text: str) -> list[str]:
    """The commands of ``page_text`` that ``script_text`` does not run (see the module's docstring)."""
    script = commands(script_text)
    values = _values(script)
    return [
        shlex.join(command)
        for command in commands(page_text)
        if not any(_holds(script_command, command, values) for script_command in script)
    ]
