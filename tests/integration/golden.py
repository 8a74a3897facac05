"""The verdicts of the stream on 200 bundled interactions, as a comparable record (the golden test's
data and how it was captured).

``verdicts`` projects an Evaluation on what the worker decided: its scores, flags, statements and
verdicts, completeness. What depends on timing or the run is left out: stamps, latencies, stage times,
and the judge calls and tokens (how many interactions share a grouped NLI prompt depends on timing).

Capture the golden file from a checkout (the worker runs that checkout's code)::

    cd <checkout> && PYTHONPATH=$PWD python <this file> --out golden.json

It starts an embedded Tansu broker, the fake OpenAI-compatible judge, and a worker per configuration
(``CONFIGS``), replays the first 200 records of ``groundwatch/data/sample_interactions.jsonl`` and writes
each configuration's verdicts by interaction id.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from groundwatch.local.supervise import wait_for
from groundwatch.local.tansu import TansuBroker
from groundwatch.replay import replay
from tests.fakes.openai_server import FakeOpenAIServer
from tests.integration.helpers import REPO, deployment, topic_of

SAMPLE = REPO / "groundwatch" / "data" / "sample_interactions.jsonl"
N = 200

#: configuration name -> the worker's environment on top of ``helpers.deployment``'s (lexical judge)
CONFIGS: dict[str, dict[str, str]] = {
    "lexical": {},
    "openai-fake": {"GROUNDWATCH_JUDGE__KIND": "openai", "GROUNDWATCH_JUDGE__API_KEY": "x"},
}

#: keys of an Evaluation (and, at any depth, of its parts) that describe the run, not the verdict
RUN_KEYS = {
    "evaluated_at",
    "timestamp",
    "calls",
    "judge_calls",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "judge_latency_ms",
    "stage_seconds",
    "latency_ms",
    "wall_ms",
    "seconds",
    "interaction",
}


def verdicts(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: verdicts(v) for k, v in sorted(value.items()) if k not in RUN_KEYS}
    if isinstance(value, list):
        return [verdicts(v) for v in value]
    return value


def sample_lines() -> list[str]:
    return [line for line in SAMPLE.read_text().splitlines() if line.strip()][:N]


def run_config(broker_url: str, workdir: Path, env: dict[str, str], fake_url: str) -> dict[str, Any]:
    """Replay the sample through one worker; its Evaluations' verdicts by interaction id."""
    extra = dict(env)
    if extra.get("GROUNDWATCH_JUDGE__KIND") == "openai":
        extra |= {"GROUNDWATCH_JUDGE__BASE_URL": fake_url, "GROUNDWATCH_JUDGE__CACHE_ENABLED": "false"}
    workdir.mkdir(parents=True, exist_ok=True)
    dep = deployment(broker_url, workdir, extra_env=extra)
    lines = sample_lines()
    worker = dep.start_worker()
    try:
        worker.wait_ready()
        asyncio.run(replay(dep.settings(), lines))
        wait_for(lambda: dep.evaluations() >= len(lines), 180, "every evaluation stored")
        evaluations = topic_of(dep, "evaluations", expect=len(lines), idle_s=2)
    finally:
        code = worker.stop()
    if code != 0:
        raise RuntimeError(f"worker exited {code}: {worker.tail()}")
    by_id: dict[str, Any] = {}
    for raw in evaluations:
        by_id.setdefault(raw["interaction_id"], []).append(verdicts(raw))
    return by_id


def capture(configs: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp, TansuBroker(log_path=Path(tmp) / "tansu.log") as broker:
        with FakeOpenAIServer() as fake:
            for name in configs:
                out[name] = run_config(broker.url, Path(tmp) / name, CONFIGS[name], fake.base_url)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--config", action="append", choices=sorted(CONFIGS), help="default: all")
    args = ap.parse_args()
    captured = capture(args.config or list(CONFIGS))
    args.out.write_text(json.dumps(captured, indent=1, sort_keys=True) + "\n")
    counts = ", ".join(f"{k}: {len(v)} ids" for k, v in captured.items())
    print(f"wrote {args.out}: {counts}", file=sys.stderr)


if __name__ == "__main__":
    main()
