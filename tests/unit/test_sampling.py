"""The pure sampling decision: stable hash, first matching rule, filters, budgets on an injected clock."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from pipeline.clock import ManualClock
from pipeline.sampling import Sampler, load_sampling_rules, skipped_evaluation, stable_fraction
from schemas.evaluation import Evaluation
from schemas.interaction import Interaction
from schemas.sampling import SamplingRules
from tests.fixtures.messages import EVALUATED_AT
from tests.fixtures.store import store_settings

REPO = Path(__file__).resolve().parents[2]


def item(
    iid: str = "i1", app: str = "bot", answer: str = "Paris is the capital of France.", **extra: object
) -> Interaction:
    return Interaction.model_validate(
        {"interaction_id": iid, "app": app, "question": "Capital of France?", "answer": answer, **extra}
    )


def rules(*rules: dict[str, object], **more: object) -> SamplingRules:
    return SamplingRules.model_validate({"rules": list(rules), **more})


def test_stable_fraction_is_the_same_in_another_process_with_another_hash_seed() -> None:
    ids = [f"id-{i}" for i in range(20)]
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]);"
        "from pipeline.sampling import stable_fraction;"
        f"print(repr([stable_fraction(i, 's') for i in {ids!r}]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(REPO)],
        capture_output=True, text=True, check=True, env={"PYTHONHASHSEED": "12345", "PATH": ""},
    )  # fmt: skip
    assert eval(out.stdout) == [stable_fraction(i, "s") for i in ids]
    assert all(0.0 <= stable_fraction(i) < 1.0 for i in ids)
    assert stable_fraction("id-1", "a") != stable_fraction("id-1", "b")  # the salt changes the subset


def test_default_rate_keeps_about_that_share_and_the_same_ids_every_time() -> None:
    sampler = Sampler(SamplingRules(), default_rate=0.3)
    decisions = [sampler.decide(item(f"id-{i}")) for i in range(2000)]
    judged = sum(d.judge for d in decisions)
    assert 520 <= judged <= 680  # binomial(2000, 0.3): mean 600, sd 20.5
    assert {d.reason for d in decisions} == {"sampled:default", "sampled_out:default"}
    again = Sampler(SamplingRules(), default_rate=0.3)
    assert [again.decide(item(f"id-{i}")).judge for i in range(2000)] == [d.judge for d in decisions]
    assert all(Sampler(SamplingRules(), 1.0).decide(item(f"id-{i}")).judge for i in range(100))
    assert not any(Sampler(SamplingRules(), 0.0).decide(item(f"id-{i}")).judge for i in range(100))


def test_first_matching_rule_wins() -> None:
    r = rules(
        {"name": "thumbs-down", "action": "judge", "when": {"metadata": {"feedback": "negative"}}},
        {"name": "short", "action": "skip", "when": {"answer_chars": {"max": 10}}},
        {"name": "none", "action": "sample", "rate": 0.0},
    )
    sampler = Sampler(r, default_rate=1.0)
    # short AND negative: the first rule decides
    assert sampler.decide(item(answer="No.", feedback="negative")).reason == "always:thumbs-down"
    assert sampler.decide(item(answer="No.")).reason == "never:short"
    assert sampler.decide(item()).reason == "sampled_out:none"
    assert not sampler.decide(item()).judge


def test_filters_metadata_tags_length_ground_truth_scope() -> None:
    r = rules(
        {"name": "vip", "action": "judge", "when": {"metadata": {"user.tier": ["gold", "platinum"]}}},
        {"name": "tagged", "action": "judge", "when": {"tags": ["escalated"]}},
        {"name": "mid", "action": "judge", "when": {"answer_chars": {"min": 5, "max": 8}}},
        {"name": "gt", "action": "judge", "when": {"has_ground_truth": True}},
        {"name": "other-app", "app": "other", "action": "judge"},
        {"name": "model-x", "model": "x", "action": "judge"},
    )
    sampler = Sampler(r, default_rate=0.0)
    assert sampler.decide(item(metadata={"user": {"tier": "gold"}})).reason == "always:vip"
    assert sampler.decide(item(metadata={"user": {"tier": "free"}})).reason == "sampled_out:default"
    assert sampler.decide(item(tags=["a", "escalated"])).reason == "always:tagged"
    assert sampler.decide(item(tags="escalated")).reason == "always:tagged"
    assert sampler.decide(item(answer="12345")).reason == "always:mid"
    assert sampler.decide(item(answer="12345678")).reason == "always:mid"
    assert sampler.decide(item(answer="123456789")).reason == "sampled_out:default"
    assert sampler.decide(item(ground_truth="Paris")).reason == "always:gt"
    assert sampler.decide(item(ground_truth="  ")).reason == "sampled_out:default"  # blank: none
    assert sampler.decide(item(app="other")).reason == "always:other-app"
    assert sampler.decide(item(model="x")).reason == "always:model-x"
    assert sampler.decide(item(model="y")).reason == "sampled_out:default"


def test_budget_skips_once_spent_and_recovers_on_the_injected_clock() -> None:
    clock = ManualClock()
    r = rules(budgets=[{"app": "bot", "tokens_per_minute": 1000}, {"cost_per_day_usd": 0.5}])
    sampler = Sampler(r, default_rate=1.0, clock=clock)

    def spend(app: str, tokens: int, cost: float) -> None:
        sampler.record([Evaluation(interaction_id="x", timestamp=clock.now(), app=app, model="m",
                                   evaluated_at=EVALUATED_AT,
                                   judge="openai", input_tokens=tokens, cost_usd=cost)])  # fmt: skip

    assert sampler.decide(item()).judge
    spend("bot", 600, 0.0)
    clock.advance(30)
    spend("bot", 400, 0.0)
    assert sampler.decide(item()).reason == "budget:tokens_per_minute"
    clock.advance(30)  # the first 600 tokens left the minute
    assert sampler.decide(item()).judge
    # an unjudged evaluation spends nothing
    sampler.record([skipped_evaluation(item(), "sampled_out:default", "openai", EVALUATED_AT)])
    assert sampler.budgets.spent("bot") == (400, 0.0)
    # the default budget: every other app on its own, cost per UTC day
    spend("a1", 10, 0.5)
    assert sampler.decide(item(app="a1")).reason == "budget:cost_per_day"
    assert sampler.decide(item(app="a2")).judge
    clock.advance(24 * 3600)
    assert sampler.decide(item(app="a1")).judge
    # a skip never reaches the budget; the budget is off for the rules-only decision (estimates)
    spend("a1", 10, 0.5)
    assert sampler.decide(item(app="a1"), budgets=False).judge


def test_skipped_evaluation_carries_the_reason_and_no_score() -> None:
    e = skipped_evaluation(item(labels={"hallucination": 1}), "never:short", "openai", EVALUATED_AT)
    assert (e.judged, e.skip_reason, e.judge_calls, e.context_entailment, e.hallucination) == (
        False, "never:short", 0, None, None,
    )  # fmt: skip
    assert e.labels == {"hallucination": 1} and e.interaction is not None


def test_rules_file_yaml_json_and_errors(tmp_path: Path) -> None:
    loaded = load_sampling_rules(REPO / "deploy" / "sampling" / "rules.example.yaml")
    assert [r.name for r in loaded.rules][:2] == ["negative-feedback", "escalated"]
    assert (
        Sampler(loaded).decide(item(app="support-bot", feedback="negative")).reason
        == "always:negative-feedback"
    )
    path = tmp_path / "r.json"
    path.write_text('[{"name": "all", "action": "sample", "rate": 0.5}]', encoding="utf-8")
    assert load_sampling_rules(path).rules[0].rate == 0.5
    bad = [
        {"rules": [{"name": "x", "action": "sample"}]},  # no rate
        {"rules": [{"name": "x", "action": "skip", "rate": 0.2}]},  # rate without sample
        {"rules": [{"name": "x", "action": "sample", "rate": 1.5}]},
        {"rules": [{"name": "x", "action": "judge"}, {"name": "x", "action": "skip"}]},
        {"rules": [{"name": "x", "action": "judge", "when": {"answer_chars": {"min": 9, "max": 3}}}]},
        {"rules": [{"name": "x", "action": "judge", "when": {"lenght": 3}}]},  # unknown key
        {"budgets": [{"app": "a"}]},  # no limit
        {"budgets": [{"app": "a", "tokens_per_minute": 1}, {"app": "a", "cost_per_day_usd": 1}]},
    ]
    for data in bad:
        with pytest.raises(ValidationError):
            SamplingRules.model_validate(data)
    with pytest.raises(ValueError):
        Sampler(SamplingRules(), default_rate=1.5)


def test_worker_metrics_count_received_sampled_and_skipped_by_app_and_reason() -> None:
    from streams.telemetry import WorkerMetrics

    metrics = WorkerMetrics()
    sampler = Sampler(rules({"name": "short", "action": "skip", "when": {"answer_chars": {"max": 3}}}), 0.5)
    for i in range(40):
        decision = sampler.decide(item(f"id-{i}", answer="No." if i < 10 else "Paris is the capital."))
        metrics.sampling("bot", decision.judge, decision.reason)
    value = metrics.registry.get_sample_value
    judged = value("groundwatch_interactions_sampled_total", {"app": "bot", "reason": "sampled:default"}) or 0
    out = (
        value("groundwatch_interactions_skipped_total", {"app": "bot", "reason": "sampled_out:default"}) or 0
    )
    assert value("groundwatch_interactions_received_total", {"app": "bot"}) == 40
    assert value("groundwatch_interactions_skipped_total", {"app": "bot", "reason": "never:short"}) == 10
    assert judged + out == 30 and judged == sum(stable_fraction(f"id-{i}") < 0.5 for i in range(10, 40))


def test_windows_count_received_judged_and_skipped_and_rate_only_the_judged() -> None:
    from datetime import UTC, datetime, timedelta

    from schemas.evaluation_row import EvalRow
    from streams.windows.aggregator import aggregate

    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    judged = [
        EvalRow(interaction_id=f"j{i}", timestamp=t0, app="a", model="m",
                context_entailment=0.2 if i < 1 else 0.9, hallucination=i < 1, answer_refusal=False,
                input_tokens=10)
        for i in range(4)
    ]  # fmt: skip
    skipped = [
        EvalRow.from_evaluation(skipped_evaluation(item(f"s{i}", app="a"), reason, "openai", EVALUATED_AT))
        for i, reason in enumerate(["sampled_out:default"] * 5 + ["budget:cost_per_day"])
    ]
    w = aggregate(
        [*judged, *skipped], window_start=t0, window_end=t0 + timedelta(minutes=1), app="a", model="m"
    )
    assert (w.count, w.judged, w.skipped) == (10, 4, 6)
    assert w.skipped_by_reason == {"budget:cost_per_day": 1, "sampled_out:default": 5}
    assert w.hallucination_rate == 0.25 and w.answered == 4  # over the judged four, not the ten received
    assert w.answer_refusal_known == 4 and w.input_tokens == 40
    # a window made before sampling existed judged everything it counted
    assert (
        type(w).model_validate(w.model_dump(exclude={"judged", "skipped", "skipped_by_reason"})).judged == 10
    )


def test_unjudged_rows_and_window_counts_round_trip_through_chdb() -> None:
    import asyncio
    from datetime import UTC, datetime, timedelta

    from streams.clickhouse.store import ClickHouseStore
    from streams.windows.aggregator import aggregate

    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    store = ClickHouseStore.open_sync(store_settings())
    try:
        judged = Evaluation(interaction_id="j", timestamp=t0, app="a", model="m", judge="lexical",
                            evaluated_at=EVALUATED_AT,
                            context_entailment=0.9, hallucination=False)  # fmt: skip
        skipped = skipped_evaluation(
            item("s", app="a", model="m"), "never:short", "lexical", EVALUATED_AT
        ).model_copy(update={"timestamp": t0})
        store.insert_evaluations_sync([judged, skipped])
        rows = store.rows_between_sync("a", "m", t0, t0 + timedelta(minutes=1))
        by_id = {r.interaction_id: r for r in rows}
        assert (by_id["j"].judged, by_id["j"].skip_reason) == (True, None)
        assert (by_id["s"].judged, by_id["s"].skip_reason) == (False, "never:short")
        window = aggregate(rows, window_start=t0, window_end=t0 + timedelta(minutes=1), app="a", model="m")
        asyncio.run(store.insert_window(window, datetime.now(UTC)))  # (the TTL counts from computed_at)
        (back,) = store.windows_sync()
        assert (back.count, back.judged, back.skipped, back.skipped_by_reason) == (
            2,
            1,
            1,
            {"never:short": 1},
        )
        assert back.context_scored == 1 and back.hallucination_rate == 0.0
    finally:
        store.close()


def test_a_later_unjudged_copy_never_replaces_a_complete_verdict() -> None:
    from datetime import UTC, datetime, timedelta

    from streams.clickhouse.rows import evaluation_version

    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    verdict = Evaluation(
        interaction_id="i1", timestamp=t0, evaluated_at=t0, app="bot", model="m", judge="openai"
    )
    later_skip = skipped_evaluation(item(), "budget:cost_per_day", "openai", EVALUATED_AT).model_copy(
        update={"evaluated_at": t0 + timedelta(hours=1)}
    )
    partial = verdict.model_copy(update={"complete": False, "evaluated_at": t0 - timedelta(hours=1)})
    assert evaluation_version(later_skip) < evaluation_version(verdict)
    assert evaluation_version(later_skip) > evaluation_version(partial)  # among the rest, the latest
