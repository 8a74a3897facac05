"""The Topics page: the one rule of a move (pipeline/topic_trends.py) and ``GET /api/topics`` on real chDB,
a topic failing in the range against the period before, a topic new in it, one that stayed as it was."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from pipeline.dimensions import topic_dimension
from pipeline.topic_trends import change, proportion
from schemas.label import Label
from streams.clickhouse.labels import LabelStore
from streams.clickhouse.store import ClickHouseStore
from tests.fixtures import messages
from tests.fixtures.dashboard import client_for

START = datetime(2026, 11, 10, tzinfo=UTC)
DAY = timedelta(days=1)


def test_a_proportion_moved_only_when_its_intervals_part() -> None:
    assert change(proportion(30, 40), proportion(2, 40)).rose
    assert not change(proportion(4, 40), proportion(2, 40)).rose  # within chance
    assert change(proportion(2, 40), proportion(30, 40)).fell
    nothing = change(proportion(0, 0), proportion(2, 40))
    assert nothing.now.value is None and not nothing.rose and not nothing.fell
    assert proportion(7.6, 5).value == 1.0  # a rounded sum is kept within its n


def test_the_topic_dimension_names_the_topic_and_the_model_that_assigned_it() -> None:
    assert topic_dimension("t2", "film, actor", 3) == {"topic": "t2: film, actor", "topic_model": "v3"}
    assert topic_dimension("other", "other", 3) == {"topic": "other", "topic_model": "v3"}
    assert topic_dimension(None, None, 3) == {}


def rows(day: datetime, topic: str, label: str, n: int, refused: int, offset: int) -> list[object]:
    out = []
    for k in range(n):
        interaction = messages.interaction(
            interaction_id=f"{topic}-{day:%d}-{k}", timestamp=day + timedelta(minutes=5 * k + offset),
            question=f"{label} question {k % 5}",  # traffic repeats its questions
            answer="I'm sorry, I can't find that." if k < refused else "Yes.",
        )  # fmt: skip
        out.append(
            messages.evaluation(interaction, answer_refusal=k < refused).model_copy(
                update={"topic": topic, "topic_label": label, "topic_model": 1 if day < START + DAY else 2}
            )
        )
    return out


@pytest.fixture()
async def topics_store(store: ClickHouseStore) -> ClickHouseStore:
    before, now = START, START + DAY
    evaluations = [
        *rows(before, "t1", "tire, pressure", 40, 2, 0),
        *rows(before, "t2", "film, actor", 40, 1, 1),
        *rows(now, "t1", "tire, pressure", 40, 2, 0),
        *rows(now, "t2", "film, actor", 40, 30, 1),
        *rows(now, "t3", "invoice, refund", 30, 0, 2),
        messages.evaluation(
            messages.interaction(interaction_id="untopiced", timestamp=now + timedelta(hours=3))
        ),
    ]
    store.insert_evaluations_sync(evaluations)  # type: ignore[arg-type]
    # reviewers agree with every refusal flag of the range's film and tire questions they labeled
    labeled = [e for e in evaluations if e.topic in ("t1", "t2") and e.timestamp >= now][:60]  # type: ignore[attr-defined]
    await LabelStore(store).insert(
        [
            Label(interaction_id=e.interaction_id, kind="answer_refusal", value=int(bool(e.answer_refusal)),  # type: ignore[attr-defined]
                  reviewer="ann", labeled_at=now + 2 * DAY)
            for e in labeled
        ]
    )  # fmt: skip
    return store


async def test_the_topics_page_shows_what_rose_what_is_new_and_the_worst_first(
    topics_store: ClickHouseStore,
) -> None:
    client = await client_for(topics_store)
    try:
        params = {"start": (START + DAY).isoformat(), "end": (START + 2 * DAY).isoformat()}
        response = await client.get("/dashboard/api/topics", params=params)
        assert response.status == 200, await response.text()
        page = await response.json()
        bad = await client.get("/dashboard/api/topics", params={**params, "examples": "99"})
        assert bad.status == 400 and "examples" in await bad.text()
        half = await client.get("/dashboard/api/topics", params={**params, "baseline_start": params["start"]})
        assert half.status == 400 and "go together" in await half.text()
        itself = await client.get(
            "/dashboard/api/topics",
            params={**params, "baseline_start": params["start"], "baseline_end": params["end"]},
        )
        against_itself = await itself.json()
    finally:
        await client.close()
    assert page["interactions"] == 111 and page["without_topic"] == 1
    assert page["before_start"].startswith("2026-11-10T00:00:00")  # the day before the range
    assert page["before_end"].startswith("2026-11-11T00:00:00")
    # the range against itself: nothing new, nothing rose
    assert not any(
        t["status"] or any(c["rose"] for c in t["rates"].values()) for t in against_itself["topics"]
    )
    by = {t["topic"]: t for t in page["topics"]}
    # new first, then what rose, then by volume
    assert list(by) == ["t3: invoice, refund", "t2: film, actor", "t1: tire, pressure"]
    new, tires, films = by["t3: invoice, refund"], by["t1: tire, pressure"], by["t2: film, actor"]
    assert new["status"] == "new" and new["interactions_before"] == 0
    refusal = films["rates"]["answer_refusal_rate"]
    assert refusal["rose"] and refusal["now"]["value"] == 0.75 and refusal["before"]["value"] == 0.025
    assert not tires["rates"]["answer_refusal_rate"]["rose"] and tires["status"] == ""
    assert films["examples"][0]["answer_refusal"] == 1 and films["examples"][0]["question"].startswith("film")
    assert len({x["question"] for x in films["examples"]}) == 3 and films["models"] == ["v2"]
    assert all(len(t["spark"]["answer_refusal_rate"]) == len(page["t"]) for t in page["topics"])
    assert max(v for v in films["spark"]["answer_refusal_rate"] if v is not None) == 1.0
    # the judge agreed with every label: each rate corrected is the rate flagged, within an interval
    fixed = films["corrected"]["answer_refusal_rate"]
    assert fixed["value"] == pytest.approx(0.75) and fixed["low"] < 0.75 < fixed["high"]
    assert tires["corrected"]["answer_refusal_rate"]["value"] == pytest.approx(0.05)
    unlabeled = films["corrected"]["hallucination_rate"]  # no grounded labels: a note, no figure
    assert unlabeled["value"] is None and "label" in unlabeled["note"]
