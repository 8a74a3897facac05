"""How long one hostile event holds the event loop: a long conversation's rollup and a large OTLP/HTTP
request, run on the loop (as the worker did) and in a thread (as it does now), in one run.

    python benchmarks/loop_lag.py [--turns 5000] [--spans 3000] [--baseline WORKTREE] [--json F]

A ticker task asks to wake every 10 ms; the worst lag of its wake-ups while the work runs is what the
loop could not do meanwhile (Kafka heartbeats, ``/healthz``, timers). The conversation: ``--turns`` turns
of a synthetic conversation whose questions and answers share words (``pipeline.conversations.rollup``,
lexical re-asks and contradictions over every pair). The request: ``--spans`` spans of 50 traces as
OTLP/JSON (``streams.otlp_http.read_request``: parsed, split by trace, encoded). ``--baseline``: the
rollup on the loop also with another checkout's ``pipeline.conversations`` (a worktree of an earlier
commit), in a child process with ``PYTHONPATH`` at it, in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path and "--rollup-only" not in sys.argv:  # (that one imports the other checkout)
    sys.path.insert(0, str(REPO))

from benchmarks.machine import write_json  # noqa: E402
from pipeline.conversations import rollup  # noqa: E402
from schemas.conversation import ConversationTurn  # noqa: E402

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
    from streams.otlp_http import JSON, read_request

    turns = conversation(args.turns)
    body = otlp_body(args.spans)
    cases: dict[str, Callable[[], Any]] = {
        f"rollup of a {args.turns:,}-turn conversation": lambda: rollup("a", "m", "c", turns, 0.35),
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


def baseline_rollup(baseline: Path, turns: int) -> dict[str, float]:
    """The rollup on the loop with ``baseline``'s code, in a child process (``--rollup-only``)."""
    env = {**os.environ, "PYTHONPATH": str(baseline.resolve())}
    argv = [sys.executable, str(Path(__file__).resolve()), "--rollup-only", "--turns", str(turns)]
    out = subprocess.run(argv, env=env, cwd=baseline, check=True, capture_output=True, text=True)
    figures: dict[str, float] = json.loads(out.stdout.splitlines()[-1])
    return figures


async def rollup_only(turns: int) -> None:
    """The rollup on the loop alone (run by ``--baseline`` in the other checkout): its figures as JSON."""
    built = conversation(turns)
    lag, seconds = await worst_lag(lambda: rollup("a", "m", "c", built, 0.35), in_thread=False)
    print(json.dumps({"worst_lag_s": lag, "work_s": seconds}))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--turns", type=int, default=5000)
    ap.add_argument("--spans", type=int, default=3000)
    ap.add_argument("--baseline", type=Path, default=None, help="another checkout (a git worktree)")
    ap.add_argument("--rollup-only", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    if args.rollup_only:
        asyncio.run(rollup_only(args.turns))
        return 0
    figures = asyncio.run(run(args))
    if args.baseline is not None:
        lag = baseline_rollup(args.baseline, args.turns)
        name = f"rollup of a {args.turns:,}-turn conversation, on the loop, baseline {args.baseline}"
        figures[name] = lag
        print(f"{name}: worst loop lag {lag['worst_lag_s']:.3f} s (the work took {lag['work_s']:.2f} s)")
    write_json(args.json, figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
