"""The ``rageval`` argument parser: each command's sub-parser, added by the command's own module in ``cli/``.

Every command module is light to import (the standard library and ``cli.common`` at the top), so building the
parser for ``rageval --help`` loads no command's work: ``run`` imports it."""

from __future__ import annotations

import argparse

from . import calibrate, compare, history, inspect, judge, label, merge, report, rescore, schema

#: the commands in the order ``rageval --help`` lists them
COMMANDS = (schema, compare, report, judge, merge, rescore, history, label, inspect, calibrate)


def build_parser() -> argparse.ArgumentParser:
    """The parser of every command; the parsed arguments' ``func`` is the chosen command's ``run``."""
    parser = argparse.ArgumentParser(prog="rageval", description="pytest-rageval helper commands")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add_parser(sub)
    return parser
