"""How close `groundwatch eval --estimate` comes to a real run: requests and request characters.

    python benchmarks/estimate_accuracy.py [--file groundwatch/data/sample_interactions.jsonl] [--runs 2]
        [--latency-ms 0]

Runs the file through the Evaluator with the ``openai`` judge pointed at the fake OpenAI-compatible server
(tests/fakes/openai_server.py, in this process, default settings otherwise: NLI grouping and refusal
batching across concurrent interactions on), counting the requests it receives and their characters
(messages and response_format, ``pipeline.estimate.request_chars``), then estimates the same file
(``pipeline.estimate.estimate``: no request sent). Each ``--runs`` times. Without batching across
interactions (nli_group_cases=1, refusal_batch_size=1) the two are equal (tests/unit/test_estimate.py);
with it, which texts share a prompt depends on timing, in the real run as in the estimate. Output tokens
are not compared: the fake server's answers are shorter than a model's.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.machine import Machine  # noqa: E402
from pipeline.dataset import read_dataset  # noqa: E402
from pipeline.estimate import estimate, request_chars  # noqa: E402
from pipeline.evaluator import Evaluator  # noqa: E402
from pipeline.judges.factory import open_judge  # noqa: E402
from schemas.interaction import Interaction  # noqa: E402
from schemas.settings import Settings  # noqa: E402
from tests.fakes.openai_server import FakeConfig, FakeOpenAIServer  # noqa: E402

SAMPLE = REPO / "groundwatch" / "data" / "sample_interactions.jsonl"


async def real_run(settings: Settings, items: list[Interaction], concurrency: int) -> None:
    async with open_judge(settings) as judge:
        evaluator = Evaluator(judge, settings)
        slots = asyncio.Semaphore(concurrency)

        async def one(interaction: Interaction) -> None:
            async with slots:
                await evaluator.evaluate(interaction)

        try:
            await asyncio.gather(*(one(i) for i in items))
        finally:
            await evaluator.aclose()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file", type=Path, default=SAMPLE)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--latency-ms", type=float, default=0.0, help="the fake server's answer latency")
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    machine = Machine.start()
    print(machine.describe_start())
    with FakeOpenAIServer(FakeConfig(latency_ms=args.latency_ms)) as fake:
        settings = Settings.from_values(
            {"judge": {"kind": "openai", "base_url": fake.base_url, "api_key": "x", "cache_enabled": False}}
        )
        items = [line.interaction for line in read_dataset(args.file, settings.limits).lines]
        print(f"{len(items)} interactions from {args.file}")
        for run in range(args.runs):
            fake.reset_stats()
            fake.stats.bodies.clear()
            asyncio.run(real_run(settings, items, args.concurrency))
            chars = sum(request_chars(body) for body in fake.stats.bodies)
            by = ", ".join(f"{k} {v}" for k, v in sorted(fake.stats.by_prompt.items()))
            print(f"real run {run + 1}: {fake.stats.requests} requests ({by}), {chars:,} request characters")
        for run in range(args.runs):
            e = asyncio.run(estimate(items, settings, concurrency=args.concurrency))
            by = ", ".join(f"{k} {v.calls}" for k, v in sorted(e.stages.items()))
            print(
                f"estimate {run + 1}: {e.total.calls} requests ({by}), {e.total.input_chars:,} request "
                f"characters, {e.total.input_tokens:,} input tokens, ${e.total.cost_usd:.4f}"
            )
    print(machine.finish().describe())
    return 0


if __name__ == "__main__":
    sys.exit(main())
