"""How long one hostile event holds the event loop: a long conversation's rollup and a large OTLP/HTTP
request, run on the loop (as the worker did) and in a thread (as it does now), in one run.

    python benchmarks/loop_lag.py [--turns 5000] [--spans 3000] [--json build/loop_lag.json]

A ticker task asks to wake every 10 ms; the worst lag of its wake-ups while the work runs is what the
loop could not do meanwhile (Kafka heartbeats, ``/healthz``, timers). The conversation: ``--turns`` turns
of a synthetic conversation whose questions and answers share words (``pipeline.conversations.rollup``,
lexical re-asks and contradictions over every pair). The request: ``--spans`` spans of 50 traces as
OTLP/JSON (``streams.otlp_http.read_request``: parsed, split by trace, encoded).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.machine import write_json  # noqa: E402
from pipeline.conversations import rollup  # noqa: E402
from schemas.conversation import ConversationTurn  # noqa: E402
from streams.otlp_http import JSON, read_request  # noqa: E402

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def conversation(turns: int) -> list[ConversationTurn]:
    topics = ["the warranty", "the battery", "the delivery", "the screen", "the refund"]
    return [
        ConversationTurn(
            interaction_id=f"t{i}",
            timestamp=T0 + timedelta(seconds=i),
            question=f"How long does {topics[i % 5]} of order {i % 97} last in Paris?",
            answer=f"{topics[i % 5].capitalize()} of order {i % 97} lasts {i % 7 + 1} years in Paris.",
        )
        for i in range(turns)
    ]


def otlp_body(spans: int) -> bytes:
    request: dict[str, Any] = {"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [
        {"scope": {"name": "bench"}, "spans": [
            {"traceId": f"{i % 50:032x}", "spanId": f"{i:016x}", "name": "chat", "kind": 3,
             "attributes": [{"key": "gen_ai.prompt", "value": {"stringValue": "word " * 40}}]}
            for i in range(spans)
        ]}
    ]}]}  # fmt: skip
    return json.dumps(request).encode()


async def worst_lag(work: Callable[[], Any], in_thread: bool) -> tuple[float, float]:
    """(the worst lag of a 10 ms ticker while ``work`` runs, the work's wall seconds)."""
    worst = 0.0
    done = False

    async def tick() -> None:
        nonlocal worst
        while not done:
            asked = time.perf_counter() + 0.01
            await asyncio.sleep(0.01)
            worst = max(worst, time.perf_counter() - asked)

    ticker = asyncio.ensure_future(tick())
    await asyncio.sleep(0.05)
    started = time.perf_counter()
    if in_thread:
        await asyncio.to_thread(work)
    else:
        work()
        await asyncio.sleep(0)
    seconds = time.perf_counter() - started
    done = True
    await ticker
    return worst, seconds


async def run(args: argparse.Namespace) -> dict[str, Any]:
    turns = conversation(args.turns)
    body = otlp_body(args.spans)
    cases: dict[str, Callable[[], Any]] = {
        f"rollup of a {args.turns:,}-turn conversation": lambda: rollup("a", "m", "c", turns, 0.6),
        f"OTLP/JSON request of {args.spans:,} spans ({len(body) / 1e6:.1f} MB)": lambda: read_request(
            body, "", JSON, "traces", 64 * 2**20
        ),
    }
    figures: dict[str, Any] = {}
    for name, work in cases.items():
        for where, in_thread in (("on the loop", False), ("in a thread", True)):
            lag, seconds = await worst_lag(work, in_thread)
            figures[f"{name}, {where}"] = {"worst_lag_s": lag, "work_s": seconds}
            print(f"{name}, {where}: worst loop lag {lag:.3f} s (the work took {seconds:.2f} s)")
    return figures


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--turns", type=int, default=5000)
    ap.add_argument("--spans", type=int, default=3000)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    write_json(args.json, asyncio.run(run(args)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
