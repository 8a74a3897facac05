"""What token log-probabilities cost on the local judge's server (llama-cpp-python).

    python benchmarks/local_logprobs_cost.py [--rounds 2] [--top 5]

Starts the `local` judge (extra `local`), sends one NLI prompt (a 1,500-character premise from this
repository's README, three hypotheses) alternately without and with ``logprobs``/``top_logprobs``, and
prints each call's wall time, tokens and the P(entailed) read from the log-probabilities
(``pipeline.llm.verdict_probs``). The first call also fills the server's prompt cache; compare the later
ones. The verdict cache is off, so every call reaches the server.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pipeline.judges.factory import open_judge  # noqa: E402
from pipeline.judges.llm_judge import LLMJudge  # noqa: E402
from pipeline.llm.verdict_probs import verdict_distributions  # noqa: E402
from schemas.settings import settings_from_env  # noqa: E402

HYPOTHESES = [
    "groundwatch evaluates RAG chatbots on Kafka.",
    "groundwatch needs a GPU.",
    "It stores results in ClickHouse.",
]


async def run(rounds: int, top: int) -> None:
    premise = (REPO / "README.md").read_text(encoding="utf-8")[:1500]
    settings = settings_from_env({}).with_changes(
        judge={"kind": "local", "cache_enabled": False, "max_output_tokens": 1024}
    )
    async with open_judge(settings) as judge:
        assert isinstance(judge, LLMJudge)
        prompt = judge.prompts.nli(premise, HYPOTHESES)
        for _ in range(rounds):
            for logprobs in (0, top):
                started = time.perf_counter()
                _, call, tokens = await judge.client.complete_graded(prompt, stage="nli", logprobs=logprobs)
                seconds = time.perf_counter() - started
                graded = [
                    None if d is None else round(d["entailed"], 3) for d in verdict_distributions(tokens)
                ]
                print(
                    f"logprobs={logprobs}: {seconds:.1f} s, {call.input_tokens} prompt tokens, "
                    f"{call.output_tokens} output tokens, P(entailed) {graded or '-'}",
                    flush=True,
                )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--top", type=int, default=5)
    args = parser.parse_args()
    asyncio.run(run(args.rounds, args.top))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
