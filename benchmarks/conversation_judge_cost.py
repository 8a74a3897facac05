"""Conversation judge cost: the extra judge calls and tokens per conversation of ``conversations.judge`` llm.

    python benchmarks/conversation_judge_cost.py [--conversations 300] [--seed 34] \
        [--json build/bench/conversation_judge_cost.json]

Builds conversations from the bundled sample (groundwatch/data/sample_interactions.jsonl: each of 2 to 6
turns, the questions and answers of one app in a random order), a third of them with a planted re-ask
(a rewrite of an earlier question: benchmarks/conversation_detection.py's ``rewrite``) and a third with
a planted contradiction (an earlier answer with a value changed: its ``change_value``). Then decides
their re-asks and contradictions with ``pipeline.conversation_judge.ConversationJudge``, the ``openai``
judge pointed at the scripted fake OpenAI-compatible server (tests/fakes/openai_server.py, in this
process; its token counts are estimates from the characters sent and received), verdict cache off, at
the defaults (``judge_candidate_similarity`` 0.2, ``judge_max_pairs`` 20) and without the pre-filter
(every pair a candidate) capped at 20 and at 5 pairs a kind, beside the lexical rules (the baseline: no
call) in the same run.

Figures per conversation: judge calls, input and output tokens (mean and max), the pairs sent against
all pairs of turns (what the lexical pre-filter and the cap keep back). The fake's verdicts are
scripted, so this measures cost, not accuracy.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.conversation_detection import change_value, load, rewrite  # noqa: E402
from benchmarks.machine import write_json  # noqa: E402
from pipeline.conversation_judge import ConversationJudge  # noqa: E402
from pipeline.conversations import candidates, contradiction_verdicts, reask_verdicts  # noqa: E402
from pipeline.judges.llm_judge import LLMJudge  # noqa: E402
from schemas.conversation import ConversationTurn  # noqa: E402
from schemas.settings import ConversationSettings, JudgeSettings  # noqa: E402
from tests.fakes.openai_server import FakeOpenAIServer  # noqa: E402

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def conversations(count: int, seed: int) -> list[list[ConversationTurn]]:
    """``count`` conversations of 2 to 6 turns of one app each, a third with a planted re-ask and a
    third with a planted contradiction."""
    rng = random.Random(seed)
    records = load()
    by_app: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        by_app.setdefault(r["app"], []).append(r)
    names = sorted({w for r in records for w in r["answer"].split() if w[:1].isupper()})
    out = []
    for n in range(count):
        app = sorted(by_app)[n % len(by_app)]
        picked = rng.sample(by_app[app], rng.randint(2, 6))
        texts = [(r["question"], r["answer"]) for r in picked]
        if n % 3 == 1:  # a re-ask of an earlier question
            i = rng.randrange(len(texts) - 1)
            texts[-1] = (rewrite(texts[i][0], rng), texts[-1][1])
        elif n % 3 == 2:  # an earlier answer with a value changed
            i = rng.randrange(len(texts) - 1)
            changed = change_value(texts[i][1], names, rng)
            if changed is not None:
                texts[-1] = (texts[-1][0], changed)
        out.append([
            ConversationTurn(
                interaction_id=f"c{n}-t{k}", timestamp=T0 + timedelta(seconds=k), question=q, answer=a
            )
            for k, (q, a) in enumerate(texts)
        ])  # fmt: skip
    return out


async def measure(
    fake: FakeOpenAIServer, convs: list[list[ConversationTurn]], floor: float, max_pairs: int
) -> dict[str, Any]:
    settings = ConversationSettings(judge="llm", judge_candidate_similarity=floor, judge_max_pairs=max_pairs)
    judge = LLMJudge(JudgeSettings.model_validate({
        "base_url": fake.base_url, "model": "gpt-4o-mini", "api_key": "sk-bench", "cache_enabled": False,
    }))  # fmt: skip
    fake.reset_stats()
    try:
        pair_judge = ConversationJudge(judge, settings)
        judged = [await pair_judge.review(turns) for turns in convs]
    finally:
        await judge.aclose()
    sent = [
        len(candidates([t.question for t in turns], settings.judge_candidate_similarity,
                       reask_verdicts([t.question for t in turns], settings.reask_similarity), max_pairs))
        + len(candidates([t.answer for t in turns], settings.judge_candidate_similarity,
                         contradiction_verdicts([t.answer for t in turns]), max_pairs))
        for turns in convs
    ]  # fmt: skip
    pairs = [len(turns) * (len(turns) - 1) for turns in convs]  # both kinds: n(n-1)/2 each
    calls = [j.calls for j in judged]
    tokens_in = [j.input_tokens for j in judged]
    tokens_out = [j.output_tokens for j in judged]
    return {
        "judge_candidate_similarity": floor,
        "judge_max_pairs": max_pairs,
        "conversations": len(convs),
        "calls_per_conversation": {"mean": statistics.mean(calls), "max": max(calls)},
        "input_tokens_per_conversation": {"mean": statistics.mean(tokens_in), "max": max(tokens_in)},
        "output_tokens_per_conversation": {"mean": statistics.mean(tokens_out), "max": max(tokens_out)},
        "pairs_sent_per_conversation": statistics.mean(sent),
        "pairs_of_turns_per_conversation": statistics.mean(pairs),
        "failures": sum(bool(j.failure) for j in judged),
        "server_prompts": dict(fake.stats.by_prompt),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--conversations", type=int, default=300)
    parser.add_argument("--seed", type=int, default=34)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    convs = conversations(args.conversations, args.seed)
    turns = [len(c) for c in convs]
    report: dict[str, Any] = {
        "conversations": len(convs), "turns_per_conversation": statistics.mean(turns),
        "lexical": {"calls_per_conversation": 0, "tokens_per_conversation": 0},
    }  # fmt: skip
    with FakeOpenAIServer() as fake:
        # the defaults; then every pair a candidate (no pre-filter), capped at 20 and at 5 a kind
        configs = ((0.2, 20), (0.0, 20), (0.0, 5))
        report["llm"] = [asyncio.run(measure(fake, convs, floor, cap)) for floor, cap in configs]
    print(json.dumps(report, indent=2))
    write_json(args.json, report)


if __name__ == "__main__":
    main()
