"""Judge cost: calls and input/output tokens per interaction, by stage, for each way of asking.

    python benchmarks/judge_cost.py [--n 200] [--data ../shared/data] [--concurrency 32]
        [--json build/bench/judge_cost.json]

Runs the Evaluator (all stages, default settings otherwise) with the ``openai`` judge pointed at the fake
OpenAI-compatible server (tests/fakes/openai_server.py, in this process, answering at once) on N dev
interactions: half FaithBench summaries, half HaluEval QA answers from ``--data`` (multi-sentence
answers with contexts), or the bundled groundwatch/data/sample_interactions.jsonl when ``--data`` is
absent. Configurations:

- NLI ``batched`` (default: up to 16 hypotheses and one copy of the premise a case, up to 4 cases of
  concurrent interactions a prompt, ``pipeline.nli_grouping``), ``batched-ungrouped`` (one case a
  prompt; GROUNDWATCH_PIPELINE__NLI_GROUP_CASES=1) and ``per_hypothesis`` (the seeds' way, one
  hypothesis a prompt; GROUNDWATCH_PIPELINE__NLI_MODE=per_hypothesis);
- refusal ``separate`` (its own prompt, 8 texts of concurrent interactions a prompt) vs ``same`` (asked
  inside the first NLI prompt; GROUNDWATCH_PIPELINE__REFUSAL_MODE=same);
- each with the verdict cache off and on, every interaction evaluated twice through the same
  Evaluator and judge (the second pass is a replay of the same traffic).

Figures come from the Evaluations (``calls``: requests = attempts of the records that reached the
model; tokens from the server's ``usage``) and are checked against the fake server's own request and
token counters. Targets: batched NLI uses at most a third of the per-hypothesis input
tokens; a replay with the cache on costs no call.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.machine import Machine, write_json  # noqa: E402
from pipeline.dataset import read_dataset  # noqa: E402
from pipeline.evaluator import Evaluator  # noqa: E402
from pipeline.judges.factory import open_judge  # noqa: E402
from schemas.evaluation import Evaluation  # noqa: E402
from schemas.interaction import Interaction  # noqa: E402
from schemas.settings import Settings  # noqa: E402
from tests.fakes.openai_server import FakeConfig, FakeOpenAIServer  # noqa: E402

DEFAULT_DATA = REPO.parent / "shared" / "data"
SETS = ("grounding_faithbench.jsonl", "grounding_halueval_qa.jsonl")
SAMPLE = REPO / "groundwatch" / "data" / "sample_interactions.jsonl"
STAGES = ("pronouns", "nli", "refusal")


def load_interactions(data: Path, n: int) -> tuple[list[Interaction], str]:
    if all((data / s).is_file() for s in SETS):
        per = [n // len(SETS) + (1 if i < n % len(SETS) else 0) for i in range(len(SETS))]
        out: list[Interaction] = []
        for name, k in zip(SETS, per, strict=True):
            out += [line.interaction for line in read_dataset(data / name, limit=k).lines]
        return out, " + ".join(f"{k} {name}" for name, k in zip(SETS, per, strict=True)) + f" from {data}"
    lines = read_dataset(SAMPLE, limit=n).lines
    return [line.interaction for line in lines], f"{len(lines)} of {SAMPLE} ({data} absent)"


@dataclass
class StageCost:
    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_items: int = 0


@dataclass
class PassCost:
    interactions: int
    seconds: float
    stages: dict[str, StageCost] = field(default_factory=dict)
    server_requests: int = 0
    server_prompt_tokens: int = 0
    server_completion_tokens: int = 0
    server_by_prompt: dict[str, int] = field(default_factory=dict)
    # interaction id -> (hypotheses judged by the NLI stage, NLI input tokens, all input tokens)
    by_interaction: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    # pronoun prompts of a single sentence: there is no earlier sentence to take a noun from
    single_pronoun_calls: int = 0
    single_pronoun_input_tokens: int = 0

    @property
    def requests(self) -> int:
        return sum(s.requests for s in self.stages.values())

    @property
    def input_tokens(self) -> int:
        return sum(s.input_tokens for s in self.stages.values())

    @property
    def output_tokens(self) -> int:
        return sum(s.output_tokens for s in self.stages.values())

    def per(self, value: float) -> float:
        return value / self.interactions if self.interactions else 0.0


def tally(evaluations: list[Evaluation], seconds: float, fake: FakeOpenAIServer) -> PassCost:
    cost = PassCost(interactions=len(evaluations), seconds=seconds)
    stages: dict[str, StageCost] = defaultdict(StageCost)
    for e in evaluations:
        hyps = sum(len(p.hypotheses) for p in e.pairs)
        nli_in = sum(c.input_tokens for c in e.calls if c.stage == "nli" and not c.cached)
        cost.by_interaction[e.interaction_id] = (hyps, nli_in, e.input_tokens)
        for call in e.calls:
            s = stages[call.stage]
            if call.stage == "pronouns" and call.items == 1 and not call.cached:
                cost.single_pronoun_calls += call.attempts
                cost.single_pronoun_input_tokens += call.input_tokens
            if call.cached:
                s.cached_items += call.items
                continue
            s.requests += call.attempts
            s.input_tokens += call.input_tokens
            s.output_tokens += call.output_tokens
    cost.stages = {k: stages[k] for k in STAGES}
    st = fake.stats
    cost.server_requests = st.requests
    cost.server_prompt_tokens = st.prompt_tokens
    cost.server_completion_tokens = st.completion_tokens
    cost.server_by_prompt = dict(st.by_prompt)
    return cost


async def run_config(
    settings: Settings, interactions: list[Interaction], fake: FakeOpenAIServer, concurrency: int
) -> list[PassCost]:
    """Two passes of the same traffic through one Evaluator and judge."""
    passes = []
    async with open_judge(settings) as judge:
        evaluator = Evaluator(judge, settings)
        try:
            slots = asyncio.Semaphore(concurrency)

            async def one(interaction: Interaction) -> Evaluation:
                async with slots:
                    return await evaluator.evaluate(interaction)

            for _ in range(2):
                fake.reset_stats()

                started = time.perf_counter()
                evaluations = await asyncio.gather(*(one(i) for i in interactions))
                passes.append(tally(list(evaluations), time.perf_counter() - started, fake))
                fake.stats.bodies.clear()
        finally:
            await evaluator.aclose()
    return passes


#: the NLI ways compared: label -> pipeline settings
NLI_WAYS: dict[str, dict[str, Any]] = {
    "batched": {"nli_mode": "batched"},
    "batched-ungrouped": {"nli_mode": "batched", "nli_group_cases": 1},
    "per_hypothesis": {"nli_mode": "per_hypothesis"},
}


def settings_for(base_url: str, nli_way: str, refusal_mode: str, cache: bool) -> Settings:
    return Settings(
        judge={"kind": "openai", "base_url": base_url, "api_key": "x", "cache_enabled": cache},
        pipeline={**NLI_WAYS[nli_way], "refusal_mode": refusal_mode},
    )


def shape(interactions: list[Interaction], settings: Settings) -> dict[str, float]:
    from pipeline.sentences import split_sentences

    answer = [len(split_sentences(i.answer, settings.split)) for i in interactions]
    ctx = [sum(len(p.text) for p in i.contexts) for i in interactions]
    gt = sum(1 for i in interactions if i.ground_truth)
    return {
        "answer_sentences_mean": sum(answer) / len(answer),
        "answers_with_2plus_sentences": sum(1 for a in answer if a >= 2) / len(answer),
        "context_chars_mean": sum(ctx) / len(ctx),
        "with_ground_truth": gt / len(interactions),
    }


def table(rows: list[tuple[str, PassCost]]) -> str:
    head = (
        f"{'configuration':<44} {'calls/i':>8} {'in tok/i':>9} {'out tok/i':>9} | "
        + " | ".join(f"{s + ' calls/in/out':>24}" for s in STAGES)
        + f" | {'server req':>10} {'server in':>10}"
    )
    out = [head, "-" * len(head)]
    for name, c in rows:
        cells = []
        for s in STAGES:
            st = c.stages[s]
            cells.append(
                f"{c.per(st.requests):>6.2f} {c.per(st.input_tokens):>8.0f} {c.per(st.output_tokens):>8.0f}"
            )
        totals = f"{c.per(c.requests):>8.2f} {c.per(c.input_tokens):>9.0f} {c.per(c.output_tokens):>9.0f}"
        out.append(
            f"{name:<44} {totals}"
            f" | " + " | ".join(f"{x:>24}" for x in cells) + f" | {c.server_requests:>10} "
            f"{c.server_prompt_tokens:>10}"
        )
    return "\n".join(out)


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    machine = Machine.start()
    print(machine.describe_start(), flush=True)
    interactions, source = load_interactions(args.data, args.n)
    print(f"data: {source}")
    results: dict[str, list[PassCost]] = {}
    with FakeOpenAIServer(FakeConfig(latency_ms=0.0)) as fake:
        base = settings_for(fake.base_url, "batched", "separate", False)
        info = shape(interactions, base)
        print(
            "shape: "
            + ", ".join(f"{k} {v:.2f}" if v < 100 else f"{k} {v:.0f}" for k, v in info.items())
            + "\n",
            flush=True,
        )
        for nli_way in NLI_WAYS:
            for refusal_mode in ("separate", "same"):
                for cache in (False, True):
                    name = f"nli={nli_way} refusal={refusal_mode} cache={'on' if cache else 'off'}"
                    settings = settings_for(fake.base_url, nli_way, refusal_mode, cache)
                    results[name] = await run_config(settings, interactions, fake, args.concurrency)
                    p1, p2 = results[name]
                    print(
                        f"{name}: pass 1 {p1.requests} calls {p1.input_tokens} in-tokens "
                        f"({p1.seconds:.1f}s); pass 2 {p2.requests} calls {p2.input_tokens} in-tokens",
                        flush=True,
                    )
    machine.finish()

    rows: list[tuple[str, PassCost]] = []
    for name, passes in results.items():
        if name.endswith("cache=off"):
            rows.append((name.replace(" cache=off", ""), passes[0]))
    for name, passes in results.items():
        rows.append((name + " replay", passes[1]))
    print("\nper interaction (first pass, cache off), then the replay (second pass) of every configuration:")
    print(table(rows))

    # checks: the Evaluations' accounting against the server's counters
    mismatches = [
        name
        for name, passes in results.items()
        for p in passes
        if p.requests != p.server_requests or p.input_tokens != p.server_prompt_tokens
    ]
    print(
        "\naccounting check (Evaluation calls vs fake server counters): "
        + ("all equal" if not mismatches else f"MISMATCH in {mismatches}")
    )

    def first(name: str) -> PassCost:
        return results[name][0]

    summary: dict[str, Any] = {}
    print("\ntargets:")
    for way in ("batched", "batched-ungrouped"):
        for refusal_mode in ("separate", "same"):
            b = first(f"nli={way} refusal={refusal_mode} cache=off")
            h = first(f"nli=per_hypothesis refusal={refusal_mode} cache=off")
            nli_ratio = b.stages["nli"].input_tokens / max(1, h.stages["nli"].input_tokens)
            all_ratio = b.input_tokens / max(1, h.input_tokens)
            summary[f"{way}_vs_per_hypothesis_{refusal_mode}"] = {
                "nli_stage_input_ratio": nli_ratio,
                "pipeline_input_ratio": all_ratio,
                "nli_calls": b.per(b.stages["nli"].requests),
                "nli_calls_per_hypothesis": h.per(h.stages["nli"].requests),
            }
            print(
                f"  {way}, refusal={refusal_mode}: {way}/per-hypothesis input tokens, NLI stage "
                f"{b.per(b.stages['nli'].input_tokens):.0f}/{h.per(h.stages['nli'].input_tokens):.0f} = "
                f"{nli_ratio:.3f} ({'met' if nli_ratio <= 1 / 3 else 'NOT met'}: <= 0.333); whole pipeline "
                f"{b.per(b.input_tokens):.0f}/{h.per(h.input_tokens):.0f} = {all_ratio:.3f} "
                f"({'met' if all_ratio <= 1 / 3 else 'NOT met'})"
            )
    print("\n  by hypotheses an interaction has (batched / per-hypothesis input tokens, refusal=separate):")
    bi = first("nli=batched refusal=separate cache=off").by_interaction
    hi = first("nli=per_hypothesis refusal=separate cache=off").by_interaction
    buckets: dict[str, list[str]] = defaultdict(list)
    for iid, (n, _, _) in bi.items():
        buckets["1" if n <= 1 else "2" if n == 2 else "3-4" if n <= 4 else "5+"].append(iid)
    by_set: dict[str, list[str]] = defaultdict(list)
    for iid in bi:
        by_set[iid.split("-", 1)[0]].append(iid)
    for label, ids in sorted(by_set.items()):
        nli_b, nli_h = sum(bi[i][1] for i in ids), sum(hi[i][1] for i in ids)
        all_b, all_h = sum(bi[i][2] for i in ids), sum(hi[i][2] for i in ids)
        hyps = sum(bi[i][0] for i in ids) / len(ids)
        summary.setdefault("by_set", {})[label] = {
            "interactions": len(ids),
            "hypotheses_mean": hyps,
            "nli_stage_input_ratio": nli_b / max(1, nli_h),
            "pipeline_input_ratio": all_b / max(1, all_h),
        }
        print(
            f"    set {label}: {len(ids)} interactions, {hyps:.2f} hypotheses on average, NLI stage "
            f"{nli_b / max(1, nli_h):.3f}, whole pipeline {all_b / max(1, all_h):.3f}"
        )
    for label in ("1", "2", "3-4", "5+"):
        ids = buckets.get(label, [])
        if not ids:
            continue
        nli_b, nli_h = sum(bi[i][1] for i in ids), sum(hi[i][1] for i in ids)
        all_b, all_h = sum(bi[i][2] for i in ids), sum(hi[i][2] for i in ids)
        summary.setdefault("by_hypotheses", {})[label] = {
            "interactions": len(ids),
            "nli_stage_input_ratio": nli_b / max(1, nli_h),
            "pipeline_input_ratio": all_b / max(1, all_h),
        }
        print(
            f"    {label:>3} hypotheses: {len(ids):>3} interactions, NLI stage {nli_b / max(1, nli_h):.3f}, "
            f"whole pipeline {all_b / max(1, all_h):.3f}"
        )
    d = first("nli=batched refusal=separate cache=off")
    summary["single_sentence_pronoun_calls_per_interaction"] = d.per(d.single_pronoun_calls)
    print(
        f"  pronoun prompts holding one sentence (nothing earlier to take a noun from, so the answer can "
        f"only be the sentence unchanged): {d.per(d.single_pronoun_calls):.2f} calls and "
        f"{d.per(d.single_pronoun_input_tokens):.0f} input tokens per interaction; skipping them would make "
        f"the batched pipeline {d.per(d.requests - d.single_pronoun_calls):.2f} calls and "
        f"{d.per(d.input_tokens - d.single_pronoun_input_tokens):.0f} input tokens per interaction"
    )
    for name, (p1, p2) in results.items():
        if name.endswith("cache=on"):
            print(
                f"  replay with the cache on, {name.replace(' cache=on', '')}: {p2.requests} calls "
                f"({'met' if p2.requests == 0 and p2.server_requests == 0 else 'NOT met'}: 0), first pass "
                f"{p1.requests}"
            )
            summary.setdefault("replay_calls_cache_on", {})[name] = p2.requests
    print()
    print(machine.describe())
    return {
        "machine": machine.as_dict(),
        "data": source,
        "shape": info,
        "summary": summary,
        "results": {
            name: [
                {
                    "interactions": p.interactions,
                    "seconds": p.seconds,
                    "requests": p.requests,
                    "input_tokens": p.input_tokens,
                    "output_tokens": p.output_tokens,
                    "stages": {k: vars(v) for k, v in p.stages.items()},
                    "server": {
                        "requests": p.server_requests,
                        "prompt_tokens": p.server_prompt_tokens,
                        "completion_tokens": p.server_completion_tokens,
                        "by_prompt": p.server_by_prompt,
                    },
                }
                for p in passes
            ]
            for name, passes in results.items()
        },
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=200, help="interactions (default 200)")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--concurrency", type=int, default=32, help="interactions evaluated at once")
    ap.add_argument("--json", type=Path, help="write the figures here as JSON")
    args = ap.parse_args(argv)
    out = asyncio.run(main_async(args))
    write_json(args.json, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
