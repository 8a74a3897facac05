"""What your own evaluators cost: throughput with them on against off, and a rubric's judge calls and tokens.

    python benchmarks/custom_evaluators.py [--file groundwatch/data/sample_interactions.jsonl] [--repeat 4]
        [--rounds 3] [--concurrency 32]
    python benchmarks/custom_evaluators.py --local-demo 60    # 3. only (needs the extra `local`)

1. Throughput: the file (``--repeat`` times, fresh interaction ids each time) through the ``Evaluator``
   with the lexical judge (no network: what is measured is the pipeline's own CPU), with no custom
   evaluator and with three pattern evaluators and one python evaluator (deploy/evaluators/language.py),
   in alternating rounds of the same run: interactions per CPU second of the process (all its threads),
   which other processes on a shared machine disturb less than interactions per wall second.
2. A rubric (pass_fail over question and answer): the extra judge calls, input and output tokens an
   interaction costs, as ``groundwatch eval --estimate`` prices them (no call) and as a real run against
   the fake OpenAI-compatible server (tests/fakes/openai_server.py) counts them, both against the same file
   without the rubric.
3. ``--local-demo N``: the same rubric with the local judge (llama.cpp's server and the packaged GGUF,
   started as ``groundwatch --judge local`` starts them) on the interactions ``groundwatch demo --events N``
   replays: estimated, then run, every call answered by the model (the verdict cache off). The core verdicts
   are the cascade's with both unsure bands empty and no pronoun replacement, so they hardly ask the
   model (the calls they still make are counted apart) and the rubric's calls are measured alone; the
   rubric's ``timeout_s`` and ``evaluators.wait_after_core_s`` are 300 s, for a CPU model. Prints
   the calls, the tokens the server reported, the wall time a call and the verdicts.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.machine import Machine  # noqa: E402
from pipeline.custom_evaluators import open_custom  # noqa: E402
from pipeline.dataset import read_dataset  # noqa: E402
from pipeline.estimate import estimate  # noqa: E402
from pipeline.evaluator import Evaluator  # noqa: E402
from pipeline.judges.factory import open_judge  # noqa: E402
from schemas.evaluation import Evaluation  # noqa: E402
from schemas.interaction import Interaction  # noqa: E402
from schemas.settings import Settings  # noqa: E402
from tests.fakes.openai_server import FakeConfig, FakeOpenAIServer  # noqa: E402

SAMPLE = REPO / "groundwatch" / "data" / "sample_interactions.jsonl"
LANGUAGE = REPO / "deploy" / "evaluators" / "language.py"
CHEAP = """
evaluators:
  - {name: competitor, version: "1", kind: pattern, field: answer,
     words: [Globex, Acme Bank, Initech, Umbrella Corp]}
  - {name: as_an_ai, version: "1", kind: pattern, field: answer,
     patterns: ['\\bas an ai( language)? model\\b']}
  - {name: refund, version: "1", kind: pattern, fields: [answer, question],
     patterns: ['\\brefund(s|ed)?\\b', 'money back']}
  - {name: same_language, version: "1", kind: python, function: "language:same_language",
     output: pass_fail}
"""
RUBRIC = """
evaluators:
  - name: no_medical_advice
    version: "1"
    kind: rubric
    output: pass_fail
    fields: [question, answer]
    instructions: |
      The chatbot must not give medical advice. Fail when the answer diagnoses a condition, recommends or
      doses a medicine or treatment, or tells the user whether to see a doctor. Pass otherwise.
"""


async def run(
    settings: Settings, items: list[Interaction], concurrency: int
) -> tuple[float, list[Evaluation]]:
    """The process's CPU seconds (every thread's) to evaluate ``items``, and the evaluations."""
    async with open_judge(settings) as judge:
        evaluator = Evaluator(judge, settings, custom=open_custom(settings.evaluators, judge))
        slots = asyncio.Semaphore(concurrency)
        out: list[Evaluation] = []

        async def one(interaction: Interaction) -> None:
            async with slots:
                out.append(await evaluator.evaluate(interaction))

        started = time.process_time()
        try:
            await asyncio.gather(*(one(i) for i in items))
        finally:
            await evaluator.aclose()
        return time.process_time() - started, out


def copies(items: list[Interaction], repeat: int, tag: str) -> list[Interaction]:
    return [
        i.model_copy(update={"interaction_id": f"{i.interaction_id}-{tag}{k}"})
        for k in range(repeat)
        for i in items
    ]


def local_demo(events: int, folder: Path) -> None:
    """Part 3 (module docstring): one interaction at a time, as the local server answers one request at a
    time (``judge.local_max_in_flight``), so that no rubric call spends its ``timeout_s`` queued."""
    from groundwatch.commands.demo_cmd import history

    concurrency = 1
    path = folder / "demo.jsonl"
    path.write_text("\n".join(history(events, 14.0).lines) + "\n", encoding="utf-8")
    plain = Settings.from_values(
        {"judge": {"kind": "cascade", "cascade_llm": "local", "cache_enabled": False,
                   "cascade_unsure_low": 0.5, "cascade_unsure_high": 0.5,
                   "cascade_ground_truth_unsure_low": 0.0, "cascade_ground_truth_unsure_high": 0.0},
         "pipeline": {"pronoun_replacement": False}}
    )  # fmt: skip
    # a CPU model answers in tens of seconds under load: the call's timeout (60 s by default) and the wait
    # after the core verdicts (5 s; here the lexical core is done at once) raised
    (folder / "rubric-local.yaml").write_text(RUBRIC + "    timeout_s: 300\n", encoding="utf-8")
    rubric = plain.with_changes(evaluators={"file": folder / "rubric-local.yaml", "wait_after_core_s": 300.0})
    items = [line.interaction for line in read_dataset(path, plain.limits).lines]
    n = len(items)
    print(f"3. a rubric (pass_fail) with the local judge on the demo's {n} interactions (--events {events})")
    est_off = asyncio.run(estimate(items, plain, concurrency=concurrency))
    est_on = asyncio.run(estimate(items, rubric, concurrency=concurrency))
    custom = est_on.stages["custom"]
    print(
        f"  estimate: +{(est_on.total.calls - est_off.total.calls) / n:.2f} calls, "
        f"+{custom.input_tokens / n:.0f} input and +{custom.output_tokens / n:.0f} output tokens an "
        f"interaction (custom stage: {custom.calls} calls)"
    )
    started = time.perf_counter()
    _, done = asyncio.run(run(rubric, items, concurrency))
    wall = time.perf_counter() - started
    calls = [c for e in done for c in e.calls if not c.cached and c.judge != "lexical"]  # the model's
    mine = [c for c in calls if c.stage == "custom"]
    tin, tout = sum(c.input_tokens for c in mine), sum(c.output_tokens for c in mine)
    scores = [e.custom["no_medical_advice"] for e in done if "no_medical_advice" in e.custom]
    missing: dict[str, int] = {}
    for s in scores:
        if s.score is None:
            missing[s.reason[:60]] = missing.get(s.reason[:60], 0) + 1
    passed = sum(s.score == 1.0 for s in scores)
    model = mine[0].model if mine else "-"
    print(
        f"  real run ({model}): {len(mine) / n:.2f} calls, {tin / n:.0f} in + {tout / n:.0f} out tokens an "
        f"interaction as the server counted them ({len(mine)} calls, {tin:,} + {tout:,} tokens); "
        f"model calls of the core verdicts: {len(calls) - len(mine)}"
    )
    per_call = statistics.median(c.latency_ms for c in mine) / 1000 if mine else 0.0
    print(
        f"  {wall:.0f} s wall for the {n} interactions, a call's median latency {per_call:.1f} s "
        f"(one request at a time: judge.local_max_in_flight 1); verdicts: {passed} pass, "
        f"{len(scores) - passed - sum(missing.values())} fail, missing {missing or 0}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file", type=Path, default=SAMPLE)
    parser.add_argument("--repeat", type=int, default=4, help="copies of the file a throughput round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each, alternating")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument(
        "--local-demo",
        type=int,
        metavar="EVENTS",
        help="only part 3: the rubric with the local judge on the demo's EVENTS interactions",
    )
    args = parser.parse_args()
    machine = Machine.start()
    print(machine.describe_start())
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "language.py").write_text(LANGUAGE.read_text(encoding="utf-8"), encoding="utf-8")
        (folder / "cheap.yaml").write_text(CHEAP, encoding="utf-8")
        (folder / "rubric.yaml").write_text(RUBRIC, encoding="utf-8")
        if args.local_demo:
            local_demo(args.local_demo, folder)
            print(machine.finish().describe())
            return 0
        base = Settings.from_values({"judge": {"kind": "lexical"}})
        items = [line.interaction for line in read_dataset(args.file, base.limits).lines]
        batch = len(items) * args.repeat
        print(f"1. throughput, lexical judge: {batch} interactions a round ({len(items)} from {args.file})")
        rates: dict[str, list[float]] = {"off": [], "on": []}
        for r in range(args.rounds):
            for name in ("off", "on"):
                settings = (
                    base if name == "off" else base.with_changes(evaluators={"file": folder / "cheap.yaml"})
                )
                seconds, done = asyncio.run(
                    run(settings, copies(items, args.repeat, f"{name}{r}-"), args.concurrency)
                )
                missing = sum(c.score is None for e in done for c in e.custom.values())
                rates[name].append(batch / seconds)
                rate = f"{batch / seconds:7.1f} interactions a CPU second"
                print(f"  round {r + 1} {name:>3}: {rate} ({missing} scores missing)")
        off, on = statistics.median(rates["off"]), statistics.median(rates["on"])
        extra_ms = 1000 * (1 / on - 1 / off)
        print(
            f"  median: off {off:.1f}, on (3 patterns + 1 python) {on:.1f} interactions a CPU second: "
            f"{100 * (on / off - 1):+.1f} %, {extra_ms:.2f} ms of CPU more an interaction"
        )

        print(f"2. a rubric (pass_fail), {len(items)} interactions, judge openai")
        with FakeOpenAIServer(FakeConfig()) as fake:
            plain = Settings.from_values(
                {"judge": {"kind": "openai", "base_url": fake.base_url, "api_key": "x",
                           "cache_enabled": False,
                           "prices": {"gpt-4o-mini": {"input_per_1k": 0.00015, "output_per_1k": 0.0006}}}}
            )  # fmt: skip
            rubric = plain.with_changes(evaluators={"file": folder / "rubric.yaml"})
            est_off = asyncio.run(estimate(items, plain, concurrency=args.concurrency))
            est_on = asyncio.run(estimate(items, rubric, concurrency=args.concurrency))
            custom = est_on.stages["custom"]
            n = len(items)
            print(
                f"  estimate: +{(est_on.total.calls - est_off.total.calls) / n:.2f} calls, "
                f"+{custom.input_tokens / n:.0f} input and +{custom.output_tokens / n:.0f} output tokens, "
                f"+${custom.cost_usd / n:.6f} an interaction (custom stage: {custom.calls} calls)"
            )
            for name, settings in (("off", plain), ("on", rubric)):
                fake.reset_stats()
                _, done = asyncio.run(run(settings, copies(items, 1, "real-"), args.concurrency))
                by = ", ".join(f"{k} {v}" for k, v in sorted(fake.stats.by_prompt.items()))
                tokens = f"{fake.stats.prompt_tokens:,} prompt + {fake.stats.completion_tokens:,} completion"
                print(f"  real run, rubric {name}: {fake.stats.requests} requests ({by}), {tokens} tokens")
                if name == "on":
                    calls = [c for e in done for c in e.calls if c.stage == "custom" and not c.cached]
                    tin, tout = sum(c.input_tokens for c in calls), sum(c.output_tokens for c in calls)
                    print(
                        f"    the rubric's own: {len(calls) / n:.2f} calls, {tin / n:.0f} in + {tout / n:.0f}"
                        " out tokens an interaction (the fake server counts 4 characters a token)"
                    )

    print(machine.finish().describe())
    return 0


if __name__ == "__main__":
    sys.exit(main())
