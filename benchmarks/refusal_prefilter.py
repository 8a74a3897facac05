"""What the refusal prefilter (``pipeline.refusal_phrases.may_refuse``) lets through to a judge, on the
labeled sets: how many answer and ground-truth texts hold a refusal cue (only those are asked about),
and how many labeled refusals do not (those the prefilter would wrongly clear). No judge is called: a
text without a cue is not a refusal whatever the judge says, so these counts bound what the prefilter
changes for any judge.

    .venv/bin/python benchmarks/refusal_prefilter.py [--data ../shared/data]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.refusal_phrases import is_refusal, may_refuse
from pipeline.sentences import first_sentences
from schemas.settings import Settings

SETS = ("refusal_delucionqa", "correctness_nq301", "grounding_halueval_qa")


def measure(path: Path) -> dict[str, int]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    settings = Settings()
    count, split = settings.pipeline.refusal_sentences, settings.split
    answers = [first_sentences(r["answer"], count, split) for r in rows]
    truths = [first_sentences(r["ground_truth"], count, split) for r in rows if r.get("ground_truth")]
    refusals = [
        a for a, r in zip(answers, rows, strict=True) if r.get("labels", {}).get("answer_refusal") == 1
    ]
    return {
        "answers": len(answers),
        "answers_with_cue": sum(map(may_refuse, answers)),
        "ground_truths": len(truths),
        "ground_truths_with_cue": sum(map(may_refuse, truths)),
        "labeled_refusals": len(refusals),
        "labeled_refusals_without_cue": sum(not may_refuse(a) for a in refusals),
        "phrase_refusals_without_cue": sum(is_refusal(a) and not may_refuse(a) for a in answers),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    args = parser.parse_args(argv)
    for name in SETS:
        path = args.data / f"{name}.jsonl"
        if path.exists():
            print(name, json.dumps(measure(path)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
