"""The staged worker's own work per interaction, in one process without Kafka: CPU and garbage collection.

    python benchmarks/stage_cpu.py [--count 3000] [--gc settled|default] [--profile out.prof]

Each interaction goes through what the staged processors do with it, boundary decodes and encodes
included: the interaction decoded as read from outside (``streams.codec.decode``), converted
(``pipeline.convert``), its Converted encoded and decoded between stages, NLI and refusal
(``pipeline.nli``, ``pipeline.refusal``) with the ``openai`` judge on the fake OpenAI-compatible server
(``benchmarks/fake_judge.py``, another process, answering at once, so its CPU is not counted), the
JudgeResult and the Converted decoded by the join, the Evaluation assembled, encoded and decoded by the
sink. Not included: faust, aiokafka, ClickHouse. 128 interactions in flight (``kafka.stage_concurrency``),
the 200 records of the bundled sample traffic cycled with fresh ids, judge cache off; 50 first as a
warm-up.

``--gc settled`` applies the worker's garbage-collection policy first (``streams.heap.settle_heap``),
``default`` leaves Python's. Prints CPU per interaction and the collections of each generation with the
time they took (``gc.callbacks``).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import json
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.machine import Machine  # noqa: E402
from benchmarks.streamkit import SAMPLE  # noqa: E402
from groundwatch.local.supervise import wait_for  # noqa: E402
from pipeline.net import free_port  # noqa: E402


class GcTimes:
    """Collections per generation and the seconds they took."""

    def __init__(self) -> None:
        self.count = [0, 0, 0]
        self.seconds = [0.0, 0.0, 0.0]
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        generation = info["generation"]
        self.count[generation] += 1
        self.seconds[generation] += time.perf_counter() - self._started


async def run(count: int, port: int, profile: cProfile.Profile | None, gc_times: GcTimes) -> float:
    from pipeline.assemble import assemble
    from pipeline.convert import convert
    from pipeline.judges.factory import open_judge
    from pipeline.nli import run_nli
    from pipeline.nli_grouping import nli_judge
    from pipeline.refusal import RefusalClassifier
    from schemas.evaluation import Evaluation
    from schemas.interaction import Interaction
    from schemas.results import Converted, JudgeResult
    from schemas.settings import Settings
    from streams.codec import decode, encode

    settings = Settings().with_changes(
        judge={
            "kind": "openai",
            "base_url": f"http://127.0.0.1:{port}/v1",
            "api_key": "x",
            "model": "fake",
            "cache_enabled": False,
            "max_in_flight": 32,
        }
    )
    limits = settings.limits
    records = [json.loads(line) for line in SAMPLE.read_text().splitlines()[:200]]
    raws: list[bytes] = []
    for i in range(count + 50):
        record = {k: v for k, v in records[i % len(records)].items() if k != "id"}
        record.update(interaction_id=f"bench-{i}", timestamp=datetime.now(UTC).isoformat())
        raws.append(json.dumps(record).encode())
    async with open_judge(settings) as judge:
        refusals = RefusalClassifier(judge, settings)
        nli = nli_judge(judge, settings)
        slots = asyncio.Semaphore(settings.kafka.stage_concurrency)

        async def one(raw: bytes) -> None:
            async with slots:
                interaction = decode(raw, Interaction, limits, received_at=datetime.now(UTC))
                converted_raw = encode(await convert(interaction, judge, settings))
                converted = decode(converted_raw, Converted, limits, between_stages=True)
                refusal_task = asyncio.create_task(refusals.classify(converted))
                nli_result = await run_nli(converted, nli, settings)
                result = JudgeResult(
                    interaction_id=interaction.interaction_id,
                    digest=converted.digest,
                    nli=nli_result,
                    refusal=await refusal_task,
                )
                joined = decode(converted_raw, Converted, limits, between_stages=True)
                part = decode(encode(result), JudgeResult, limits, between_stages=True)
                evaluation = assemble(
                    joined, part.nli, part.refusal, settings, evaluated_at=datetime.now(UTC), missing=[]
                )
                decode(encode(evaluation), Evaluation, limits, between_stages=True)

        await asyncio.gather(*(one(raw) for raw in raws[:50]))  # warm-up
        gc.callbacks.append(gc_times)
        cpu = time.process_time()
        if profile is not None:
            profile.enable()
        await asyncio.gather(*(one(raw) for raw in raws[50:]))
        if profile is not None:
            profile.disable()
        cpu = time.process_time() - cpu
        gc.callbacks.remove(gc_times)
        await refusals.aclose()
    return cpu


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--count", type=int, default=3000)
    ap.add_argument("--gc", choices=["settled", "default"], default="settled")
    ap.add_argument("--profile", type=Path, help="cProfile the measured part into this file")
    args = ap.parse_args(argv)
    machine = Machine.start()
    print(machine.describe_start(), flush=True)
    port = free_port()
    stats = Path(f"/tmp/stage_cpu_fake_{port}.json")
    fake = subprocess.Popen(
        [
            sys.executable,
            str(REPO / "benchmarks" / "fake_judge.py"),
            "--port",
            str(port),
            "--stats-file",
            str(stats),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(stats.exists, 30, "the fake judge")
        if args.gc == "settled":
            import pipeline.evaluator  # noqa: F401  (what a worker has loaded before it settles)
            import streams.codec  # noqa: F401
            from streams.heap import settle_heap

            settle_heap()
        gc_times = GcTimes()
        profile = cProfile.Profile() if args.profile else None
        cpu = asyncio.run(run(args.count, port, profile, gc_times))
        if profile is not None and args.profile is not None:
            profile.dump_stats(str(args.profile))
    finally:
        fake.terminate()
        fake.wait()
        stats.unlink(missing_ok=True)
    per = cpu / args.count * 1000
    print(f"gc {args.gc}: {args.count} interactions, {cpu:.2f} s of CPU: {per:.3f} ms each")
    for generation in range(3):
        seconds = gc_times.seconds[generation]
        print(
            f"  generation {generation}: {gc_times.count[generation]} collections, "
            f"{seconds:.3f} s ({seconds / cpu * 100:.1f}% of the CPU)"
        )
    print(machine.finish().describe())
    return 0


if __name__ == "__main__":
    sys.exit(main())
