"""``rageval schema``: the JSON Schema of an eval-set line."""

from __future__ import annotations

import argparse
import json


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sub.add_parser("schema", help="print the JSON Schema of an eval-set line").set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pytest_rageval.evaluation.evalset import line_json_schema

    print(json.dumps(line_json_schema(), indent=2, sort_keys=True))
    return 0
