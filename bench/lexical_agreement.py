"""How often the offline lexical judge agrees with human pass/fail labels.

Judges every answer of each labelled set (``tests/data/lexical_labelled.jsonl``:
answers to questions over the demo corpus; ``tests/data/lexical_public.jsonl``:
answers over short passages of public encyclopedic facts, with one swapped name,
number or date, a negation, the wrong side of a yes/no or an "A or B" question;
each labelled pass/fail by hand and tagged with its kind) the
way a case with default thresholds and nothing configured is judged
(``false_abstention <= 0``, ``groundedness >= 3``, ``correctness >= 3``), and
prints agreement by kind and by split (``dev``: used while tuning the judge;
``holdout``: written afterwards, never tuned on). "fail" is the positive class:
precision = the judge's fails that humans fail too, recall = the human fails
the judge catches. Then every disagreement, with the judge's metrics; then the
per-metric figures ``rageval calibrate`` gives for the offline judge on the set it
ships (the same code, so the same numbers).

    python bench/lexical_agreement.py
    python bench/lexical_agreement.py --set other_labels.jsonl
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import source_state

from pytest_rageval.judges.agreement import agreement_rows, format_table, judge_items, load_labelled
from pytest_rageval.judges.lexical import LexicalJudge

DATA = Path(__file__).resolve().parents[1] / "tests" / "data"
DEFAULT_SETS = [DATA / "lexical_labelled.jsonl", DATA / "lexical_public.jsonl", DATA / "lexical_holdout2.jsonl", DATA / "lexical_holdout3.jsonl"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", type=Path, action="append", help="labelled set (JSON lines; repeatable; default: both)")
    args = parser.parse_args()
    for path in args.set or DEFAULT_SETS:
        report(path)
    if not args.set:
        calibration()
    return 0


def calibration() -> None:
    """``rageval calibrate``'s figures for the offline judge on the shipped set."""
    import asyncio

    from pytest_rageval.judges.calibrate import SHIPPED_SET, calibrate, format_figures, load_set

    figures = asyncio.run(calibrate(LexicalJudge(), load_set(SHIPPED_SET), ["groundedness", "correctness"]))
    print(f"\nrageval calibrate (the offline judge, the shipped set of {len(load_set(SHIPPED_SET))} answers):")
    print("\n".join(format_figures(figures)))


def report(path: Path) -> None:
    judged = judge_items(LexicalJudge(), load_labelled(path))
    print(f"lexical judge ({LexicalJudge.PROMPT_VERSION}) on {path.name}: {len(judged)} labelled answers; {source_state()}\n")
    print(format_table(agreement_rows(judged)))
    passes = [j for j in judged if j.item.human_pass]
    alarms = sum(not j.judge_pass for j in passes)
    print(f"\nfalse alarms (human pass, judge fail): {alarms} of {len(passes)}")
    wrong = [j for j in judged if not j.agrees]
    print(f"\n{len(wrong)} disagreements:")
    for j in wrong:
        verdict = "pass" if j.judge_pass else "fail: " + "; ".join(j.misses)
        print(f"- {j.item.id} [{j.item.split}, {j.item.kind}] human {j.item.label}, judge {verdict}\n    {j.item.answer}")
    print()


if __name__ == "__main__":
    sys.exit(main())
