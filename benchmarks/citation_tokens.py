"""Judge tokens per interaction with citation checks on and off, same cases, same judge.

    python benchmarks/citation_tokens.py [--data ../shared/data] [--questions 100] [--cpu-rounds 5]
        [--json out.json]

The cases of ``benchmarks/citation_accuracy.py`` (HaluEval QA questions, three numbered passages each,
answers citing the right passage, a wrong one, a hallucinated answer citing, an answer with an uncited
sentence: every answer cites) go through the Evaluator with the ``openai`` judge pointed at the fake
OpenAI-compatible server (tests/fakes/openai_server.py, in this process; it counts tokens as characters / 4
of what it receives and answers), the verdict cache off, once with ``citations.enabled`` (the NLI prompt
asks which passages support each statement and the answer names them) and once without (markers judged
as written, nothing asked). Reported per interaction: judge requests, input and output tokens (all stages,
and the NLI stage alone), from the Evaluations and checked against the server's own counters.

CPU: the same cases through the Evaluator with the lexical judge (no server: the pipeline's own work,
the citation reader and checks included), citations on and off in alternating rounds of one run; the
median CPU milliseconds an interaction of each, and their ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.citation_accuracy import DEFAULT_DATA, build_cases, load_questions  # noqa: E402
from benchmarks.machine import write_json  # noqa: E402
from pipeline.evaluator import Evaluator  # noqa: E402
from pipeline.judges.factory import open_judge  # noqa: E402
from schemas.interaction import Interaction  # noqa: E402
from schemas.settings import Settings  # noqa: E402
from tests.fakes.openai_server import FakeOpenAIServer  # noqa: E402


async def one_run(interactions: list[Interaction], fake: FakeOpenAIServer, enabled: bool) -> dict[str, Any]:
    settings = Settings.model_validate(
        {
            "judge": {"kind": "openai", "base_url": fake.base_url, "api_key": "x", "cache_enabled": False},
            "citations": {"enabled": enabled},
        }
    )
    fake.reset_stats()
    async with open_judge(settings) as judge:
        evaluator = Evaluator(judge, settings)
        try:
            evaluations = await asyncio.gather(*(evaluator.evaluate(i) for i in interactions))
        finally:
            await evaluator.aclose()
    n = len(evaluations)
    calls = [c for e in evaluations for c in e.calls if not c.cached]
    nli = [c for c in calls if c.stage == "nli"]
    figures = {
        "requests": sum(c.attempts for c in calls) / n,
        "input_tokens": sum(c.input_tokens for c in calls) / n,
        "output_tokens": sum(c.output_tokens for c in calls) / n,
        "nli_input_tokens": sum(c.input_tokens for c in nli) / n,
        "nli_output_tokens": sum(c.output_tokens for c in nli) / n,
        "miscited_rate": sum(1 for e in evaluations if e.miscited) / n,
    }
    assert sum(c.input_tokens for c in calls) == fake.stats.prompt_tokens, "the server counted other tokens"
    assert sum(c.output_tokens for c in calls) == fake.stats.completion_tokens
    return figures


async def cpu_ms(interactions: list[Interaction], enabled: bool) -> float:
    """CPU milliseconds an interaction through the Evaluator with the lexical judge."""
    settings = Settings.model_validate({"judge": {"kind": "lexical"}, "citations": {"enabled": enabled}})
    async with open_judge(settings) as judge:
        evaluator = Evaluator(judge, settings)
        try:
            started = time.process_time()
            await asyncio.gather(*(evaluator.evaluate(i) for i in interactions))
            return (time.process_time() - started) * 1000 / len(interactions)
        finally:
            await evaluator.aclose()


async def run(data: Path, questions: int, cpu_rounds: int = 5) -> dict[str, Any]:
    cases = build_cases(load_questions(data, questions))
    interactions = [i for i, *_ in cases]
    with FakeOpenAIServer() as fake:
        off = await one_run(interactions, fake, enabled=False)
        on = await one_run(interactions, fake, enabled=True)
    extra = {k: on[k] - off[k] for k in on if k != "miscited_rate"}
    share = {k: (extra[k] / off[k] if off[k] else None) for k in extra}
    await cpu_ms(interactions, True)  # warm-up
    rounds: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(cpu_rounds):
        for enabled in (False, True):
            rounds[enabled].append(await cpu_ms(interactions, enabled))
    cpu = {
        "off_ms": statistics.median(rounds[False]),
        "on_ms": statistics.median(rounds[True]),
        "rounds_off": rounds[False],
        "rounds_on": rounds[True],
    }
    cpu["ratio"] = cpu["on_ms"] / cpu["off_ms"]
    return {
        "interactions": len(interactions), "off": off, "on": on, "extra": extra, "extra_share": share,
        "lexical_cpu": cpu,
    }  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--questions", type=int, default=100)
    ap.add_argument("--cpu-rounds", type=int, default=5)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    result = asyncio.run(run(args.data, args.questions, args.cpu_rounds))
    print(json.dumps(result, indent=2))
    write_json(args.json, result)


if __name__ == "__main__":
    main()
