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
    python bench/lexical_agreement.py --halueval qa_data.json --limit 150

Sets in HaluEval's QA shape (holdout4, holdout5) are also judged by groundedness alone, without the reference.

``--halueval`` reads the QA part of the public HaluEval benchmark as it is published (JSON lines of
``knowledge``, ``question``, ``right_answer``, ``hallucinated_answer``; not shipped here): each line is judged
twice over its passage, with the right answer as the reference, once answered right (label pass) and once
with the hallucinated answer (label fail).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import source_state

from pytest_rageval.judges.agreement import LabelledItem, agreement_rows, format_table, judge_items, load_labelled
from pytest_rageval.judges.lexical import LexicalJudge

DATA = Path(__file__).resolve().parents[1] / "tests" / "unit" / "judges" / "data"
DEFAULT_SETS = [
    DATA / f"lexical_{name}.jsonl" for name in ("labelled", "public", "holdout2", "holdout3", "holdout4", "holdout5")
]
#: Sets in HaluEval's QA shape (a right and a hallucinated answer over one passage): also measured by groundedness
#: alone, without the reference, as a judge sees an answer when the eval set has none.
HALUEVAL_SHAPED = [DATA / f"lexical_{name}.jsonl" for name in ("holdout4", "holdout5")]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--set", type=Path, action="append", help="labelled set (JSON lines; repeatable; default: the shipped ones)"
    )
    parser.add_argument(
        "--halueval", type=Path, help="HaluEval's qa_data.json (JSON lines), judged right and hallucinated"
    )
    parser.add_argument("--limit", type=int, default=None, help="with --halueval: its first N lines only")
    args = parser.parse_args()
    if args.halueval:
        report(args.halueval, halueval_items(args.halueval, args.limit))
        return 0
    for path in args.set or DEFAULT_SETS:
        report(path)
    if not args.set:
        for path in HALUEVAL_SHAPED:
            groundedness_alone(path)
        calibration()
    return 0


def groundedness_alone(path: Path) -> None:
    """Groundedness without the reference (>= 3 passes): right answers should pass, hallucinated ones fail."""
    import asyncio

    from pytest_rageval.judges.base import JudgeInput

    judge = LexicalJudge()
    right = wrong = caught = passed = 0
    for item in load_labelled(path):
        verdict = asyncio.run(judge.judge("groundedness", JudgeInput(item.question, item.answer, item.contexts)))
        grounded = verdict.score is not None and verdict.score >= 3
        if item.human_pass:
            right, passed = right + 1, passed + grounded
        else:
            wrong, caught = wrong + 1, caught + (not grounded)
    balanced = (passed / right + caught / wrong) / 2
    print(
        f"groundedness alone, without the reference, on {path.name}: right answers pass {passed} of {right}, "
        f"hallucinated ones fail {caught} of {wrong} (balanced accuracy {balanced:.3f})"
    )


def halueval_items(path: Path, limit: int | None) -> list[LabelledItem]:
    """Two labelled answers per HaluEval QA line: the right one (pass) and the hallucinated one (fail)."""
    items: list[LabelledItem] = []
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()][:limit]
    for number, line in enumerate(lines, start=1):
        data = json.loads(line)
        for kind, label, answer in (
            ("right", "pass", data["right_answer"]),
            ("hallucinated", "fail", data["hallucinated_answer"]),
        ):
            items.append(
                LabelledItem(
                    id=f"line{number}-{kind}",
                    split="halueval",
                    kind=kind,
                    label=label,
                    question=data["question"],
                    contexts=(data["knowledge"],),
                    reference_answer=data["right_answer"],
                    key_facts=(),
                    answer=answer,
                )
            )
    return items


def calibration() -> None:
    """``rageval calibrate``'s figures for the offline judge on the shipped set."""
    import asyncio

    from pytest_rageval.judges.calibration_measure import SHIPPED_SET, calibrate, format_figures, load_set

    figures = asyncio.run(calibrate(LexicalJudge(), load_set(SHIPPED_SET), ["groundedness", "correctness"]))
    print(f"\nrageval calibrate (the offline judge, the shipped set of {len(load_set(SHIPPED_SET))} answers):")
    print("\n".join(format_figures(figures)))


def report(path: Path, items: list[LabelledItem] | None = None) -> None:
    judged = judge_items(LexicalJudge(), load_labelled(path) if items is None else items)
    print(
        f"lexical judge ({LexicalJudge.PROMPT_VERSION}) on {path.name}: {len(judged)} labelled answers; {source_state()}\n"
    )
    print(format_table(agreement_rows(judged)))
    passes = [j for j in judged if j.item.human_pass]
    alarms = sum(not j.judge_pass for j in passes)
    print(f"\nfalse alarms (human pass, judge fail): {alarms} of {len(passes)}")
    wrong = [j for j in judged if not j.agrees]
    print(f"\n{len(wrong)} disagreements:")
    for j in wrong:
        verdict = "pass" if j.judge_pass else "fail: " + "; ".join(j.misses)
        print(
            f"- {j.item.id} [{j.item.split}, {j.item.kind}] human {j.item.label}, judge {verdict}\n    {j.item.answer}"
        )
    print()


if __name__ == "__main__":
    sys.exit(main())
