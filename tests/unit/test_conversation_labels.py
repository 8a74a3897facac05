"""A reviewer's label on a conversation's outcome (kind ``resolved``, on the conversation_id): stored through
the dashboard like every label, measured against the rollup's ``ended_unresolved`` by the agreement
machinery, and correcting the catalogue's conversation unresolved rate."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer

from pipeline.clock import ManualClock
from schemas.label import Label, LabelKind
from schemas.settings import DashboardSettings, Settings
from streams.clickhouse.labels import LabelStore
from streams.clickhouse.store import ClickHouseStore
from streams.dashboard.api import root_app
from streams.judge_quality import read_quality
from tests.fixtures.conversations import T0, closers, deliver, ev

N = 24
HOUR = T0 + timedelta(hours=1)


def resolved(cid: str, value: int, at: datetime, reviewer: str = "ann") -> Label:
    return Label(interaction_id=cid, kind=LabelKind.RESOLVED, value=value, reviewer=reviewer, labeled_at=at)


async def conversations(store: ClickHouseStore) -> None:
    """N conversations of two turns; the even ones end on a refusal (unresolved)."""
    clock = ManualClock(T0 + timedelta(seconds=10))
    convs, windows = closers(store, clock)
    turns = []
    for i in range(N):
        last = ev(
            f"c{i}-2", f"c{i}", 2 * i + 1, question="And then?", answer="No.", refusal=i % 2 == 0, end=True
        )
        turns += [ev(f"c{i}-1", f"c{i}", 2 * i, question=f"Question {i}?", answer="Here it is."), last]
    await deliver(store, convs, windows, turns)
    assert len(await convs.close_due()) == N
    await windows.close_due(final=True)


async def test_a_resolved_label_is_measured_against_the_rollup_and_corrects_the_unresolved_rate(
    store: ClickHouseStore,
) -> None:
    await conversations(store)
    labels = LabelStore(store)
    # the reviewer agrees with the rollup except on c0 (flagged, yet resolved) and c1 (unflagged, unresolved)
    given = [resolved(f"c{i}", int(i % 2 == 1), T0 + timedelta(days=1)) for i in range(2, N)]
    await labels.insert([*given, resolved("c0", 1, HOUR), resolved("c1", 0, HOUR)])
    # an interaction's label beside them keeps its own verdicts
    await labels.insert([Label(interaction_id="c3-1", kind=LabelKind.GROUNDED, value=1, reviewer="ann",
                               labeled_at=HOUR)])  # fmt: skip
    rows = await labels.labeled_rows(T0, HOUR)
    conv = [r for r in rows if r.kind is LabelKind.RESOLVED]
    assert len(conv) == N
    disagree = {(r.interaction_id, r.conversation_id, r.ended_unresolved) for r in conv
                if r.value == r.ended_unresolved}  # fmt: skip
    assert disagree == {("c0", "c0", True), ("c1", "c1", False)}
    assert {(r.app, r.model, r.judge) for r in conv} == {("a", "m", "lexical")}
    [grounded] = [r for r in rows if r.kind is LabelKind.GROUNDED]
    assert (grounded.interaction_id, grounded.ended_unresolved) == ("c3-1", None)
    assert grounded.hallucination is False
    settings = Settings().with_changes(labels={"min_per_class": 5, "bootstrap_resamples": 200})
    report = await read_quality(labels, settings, T0, HOUR, app="a")
    [block] = [b for b in report.apps if b.kind is LabelKind.RESOLVED]
    assert (block.condition, block.rate_metric, block.interactions) == (
        "ended unresolved",
        "conversation_unresolved_rate",
        N,
    )
    a = block.agreement
    assert a is not None and a.cases == N
    assert a.sensitivity.value == pytest.approx(11 / 12)  # flagged among the 12 the reviewer saw unresolved
    assert a.specificity.value == pytest.approx(11 / 12)
    c = block.corrected
    assert c is not None and (c.flagged, c.total) == (N // 2, N)  # the windows' unresolved conversations
    assert c.corrected == pytest.approx((0.5 + 11 / 12 - 1) / (11 / 12 + 11 / 12 - 1))


async def test_a_later_label_replaces_an_earlier_one_whatever_the_arrival_order(
    store: ClickHouseStore,
) -> None:
    await conversations(store)
    labels = LabelStore(store)
    await labels.insert([resolved("c0", 0, T0 + timedelta(hours=3))])
    await labels.insert([resolved("c0", 1, T0 + timedelta(hours=2))])  # earlier, arriving later
    await labels.insert([resolved("c2", 1, T0 + timedelta(hours=2))])
    await labels.insert([resolved("c2", 0, T0 + timedelta(hours=3))])
    rows = await labels.labeled_rows(T0, HOUR)
    assert sorted((r.interaction_id, r.value) for r in rows) == [("c0", 0), ("c2", 0)]


async def test_the_dashboard_labels_a_conversation_once_and_refuses_an_unknown_one(
    store: ClickHouseStore,
) -> None:
    await conversations(store)
    app = root_app(lambda: store, DashboardSettings(), Settings.from_values({}))
    client = TestClient(TestServer(app, host="127.0.0.1"))
    await client.start_server()
    try:
        body = {"interaction_id": "c0", "kind": "resolved", "value": 1, "reviewer": "ann"}
        for _ in range(2):  # the same label twice
            sent = await client.post("/dashboard/api/labels", json=body)
            assert sent.status == 201, await sent.text()
            assert (await sent.json())["inclusion_probability"] is None
        unknown = await client.post("/dashboard/api/labels", json={**body, "interaction_id": "no-such"})
        assert unknown.status == 404 and "no such conversation" in await unknown.text()
        # a turn's interaction id is not a conversation; a conversation's id is not an interaction
        turn = await client.post("/dashboard/api/labels", json={**body, "interaction_id": "c0-1"})
        assert turn.status == 404
        grounded = await client.post("/dashboard/api/labels", json={**body, "kind": "grounded"})
        assert grounded.status == 404 and "no such interaction" in await grounded.text()
        rows = await LabelStore(store).labeled_rows(T0, HOUR)
        assert [(r.interaction_id, r.kind, r.value, r.reviewer) for r in rows] == [
            ("c0", LabelKind.RESOLVED, 1, "ann")
        ]
        view = await (
            await client.get("/dashboard/api/conversation", params={"app": "a", "model": "m", "id": "c0"})
        ).json()
        assert view["rollup"]["ended_unresolved"] is True
        given = [(lb["kind"], lb["value"], lb["reviewer"]) for lb in view["labels"]]
        assert given == [("resolved", 1, "ann")]
        # the interaction page is not asked the conversation's question
        kinds = await (await client.get("/dashboard/api/label-kinds")).json()
        assert "resolved" not in {k["kind"] for k in kinds}
        # the conversation view is, with the registry's wording
        on_conversation = await (
            await client.get("/dashboard/api/label-kinds", params={"on": "conversation"})
        ).json()
        assert on_conversation == [{
            "kind": "resolved", "question": "Did the conversation end resolved?",
            "yes_text": "resolved", "no_text": "unresolved", "keys": None,
        }]  # fmt: skip
        bad = await client.get("/dashboard/api/label-kinds", params={"on": "session"})
        assert bad.status == 400
    finally:
        await client.close()


def test_the_resolved_kind_is_a_conversation_kind_correcting_the_unresolved_rate() -> None:
    from schemas.label import CONVERSATION_KINDS, KIND_OF_RATE, LABEL_TARGETS
    from schemas.metrics import METRICS_BY_NAME

    target = LABEL_TARGETS[LabelKind.RESOLVED]
    assert CONVERSATION_KINDS == {LabelKind.RESOLVED}
    assert KIND_OF_RATE["conversation_unresolved_rate"] is LabelKind.RESOLVED
    assert target.rate_metric in METRICS_BY_NAME and target.condition_value == 0


def test_a_file_labels_the_line_s_conversation_and_refuses_a_line_without_one(tmp_path: Path) -> None:
    from groundwatch.labels_file import read_labels_file
    from schemas.label import LabelSource

    path = tmp_path / "labels.jsonl"
    path.write_text(
        '{"id": "t1", "conversation_id": "c9", "labels": {"resolved": 0, "grounded": 1}}\n'
        '{"id": "t2", "labels": {"resolved": 1}}\n'
    )
    out = read_labels_file(path, reviewer="import", source=LabelSource.IMPORT, labeled_at=T0)
    assert [(lb.interaction_id, lb.kind.value, lb.value) for lb in out.labels] == [
        ("c9", "resolved", 0),
        ("t1", "grounded", 1),
    ]
    assert out.errors == ["line 2: labels.resolved: a conversation's label needs the line's conversation_id"]
