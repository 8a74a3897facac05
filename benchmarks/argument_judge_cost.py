"""Argument judge cost: the extra judge calls and tokens per interaction of ``tools.argument_judge`` llm.

    python benchmarks/argument_judge_cost.py [--events 2000] [--json build/bench/argument_judge_cost.json]

Takes the demo's tool-calling app (``groundwatch.demo_history.simulate`` on the bundled sample, the
``support-agent`` series: a ``search_kb`` call per question, its documents as the tool result) and
evaluates its interactions with the ``openai`` judge pointed at the fake OpenAI-compatible server
(tests/fakes/openai_server.py, in this process), once with ``tools.argument_judge`` lexical (the
baseline) and once with llm, in the same run, verdict cache off. Two sets:

- ``demo``: the interactions as the demo sends them;
- ``demo+fabricated``: the same, each ``search_kb`` call also given a ticket id (``ticket``: ``T-<n>``)
  that appears nowhere before it, so every interaction has a value the lexical check does not find (the
  most the second opinion can cost: one call each).

Figures: judge calls (attempts of the records that reached the model) and input/output tokens per
interaction, from the Evaluations, and the ``arguments`` prompts the server answered.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.machine import write_json  # noqa: E402
from groundwatch.demo_history import simulate  # noqa: E402
from pipeline.evaluator import Evaluator  # noqa: E402
from pipeline.judges.factory import open_judge  # noqa: E402
from schemas.evaluation import Evaluation  # noqa: E402
from schemas.interaction import Interaction  # noqa: E402
from schemas.settings import Settings, settings_from_env  # noqa: E402
from tests.fakes.openai_server import FakeConfig, FakeOpenAIServer  # noqa: E402

SAMPLE = REPO / "groundwatch" / "data" / "sample_interactions.jsonl"
TOOL_APP = "support-agent"


def demo_tool_records(events: int) -> list[dict[str, Any]]:
    records = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines() if line.strip()]
    lines = simulate(records, events, days=14).lines
    return [r for r in map(json.loads, lines) if r.get("app") == TOOL_APP and "messages" in r]


def fabricated(record: dict[str, Any], n: int) -> dict[str, Any]:
    """The record with a ticket id no turn or result holds added to its ``search_kb`` call."""
    messages = []
    for m in record["messages"]:
        if m.get("tool_calls"):
            calls = []
            for call in m["tool_calls"]:
                args = {**json.loads(call["function"]["arguments"]), "ticket": f"T-{90_000 + n}"}
                calls.append({**call, "function": {**call["function"], "arguments": json.dumps(args)}})
            m = {**m, "tool_calls": calls}
        messages.append(m)
    return {**record, "messages": messages}


def settings_for(base_url: str, argument_judge: str) -> Settings:
    return settings_from_env({}).with_changes(
        judge={"kind": "openai", "base_url": base_url, "api_key": "x", "cache_enabled": False},
        tools={"argument_judge": argument_judge},
    )


async def run(settings: Settings, items: list[Interaction], fake: FakeOpenAIServer) -> dict[str, float]:
    fake.reset_stats()
    async with open_judge(settings) as judge:
        evaluator = Evaluator(judge, settings)
        try:
            slots = asyncio.Semaphore(32)

            async def one(i: Interaction) -> Evaluation:
                async with slots:
                    return await evaluator.evaluate(i)

            evaluations = await asyncio.gather(*(one(i) for i in items))
        finally:
            await evaluator.aclose()
    n = len(evaluations)
    calls = [c for e in evaluations for c in e.calls if not c.cached]
    arguments = [c for c in calls if c.stage == "arguments"]
    return {
        "interactions": n,
        "calls": sum(c.attempts for c in calls) / n,
        "input_tokens": sum(c.input_tokens for c in calls) / n,
        "output_tokens": sum(c.output_tokens for c in calls) / n,
        "arguments_calls": sum(c.attempts for c in arguments) / n,
        "arguments_input_tokens": sum(c.input_tokens for c in arguments) / n,
        "arguments_output_tokens": sum(c.output_tokens for c in arguments) / n,
        "server_arguments_prompts": fake.stats.by_prompt.get("arguments", 0),
        "ungrounded_rate": sum(bool(e.ungrounded_arguments) for e in evaluations) / n,
        "checked": sum(e.ungrounded_arguments is not None for e in evaluations) / n,
        "failures": sum(e.argument_judge_failure is not None for e in evaluations),
    }


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    records = demo_tool_records(args.events)
    sets = {
        "demo": records,
        "demo+fabricated": [fabricated(r, n) for n, r in enumerate(records)],
    }
    out: dict[str, Any] = {}
    with FakeOpenAIServer(FakeConfig(latency_ms=0.0)) as fake:
        for name, rows in sets.items():
            items = [Interaction.model_validate(r) for r in rows]
            for way in ("lexical", "llm"):
                figures = await run(settings_for(fake.base_url, way), items, fake)
                out[f"{name} {way}"] = figures
                print(
                    f"{name:<16} {way:<8} n={figures['interactions']} checked {figures['checked']:.2f} "
                    f"ungrounded {figures['ungrounded_rate']:.3f} | calls/int {figures['calls']:.3f} "
                    f"in-tok/int {figures['input_tokens']:.0f} out-tok/int {figures['output_tokens']:.0f} | "
                    f"arguments: calls/int {figures['arguments_calls']:.3f} "
                    f"in-tok/int {figures['arguments_input_tokens']:.0f} "
                    f"out-tok/int {figures['arguments_output_tokens']:.0f} "
                    f"(server {figures['server_arguments_prompts']}, failures {figures['failures']})",
                    flush=True,
                )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=2000, help="events of the simulated demo history")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    out = asyncio.run(main_async(args))
    write_json(args.json, out)


if __name__ == "__main__":
    main()
