"""`groundwatch eval --estimate`: the dry run counts exactly the requests a real run sends (checked against
the fake OpenAI server over HTTP on the same file), prices them, and applies sampling rules."""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

import pytest

from groundwatch.commands import eval_cmd
from groundwatch.estimate import run_estimate
from pipeline.dataset import read_dataset
from pipeline.estimate import estimate, request_chars
from pipeline.evaluator import Evaluator
from pipeline.judges.factory import open_judge
from pipeline.sampling import Sampler, load_sampling_rules
from schemas.errors import ConfigError
from schemas.settings import Settings
from tests.fakes.openai_server import FakeOpenAIServer
from tests.settings_factory import make_settings

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "groundwatch" / "data" / "sample_interactions.jsonl"


def fixture(tmp_path: Path, n: int = 24) -> Path:
    """The first n lines of the bundled sample, with a feedback flag on every fifth line."""
    lines = SAMPLE.read_text(encoding="utf-8").splitlines()[:n]
    out = []
    for i, line in enumerate(lines):
        data = json.loads(line)
        if i % 5 == 0:
            data["feedback"] = "negative"
        out.append(json.dumps(data))
    path = tmp_path / "small.jsonl"
    path.write_text("\n".join(out) + "\n", encoding="utf-8")
    return path


def deterministic(base_url: str, **judge: object) -> Settings:
    """No batching across interactions (its groups depend on timing), no cache: one fixed set of requests."""
    return make_settings(
        judge={"kind": "openai", "base_url": base_url, "api_key": "x", "cache_enabled": False, **judge},
        pipeline={"nli_group_cases": 1, "refusal_batch_size": 1},
    )


async def real_run(settings: Settings, path: Path) -> None:
    lines = read_dataset(path, settings.limits).lines
    async with open_judge(settings) as judge:
        evaluator = Evaluator(judge, settings)
        try:
            await asyncio.gather(*(evaluator.evaluate(line.interaction) for line in lines))
        finally:
            await evaluator.aclose()


def test_estimate_counts_the_requests_a_real_run_sends(tmp_path: Path, fake_openai: FakeOpenAIServer) -> None:
    path = fixture(tmp_path)
    settings = deterministic(fake_openai.base_url)
    asyncio.run(real_run(settings, path))
    sent = fake_openai.stats.requests
    sent_chars = sum(request_chars(body) for body in fake_openai.stats.bodies)
    assert sent > 10

    interactions = [line.interaction for line in read_dataset(path, settings.limits).lines]
    result = asyncio.run(estimate(interactions, settings, source=str(path)))
    assert fake_openai.stats.requests == sent  # the dry run sent nothing
    assert result.total.calls == sent
    assert result.total.input_chars == sent_chars  # the very same request text
    assert result.total.input_tokens >= sent_chars / 3.5
    by_prompt = fake_openai.stats.by_prompt
    assert result.stages["nli"].calls == by_prompt.get("nli", 0) + by_prompt.get("nli_cases", 0)
    assert result.stages["pronouns"].calls == by_prompt.get("pronouns", 0)
    # priced as real calls are: gpt-4o-mini's price per 1K tokens
    expected = sum(
        s.input_tokens / 1000 * 0.00015 + s.output_tokens / 1000 * 0.0006 for s in result.stages.values()
    )
    assert result.priced and result.total.cost_usd == pytest.approx(expected)
    assert result.judged == result.interactions == 24 and result.failed == 0


def test_estimate_never_touches_a_configured_cache(tmp_path: Path) -> None:
    cache = tmp_path / "verdicts.sqlite"
    settings = make_settings(judge={"kind": "openai", "cache_path": str(cache)})  # no key, no server: fine
    interactions = [line.interaction for line in read_dataset(fixture(tmp_path, 6)).lines]
    result = asyncio.run(estimate(interactions, settings))
    assert result.total.calls > 0 and not cache.exists()


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    eval_cmd.add_arguments(parser)
    return parser.parse_args(list(argv))


def test_estimate_command_with_sampling_rules(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = fixture(tmp_path)
    rules = tmp_path / "rules.yaml"
    rules.write_text(
        "rules:\n"
        "  - {name: thumbs-down, action: judge, when: {metadata: {feedback: negative}}}\n"
        "  - {name: half, action: sample, rate: 0.5}\n",
        encoding="utf-8",
    )
    settings = make_settings(judge={"kind": "openai", "api_key": "x"})
    out_all, out_sampled = tmp_path / "all.json", tmp_path / "sampled.json"
    with pytest.raises(ConfigError, match=r"no such file: .*none\.jsonl"):  # routed to the estimate
        eval_cmd.run(_args("--estimate", str(tmp_path / "none.jsonl")))
    with pytest.raises(ConfigError, match="not both"):  # one file or the other
        eval_cmd.run(_args(str(path), "--estimate", str(path)))
    with pytest.raises(ConfigError, match="give INPUT and --out"):  # a real run needs --out
        eval_cmd.run(_args(str(path)))
    assert run_estimate(_args("--estimate", str(path), "--out", str(out_all)), settings) == 0
    assert (
        run_estimate(
            _args("--estimate", str(path), "--sampling", str(rules), "--out", str(out_sampled)), settings
        )
        == 0
    )
    every, sampled = json.loads(out_all.read_text()), json.loads(out_sampled.read_text())
    printed = capsys.readouterr().out
    assert "24 interactions, 24 to judge, 0 skipped" in printed
    sampler = Sampler(load_sampling_rules(rules))
    interactions = [line.interaction for line in read_dataset(path).lines]
    decisions = [sampler.decide(i) for i in interactions]
    kept = sum(d.judge for d in decisions)
    assert sampled["judged"] == kept and sum(sampled["skipped"].values()) == 24 - kept
    assert set(sampled["skipped"]) == {"sampled_out:half"}
    assert 5 <= kept < 24  # the 5 thumbs-down lines are always judged
    assert f"24 interactions, {kept} to judge, {24 - kept} skipped (sampled_out:half {24 - kept})" in printed
    assert 0 < sampled["total"]["calls"] < every["total"]["calls"]
    assert sampled["total"]["cost_usd"] < every["total"]["cost_usd"]


def test_eval_with_sampling_writes_the_skipped_unjudged(tmp_path: Path) -> None:
    path = fixture(tmp_path, 10)
    rules = tmp_path / "rules.json"
    thumbs_down = {"name": "fb", "action": "judge", "when": {"metadata": {"feedback": "negative"}}}
    rules.write_text(
        json.dumps({"rules": [thumbs_down, {"name": "rest", "action": "skip"}]}), encoding="utf-8"
    )
    out = tmp_path / "report.json"
    code = eval_cmd.run(
        _args(str(path), "--judge", "lexical", "--out", str(out), "--quiet", "--sampling", str(rules))
    )
    assert code == 0
    report = json.loads(out.read_text())
    assert report["evaluated"] == 2  # lines 1 and 6 carry the negative feedback
    assert report["settings"]["sampling"]["by_reason"] == {"never:rest": 8}
    rows = [json.loads(x) for x in out.with_name("report.evaluations.jsonl").read_text().splitlines()]
    assert len(rows) == 10 and [r["judged"] for r in rows].count(True) == 2
    assert all(
        r["skip_reason"] == "never:rest" and r["context_entailment"] is None for r in rows if not r["judged"]
    )


def test_the_printed_table_keeps_its_columns_under_the_longest_stage_name() -> None:
    from pipeline.estimate import CostEstimate, StageEstimate, summary

    stage = StageEstimate(calls=2, input_tokens=1960, output_tokens=111, cost_usd=0.0004)
    printed = summary(
        CostEstimate(
            input="in.jsonl",
            judge="openai",
            model="gpt-4o-mini",
            priced=True,
            chars_per_token=3.5,
            interactions=2,
            judged=2,
            stages={"conversation": stage, "nli": stage},
            total=stage,
        )
    ).splitlines()
    table = printed[2:6]
    assert [line.split()[0] for line in table] == ["stage", "conversation", "nli", "total"]
    # every column ends where its header does
    ends = [len(line) for line in table]
    assert len(set(ends)) == 1, table
    header = table[0]
    for line in table[1:]:
        for title in ("calls", "tokens", "USD"):
            end = header.index(title) + len(title)
            assert line[end - 1] != " " and (end == len(line) or line[end] == " "), (title, line)
