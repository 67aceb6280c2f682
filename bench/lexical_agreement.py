"""How often the offline lexical judge agrees with human pass/fail labels.

Judges every answer of the labelled set (``tests/data/lexical_labelled.jsonl``:
answers to questions over the demo corpus, each labelled pass/fail by hand and
tagged with its kind: paraphrase, id citation, wrong number, negation...) the
way a case with default thresholds and nothing configured is judged
(``false_abstention <= 0``, ``groundedness >= 3``, ``correctness >= 3``), and
prints agreement by kind and by split (``dev``: used while tuning the judge;
``holdout``: written afterwards, never tuned on). "fail" is the positive class:
precision = the judge's fails that humans fail too, recall = the human fails
the judge catches. Then every disagreement, with the judge's metrics.

    python bench/lexical_agreement.py
    python bench/lexical_agreement.py --set other_labels.jsonl
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import source_state  # noqa: E402

from pytest_rageval.judges.agreement import agreement_rows, format_table, judge_items, load_labelled  # noqa: E402
from pytest_rageval.judges.lexical import LexicalJudge  # noqa: E402

DEFAULT_SET = Path(__file__).resolve().parents[1] / "tests" / "data" / "lexical_labelled.jsonl"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", type=Path, default=DEFAULT_SET, help="labelled set (JSON lines)")
    args = parser.parse_args()
    judged = judge_items(LexicalJudge(), load_labelled(args.set))
    print(f"lexical judge ({LexicalJudge.PROMPT_VERSION}) on {args.set.name}: {len(judged)} labelled answers; "
          f"{source_state()}\n")
    print(format_table(agreement_rows(judged)))
    passes = [j for j in judged if j.item.human_pass]
    alarms = sum(not j.judge_pass for j in passes)
    print(f"\nfalse alarms (human pass, judge fail): {alarms} of {len(passes)}")
    wrong = [j for j in judged if not j.agrees]
    print(f"\n{len(wrong)} disagreements:")
    for j in wrong:
        verdict = "pass" if j.judge_pass else "fail: " + "; ".join(j.misses)
        print(f"- {j.item.id} [{j.item.split}, {j.item.kind}] human {j.item.label}, judge {verdict}\n    {j.item.answer}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
