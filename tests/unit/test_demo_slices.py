"""The demo's traffic carries its slices: prompt v2 only on the drifting series after the onset, and the
drift inside v2; its rules file has a slice rule the default dimensions allow."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from groundwatch.demo_history import simulate
from schemas.interaction import Interaction
from schemas.settings import DimensionSettings, Limits
from streams.alerts.rules import load_rules
from streams.alerts.slices import check_group_by

DATA = Path(__file__).resolve().parents[2] / "groundwatch" / "data"


def test_prompt_v2_carries_the_drift_and_retriever_does_not() -> None:
    records = [
        json.loads(line) for line in (DATA / "sample_interactions.jsonl").read_text().splitlines() if line
    ]
    history = simulate(
        records, 4000, days=10, onset_fraction=0.5, now=datetime(2026, 11, 23, tzinfo=UTC), seed=5
    )
    assert history.onset is not None
    rows = [json.loads(line) for line in history.lines]

    def bad(chosen: list[dict[str, object]]) -> float:
        return sum(r["labels"].get("grounded") == 0 for r in chosen) / len(chosen)  # type: ignore[attr-defined]

    v2 = [r for r in rows if r["metadata"]["prompt_version"] == "v2"]
    assert {(r["app"], r["model"]) for r in v2} == {("wiki-qa", "beta")}
    assert all(datetime.fromisoformat(r["timestamp"]) >= history.onset for r in v2)
    after_v1 = [
        r for r in rows
        if (r["app"], r["model"]) == ("wiki-qa", "beta") and r["metadata"]["prompt_version"] == "v1"
        and datetime.fromisoformat(r["timestamp"]) >= history.onset
    ]  # fmt: skip
    assert bad(v2) > 0.6 and bad(after_v1) < 0.15 and len(v2) > 1.5 * len(after_v1)
    wiki = [r for r in rows if r["app"] == "wiki-qa"]
    by_retriever = {k: [r for r in wiki if r["metadata"]["retriever"] == k] for k in ("bm25", "dense")}
    assert abs(bad(by_retriever["bm25"]) - bad(by_retriever["dense"])) < 0.05
    assert all(r["metadata"]["source"] for r in rows)  # the sample's own metadata is kept


def test_the_demo_rules_group_by_prompt_version_by_tool_and_by_topic() -> None:
    rules = load_rules(DATA / "demo_alert_rules.yaml")
    assert [r.group_by for r in rules.rules if r.group_by] == [["prompt_version"], ["tool"], ["topic"]]
    check_group_by(rules, DimensionSettings())


def test_the_multi_turn_series_ends_on_refusals_after_the_onset() -> None:
    """car-manual / gamma is conversations of 2-3 turns within a few minutes, the last marked as the end;
    from the onset on most end on a refusal (the label), before it about as often as any turn."""
    records = [
        json.loads(line) for line in (DATA / "sample_interactions.jsonl").read_text().splitlines() if line
    ]
    history = simulate(records, 4000, days=10, onset_fraction=0.5, now=datetime(2026, 11, 23, tzinfo=UTC))
    assert history.onset is not None
    rows = [json.loads(line) for line in history.lines]
    by_conversation: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        if r.get("conversation_id"):
            by_conversation.setdefault(r["conversation_id"], []).append(r)
    assert {(r["app"], r["model"]) for r in rows if r.get("conversation_id")} == {("car-manual", "gamma")}
    assert len(by_conversation) == history.conversations() > 100
    before, after = [], []
    for turns in by_conversation.values():
        times = [datetime.fromisoformat(t["timestamp"]) for t in turns]
        assert 2 <= len(turns) <= 3 and max(times) - min(times) < timedelta(minutes=10)
        last = turns[times.index(max(times))]
        assert last["metadata"].get("conversation_end") is True
        assert sum(bool(t["metadata"].get("conversation_end")) for t in turns) == 1
        (after if max(times) >= history.onset else before).append(last["labels"]["answer_refusal"])
    assert sum(after) / len(after) > 0.7 and sum(before) / len(before) < 0.4
    rules = {r.name: r for r in load_rules(DATA / "demo_alert_rules.yaml").rules}
    assert rules["conversations-ending-unresolved"].metric == "conversation_unresolved_rate"
def test_the_tool_agent_calls_search_kb_and_its_results_go_empty_at_the_outage() -> None:
    records = [
        json.loads(line) for line in (DATA / "sample_interactions.jsonl").read_text().splitlines() if line
    ]
    history = simulate(records, 4000, days=10, now=datetime(2026, 11, 23, tzinfo=UTC), seed=5)
    assert history.tool_agent == ("support-agent", "delta") and history.kb_outage is not None
    rows = [json.loads(line) for line in history.lines if '"support-agent"' in line]
    agent = [
        (datetime.fromisoformat(r["timestamp"]), Interaction.model_validate(r, context={"limits": Limits()}))
        for r in rows
        if r["app"] == "support-agent"
    ]
    assert len(agent) > 400
    for _, i in agent:
        [step] = i.steps
        assert (step.name, step.status, step.earlier_turn, i.contexts, i.flags) == (
            "search_kb",
            "ok",
            False,
            [],
            [],
        )
        assert step.arguments == {"query": i.question} and i.history[0].role == "system"

    def empty(after: bool) -> float:
        chosen = [i for t, i in agent if (t >= history.kb_outage) == after]  # type: ignore[operator]
        return sum(i.steps[0].result == "[]" for i in chosen) / len(chosen)

    assert empty(False) == 0.0 and 0.55 < empty(True) < 0.85
