"""Conversations: closing on event time, the rollup from stored turns, and their window metrics."""

from __future__ import annotations

import asyncio
import random
from datetime import UTC, datetime, timedelta

import pytest
from aiohttp.test_utils import TestClient, TestServer

from pipeline.clock import ManualClock
from pipeline.conversations import (
    OpenConversations,
    contradictions,
    figures,
    reasks,
    rollup,
    single,
    turn_of,
)
from schemas.conversation import ConversationTurn, marks_end
from schemas.evaluation_row import EvalRow
from schemas.metrics import METRICS_BY_NAME
from schemas.settings import (
    ConversationSettings,
    DashboardSettings,
    Settings,
    WindowSettings,
)
from streams.clickhouse.conversations import ConversationRows
from streams.clickhouse.erase import erase
from streams.clickhouse.store import ClickHouseStore
from streams.dashboard.api import root_app
from streams.windows.aggregator import aggregate
from streams.windows.conversations import ConversationCloser, ConversationStore
from tests.fixtures.conversations import T0, FailingTurns, closers, deliver, ev
from tests.fixtures.store import store_settings
from tests.fixtures.wall_clock import recent


def turn(iid: str, seconds: float, **kw: object) -> ConversationTurn:
    return ConversationTurn(interaction_id=iid, timestamp=T0 + timedelta(seconds=seconds), **kw)


# ---- pure ------------------------------------------------------------------------------------------------


def test_re_asks_are_user_turns_asking_again() -> None:
    questions = [
        "How do I reset my router password?",
        "What is the warranty period?",
        "How can I reset the password of my router?",
        "Does the warranty cover water damage?",
    ]
    assert reasks(questions, 0.5) == [False, False, True, False]
    assert reasks(["hi", "hi"], 0.6) == [False, True]
    assert reasks(["", ""], 0.6) == [False, False]  # nothing asked, nothing asked again


def test_contradiction_is_a_changed_value_for_the_same_subject() -> None:
    answers = [
        "The return window is 30 days from delivery.",
        "Shipping is free over 50 dollars.",
        "The return window is 14 days from delivery.",  # the value changed: a contradiction
        "The return window is 14 days from delivery, and 30 days for members.",  # adds nothing new against #3
    ]
    assert contradictions(answers) == [False, False, True, False]
    named = ["The capital of Australia is Canberra.", "The capital of Australia is Sydney."]
    assert contradictions(named) == [False, True]
    other_subject = ["The store opens at 9 am.", "The warehouse ships 400 parcels a day."]
    assert contradictions(other_subject) == [False, False]


def test_rollup_counts_outcomes_in_event_order_whatever_the_arrival_order() -> None:
    turns = [
        turn(
            "t3", 30, question="Can I get a refund?", answer="I cannot help with that.", answer_refusal=True
        ),
        turn(
            "t1", 10, question="Where is my order?", answer="It ships Monday.", input_tokens=5, cost_usd=0.5
        ),
        turn("t2", 20, question="Where is my order now?", answer="It shipped.", hallucination=True),
        turn("t4", 40, judged=False, question="hello?"),  # unjudged: not the last answer that counts
    ]
    c = rollup("a", "m", "c1", turns, 0.5)
    assert (c.turns, c.judged_turns, c.hallucinated_turns, c.refusals) == (4, 3, 1, 1)
    assert (c.first_turn_at, c.last_turn_at) == (T0 + timedelta(seconds=10), T0 + timedelta(seconds=40))
    assert c.ended_unresolved and c.unresolving_turn_id == "t3"
    assert c.any_hallucinated and c.worst_turn_id == "t2"
    assert c.reasked and c.reasked_turns == 1  # t2 asks t1 again
    assert (c.input_tokens, c.cost_usd) == (5, 0.5)
    assert rollup("a", "m", "c1", list(reversed(turns)), 0.5) == c
    resolved = rollup("a", "m", "c2", [turn("x", 1, answer="Yes."), turn("y", 2, answer="Done.")], 0.6)
    assert (
        not resolved.ended_unresolved and resolved.worst_turn_id == "" and resolved.unresolving_turn_id == ""
    )
    with pytest.raises(ValueError, match="no turns"):
        rollup("a", "m", "c3", [], 0.6)


def test_an_interaction_without_a_conversation_is_one_turn() -> None:
    row = EvalRow(interaction_id="i", timestamp=T0, app="a", model="m", answer_refusal=True)
    c = single(row)
    assert (c.turns, c.ended_unresolved, c.conversation_id, c.worst_turn_id) == (1, True, "", "i")
    skipped = single(EvalRow(interaction_id="s", timestamp=T0, app="a", model="m", judged=False))
    assert (skipped.turns, skipped.judged_turns, skipped.ended_unresolved) == (1, 0, False)


def test_the_end_mark() -> None:
    assert marks_end({"conversation_end": True}) and marks_end({"conversation_end": "TRUE"})
    assert not marks_end({"conversation_end": False}) and not marks_end({"conversation_end": "yes"})
    assert not marks_end(None) and not marks_end({})


def test_open_conversations_close_on_event_time_an_end_mark_or_a_quiet_stream() -> None:
    o = OpenConversations(timedelta(seconds=100), timedelta(seconds=300))
    wall = T0 + timedelta(seconds=50)
    o.touch(("a", "m", "c1"), T0, False, wall, 0.0)
    o.touch(("a", "m", "c2"), T0 + timedelta(seconds=10), False, wall, 0.0)
    o.touch(("a", "m", "c3"), T0 + timedelta(seconds=20), True, wall, 0.0)  # marked its end
    o.touch(("b", "m", "c4"), T0, False, wall, 0.0)
    assert o.due(wall, 1.0) == [("a", "m", "c3")]
    # another conversation's turn moves the app's watermark past c1's idle time, not b's
    o.touch(("a", "m", "c5"), T0 + timedelta(seconds=105), False, wall, 2.0)
    assert o.due(wall, 2.0) == [("a", "m", "c1"), ("a", "m", "c3")]
    # a turn stamped far in the future moves the watermark no further than wall + max_skew
    o.touch(("b", "m", "c6"), T0 + timedelta(days=9), False, wall, 3.0)
    assert ("b", "m", "c4") in o.due(wall, 3.0)
    # quiet: no turn for idle seconds on the wall clock, and its last turn that old
    q = OpenConversations(timedelta(seconds=100), timedelta(seconds=300))
    q.touch(("a", "m", "q"), T0, False, T0, 0.0)
    assert q.due(T0 + timedelta(seconds=99), 99.0) == []
    assert q.due(T0 + timedelta(seconds=100), 100.0) == [("a", "m", "q")]
    # a quiet time of its own (a replay of old traffic): closes sooner on the wall clock, never before
    # its last turn is idle seconds old
    r = OpenConversations(timedelta(seconds=100), timedelta(seconds=300), quiet=timedelta(seconds=3))
    r.touch(("a", "m", "r"), T0, False, T0 + timedelta(seconds=500), 0.0)
    assert r.due(T0 + timedelta(seconds=502), 2.0) == []
    assert r.due(T0 + timedelta(seconds=503), 3.0) == [("a", "m", "r")]
    r.touch(("a", "m", "new"), T0 + timedelta(seconds=500), False, T0 + timedelta(seconds=500), 3.0)
    assert ("a", "m", "new") not in r.due(T0 + timedelta(seconds=510), 10.0)
    # a turn while it was being closed keeps it open
    gen = q.generation(("a", "m", "q"))
    q.touch(("a", "m", "q"), T0 - timedelta(seconds=5), False, T0, 100.0)  # a late, older turn
    q.closed(("a", "m", "q"), gen)
    assert ("a", "m", "q") in q
    q.closed(("a", "m", "q"), q.generation(("a", "m", "q")))
    assert len(q) == 0


def test_settings_refuse_unknown_keys_and_describe_each_field() -> None:
    with pytest.raises(ValueError, match="idle_secs"):
        ConversationSettings.model_validate({"idle_secs": 10})
    assert Settings.from_values({}).conversations.idle_seconds == 1800
    assert all(f.description for f in ConversationSettings.model_fields.values())


# ---- on chDB -----------------------------------------------------------------------------------------------


async def test_a_conversation_closes_is_reopened_by_a_late_turn_and_counts_once(
    store: ClickHouseStore,
) -> None:
    clock = ManualClock(T0 + timedelta(seconds=10))
    convs, windows = closers(store, clock)
    rows = ConversationRows(store)
    first = [
        ev("t1", "c1", 1, question="Where is my parcel?", answer="It ships on 3 May."),
        ev("t2", "c1", 5, question="Where is my parcel now?", answer="It ships on 9 May."),
    ]
    await deliver(store, convs, windows, first)
    await deliver(store, convs, windows, first)  # redelivered
    assert await convs.close_due() == []  # the watermark (5 s) is not 100 s past the last turn
    # an interaction of no conversation moves the app's event time too
    await deliver(store, convs, windows, [ev("o1", None, 106)])
    [c] = await convs.close_due()
    assert (c.conversation_id, c.turns, c.reasked, c.contradicted, c.input_tokens) == ("c1", 2, True, True, 6)
    assert not c.ended_unresolved
    [w] = [w for w in await windows.close_due(final=True) if w.window_start == T0]
    assert (w.conversations, w.conversation_reask_rate, w.mean_turns_per_conversation) == (1, 1.0, 2.0)
    # a late turn, out of order and a refusal: the conversation is reopened, rolled up again, replaced
    late = ev("t3", "c1", 7, question="Refund?", answer="I can't help with that.", refusal=True)
    await deliver(store, convs, windows, [late])
    await deliver(store, convs, windows, [ev("o2", "other", 300)])
    closed = await convs.close_due()
    # "other" (a turn at 300 s) stays open until the watermark is 100 s past its last turn
    assert [(c.conversation_id, c.turns, c.ended_unresolved, c.unresolving_turn_id) for c in closed] == [
        ("c1", 3, True, "t3")
    ]
    stored = rows.all_sync()
    assert [(c.conversation_id, c.turns) for c in stored] == [("c1", 3)]
    await windows.close_due(final=True)
    [w] = [w for w in store.windows_sync() if w.window_start.replace(tzinfo=UTC) == T0]
    assert (w.conversations, w.conversations_unresolved, w.conversation_unresolved_rate) == (1, 1, 1.0)


async def test_a_conversation_closed_again_with_the_same_turns_is_neither_judged_nor_written(
    store: ClickHouseStore,
) -> None:
    """A touch repeated after the close (a redelivery rewrote a turn, a new owner reconciled it) finds
    the very turns its stored rollup was computed from: nothing is judged or written; a turn whose
    evaluation changed (a new version) rolls it up again."""
    clock = ManualClock(T0 + timedelta(seconds=10))
    convs, windows = closers(store, clock)
    turns = [ev("t1", "c1", 1, end=False), ev("t2", "c1", 5, end=True)]
    await deliver(store, convs, windows, turns)
    [first] = await convs.close_due()
    written = convs.written
    await deliver(store, convs, windows, turns)  # the same evaluations written again
    assert (
        await convs.close_due() == []
        and convs.written == written
        and "c1" not in {k[2] for k in convs.open.keys()}
    )
    redone = turns[1].model_copy(update={"evaluated_at": T0 + timedelta(seconds=60), "hallucination": True})
    await deliver(store, convs, windows, [redone])
    [again] = await convs.close_due()
    assert (first.hallucinated_turns, again.turns, again.hallucinated_turns) == (0, 2, 1)
    assert convs.written == written + 1


async def test_an_end_mark_closes_at_once_and_one_turn_interactions_count(store: ClickHouseStore) -> None:
    clock = ManualClock(T0 + timedelta(seconds=10))
    convs, windows = closers(store, clock)
    await deliver(store, convs, windows, [
        ev("e1", "c-end", 1), ev("e2", "c-end", 2, halluc=True, end=True),
        ev("s1", None, 3, refusal=True), ev("s2", None, 4),
    ])  # fmt: skip
    [c] = await convs.close_due()
    assert (c.conversation_id, c.ended, c.any_hallucinated, c.ended_unresolved) == ("c-end", True, True, True)
    [w] = await windows.close_due(final=True)
    # the ended conversation and two conversations of one turn (one a refusal)
    assert (w.conversations, w.conversations_unresolved, w.conversations_hallucinated) == (3, 2, 1)


async def test_an_interaction_without_a_conversation_gets_a_row_of_one_turn(store: ClickHouseStore) -> None:
    clock = ManualClock(recent())
    convs, windows = closers(store, clock)
    rows = ConversationRows(store)
    first = ev("s1", None, 3).model_copy(update={"complete": False})
    s2 = ev("s2", None, 4, refusal=True)
    await deliver(store, convs, windows, [ev("e1", "c-end", 1, end=True), first, s2])
    await deliver(store, convs, windows, [ev("s2", None, 4, refusal=True)])  # redelivered
    [c] = await convs.close_due()  # the conversation; the two rows of one turn are written beside it
    assert c.conversation_id == "c-end" and convs.singles_pending == 0
    singles = [r for r in rows.all_sync(singles=True) if r.interaction_id]
    assert [(r.interaction_id, r.conversation_id, r.turns, r.ended_unresolved) for r in singles] == [
        ("s1", "", 1, False),
        ("s2", "", 1, True),
    ]
    assert rows.count_sync() == 1 and rows.count_sync(singles=True) == 3
    assert store.counts_sync()["conversations"] == 1  # what the demo waits for: conversations with an id
    # the window counts each once: the conversation from its row, the others from their evaluations
    [w] = await windows.close_due(final=True)
    assert (w.conversations, w.conversations_unresolved, w.mean_turns_per_conversation) == (3, 1, 1.0)
    # the complete evaluation of s1, a hallucination, replaces the incomplete one's row; the worker dies
    # before writing it: the next start writes it
    await store.insert_evaluations([ev("s1", None, 3, halluc=True)])
    convs, windows = closers(store, clock)
    await convs.reconcile(timedelta(hours=24))
    assert convs.singles_pending == 1
    await convs.close_due()
    [s1] = [r for r in rows.all_sync(singles=True) if r.interaction_id == "s1"]
    assert (s1.hallucinated_turns, s1.ended_unresolved, s1.worst_turn_id) == (1, True, "s1")
    convs, windows = closers(store, clock)
    await convs.reconcile(timedelta(hours=24))
    assert convs.singles_pending == 0
    # erasing the interaction erases its row
    erase(store, "interaction", "s2", clock.now())
    assert [r.interaction_id for r in rows.all_sync(singles=True) if r.interaction_id] == ["s1"]


async def test_a_restart_rolls_up_what_the_last_worker_left_open(store: ClickHouseStore) -> None:
    # near the server's clock, which stamps a stored rollup's inserted_at (read by reconcile)
    clock = ManualClock(recent())
    convs, windows = closers(store, clock)
    await deliver(store, convs, windows, [ev("r1", "c1", 1), ev("r2", "c1", 2)])
    # the worker dies before the conversation is due; a new one starts later with nothing in memory
    clock.advance(500)
    convs, windows = closers(store, clock)
    assert await convs.reconcile(timedelta(hours=24)) == (1, 0)
    [c] = await convs.close_due()  # quiet for idle seconds: closed on the wall clock
    assert c.turns == 2
    # a worker that died between writing the rollup and its window: the window is recomputed at start
    convs, windows = closers(store, clock)
    assert await convs.reconcile(timedelta(hours=24)) == (0, 1)
    clock.advance(1)
    [w] = await windows.close_due(final=True)
    assert w.conversations == 1
    convs, windows = closers(store, clock)
    assert await convs.reconcile(timedelta(hours=24)) == (0, 0)


async def test_a_complete_verdict_stored_after_the_rollup_is_rolled_up_at_the_next_start(
    store: ClickHouseStore,
) -> None:
    """An incomplete evaluation of a turn is rolled up; the complete one replaces it in ``evaluations``
    (same turn count) and the worker dies before the conversation closes again: the next start rolls it
    up again with the complete verdict."""
    clock = ManualClock(recent())
    convs, windows = closers(store, clock)
    incomplete = ev("t2", "c1", 2, end=True)
    incomplete = incomplete.model_copy(update={"complete": False})
    await deliver(store, convs, windows, [ev("t1", "c1", 1), incomplete])
    [c] = await convs.close_due()
    assert not c.any_hallucinated
    complete = ev("t2", "c1", 2, end=True, halluc=True)
    await store.insert_evaluations([complete])  # stored; the worker dies before touching the closer
    clock.advance(60)
    convs, windows = closers(store, clock)
    assert (await convs.reconcile(timedelta(hours=24)))[0] == 1
    [c] = await convs.close_due()
    assert (c.turns, c.any_hallucinated, c.ended_unresolved) == (2, True, True)
    convs, windows = closers(store, clock)
    assert (await convs.reconcile(timedelta(hours=24)))[0] == 0


async def test_a_worker_down_longer_than_the_lookback_still_rolls_up_what_it_left_open(
    store: ClickHouseStore,
) -> None:
    clock = ManualClock(recent())
    convs, windows = closers(store, clock)
    await deliver(store, convs, windows, [ev("r1", "c1", 1), ev("r2", "c1", 2)])
    clock.advance(3 * 24 * 3600)  # down for three days, with a lookback of one
    convs, windows = closers(store, clock)
    assert (await convs.reconcile(timedelta(hours=24)))[0] == 1
    [c] = await convs.close_due()
    assert c.turns == 2


async def test_a_window_computed_while_a_rollup_is_written_is_recomputed_at_the_next_start(
    store: ClickHouseStore,
) -> None:
    """A window round that reads the conversations while a rollup is being written (the timer beside the
    stop, or a second worker) is stamped after the rollup's close began but before it is stored; the
    worker dies before the window closes again: the next start recomputes it."""
    clock = ManualClock(recent(seconds=30))  # behind the server's clock
    convs, windows = closers(store, clock)
    await deliver(store, convs, windows, [ev("t1", "c1", 1), ev("t2", "c1", 2, end=True)])
    real_insert = convs.store.insert

    async def insert_beside_a_window_round(rows: object, written_at: datetime) -> None:
        clock.advance(0.01)
        await windows.close_due(final=True)  # the window round reads the conversations before the insert
        await real_insert(rows, written_at)  # type: ignore[arg-type]

    convs.store.insert = insert_beside_a_window_round  # type: ignore[method-assign]
    [c] = await convs.close_due()
    assert c.turns == 2
    [w] = store.windows_sync()
    assert w.conversations == 0  # computed before the rollup was stored
    # the worker dies here (the touched window never closes again); a new one starts
    clock.advance(5)
    convs, windows = closers(store, clock)
    assert await convs.reconcile(timedelta(hours=24)) == (0, 1)
    [w] = await windows.close_due(final=True)
    assert w.conversations == 1


async def test_turns_out_of_order_and_duplicated_count_exactly(store: ClickHouseStore) -> None:
    """Many conversations' turns arrive shuffled, some twice, with closes in between: one row per
    conversation with its exact turn count."""
    rng = random.Random(7)
    clock = ManualClock(T0 + timedelta(seconds=10))
    convs, windows = closers(store, clock, idle=30)
    want = {f"c{i}": rng.randint(1, 6) for i in range(40)}
    turns = [
        ev(f"c{i}-t{k}", f"c{i}", i * 7 + k * 3, question=f"question {k} about item {i}")
        for i in range(40) for k in range(want[f"c{i}"])
    ]  # fmt: skip
    stream = turns + rng.sample(turns, 30)
    rng.shuffle(stream)
    for i in range(0, len(stream), 17):
        await deliver(store, convs, windows, stream[i : i + 17])
        await convs.close_due()
    clock.advance(10_000)
    await convs.close_due()
    stored = ConversationRows(store).all_sync()
    assert {c.conversation_id: c.turns for c in stored} == want
    assert len(convs.open) == 0


# ---- the dashboard's Conversations page and conversation view -------------------------------------------


async def test_the_dashboard_lists_conversations_worst_first_and_shows_one_in_order(
    store: ClickHouseStore,
) -> None:
    clock = ManualClock(T0 + timedelta(seconds=10))
    convs, windows = closers(store, clock)
    good = [ev("g1", "good", 1), ev("g2", "good", 2, end=True)]
    bad = [
        ev(
            "b2",
            "bad",
            6,
            question="Can I return it?",
            answer="I can't help with that.",
            refusal=True,
            end=True,
        ),
        ev("b1", "bad", 5, question="Can I return it now?", answer="Returns take 30 days."),
    ]
    other = [ev("o1", "elsewhere", 3, app="other", halluc=True, end=True)]
    await deliver(store, convs, windows, [*good, *bad, *other])
    assert len(await convs.close_due()) == 3
    app = root_app(lambda: store, DashboardSettings(), Settings.from_values({}))
    client = TestClient(TestServer(app, host="127.0.0.1"))
    await client.start_server()
    try:
        span = {"start": T0.isoformat(), "end": (T0 + timedelta(minutes=5)).isoformat()}
        listed = await (await client.get("/dashboard/api/conversations", params=span)).json()
        # both unresolved; "elsewhere" also hallucinated
        assert [c["conversation_id"] for c in listed["conversations"]] == ["elsewhere", "bad", "good"]
        assert listed["total"] == 3
        one_app = await (
            await client.get("/dashboard/api/conversations", params={**span, "slice": "app:other"})
        ).json()
        assert [c["conversation_id"] for c in one_app["conversations"]] == ["elsewhere"]
        later = {
            "start": (T0 + timedelta(minutes=5)).isoformat(),
            "end": (T0 + timedelta(minutes=9)).isoformat(),
        }
        assert (await (await client.get("/dashboard/api/conversations", params=later)).json())["total"] == 0
        view = await (
            await client.get("/dashboard/api/conversation", params={"app": "a", "model": "m", "id": "bad"})
        ).json()
        assert view["stored"] and view["rollup"]["ended_unresolved"]
        assert [(t["interaction_id"], t["reasked"], t["unresolving"]) for t in view["turns"]] == [
            ("b1", False, False),
            ("b2", True, True),
        ]
        assert (view["rollup"]["reasked_turns"], view["rollup"]["pair_judge"]) == (1, "lexical")
        # a page of turns: the rollup is over all of them, the page holds from offset at most limit
        key = {"app": "a", "model": "m", "id": "bad"}
        second = await (
            await client.get("/dashboard/api/conversation", params={**key, "offset": "1", "limit": "1"})
        ).json()
        assert [t["interaction_id"] for t in second["turns"]] == ["b2"]
        assert (second["total"], second["offset"], second["limit"], second["rollup"]) == (
            2,
            1,
            1,
            view["rollup"],
        )
        past = await (await client.get("/dashboard/api/conversation", params={**key, "offset": "9"})).json()
        assert (past["turns"], past["total"]) == ([], 2)
        for bad_page in ({"limit": "0"}, {"limit": "501"}, {"offset": "-1"}):
            assert (await client.get("/dashboard/api/conversation", params={**key, **bad_page})).status == 400
        # the LLM judge decided otherwise when it closed: the view shows the stored rollup, not a lexical
        # recomputation contradicting it
        rows = ConversationRows(store)
        kept = next(c for c in rows.all_sync() if c.conversation_id == "bad")
        judged = kept.model_copy(update={"reasked_turns": 0, "reasked": False, "pair_judge": "llm"})
        version = (await rows.current("a", "m", ["bad"]))["bad"][1] + 1
        await rows.insert([(judged, version, None, "")], clock.now())
        view = await (
            await client.get("/dashboard/api/conversation", params={"app": "a", "model": "m", "id": "bad"})
        ).json()
        assert (view["rollup"]["reasked_turns"], view["rollup"]["pair_judge"]) == (0, "llm")
        missing = await client.get(
            "/dashboard/api/conversation", params={"app": "a", "model": "m", "id": "x"}
        )
        assert missing.status == 404
        assert (await client.get("/dashboard/api/conversation", params={"app": "a"})).status == 400
        index = await (await client.get("/dashboard/")).text()
        main = await (await client.get("/dashboard/static/main.js")).text()
        assert 'data-view="conversations"' in index and '"./conversations.js"' in main
    finally:
        await client.close()


def test_the_table_is_kept_as_long_as_the_evaluations() -> None:
    s = ClickHouseStore.open_sync(store_settings(ttl_days=9, aggregate_ttl_days=300))
    try:
        ddl = s.client.command(f"SHOW CREATE TABLE {s.db}.conversations")
        assert "ReplacingMergeTree(version)" in ddl
        assert "ORDER BY (app, model, conversation_id, interaction_id)" in ddl
        assert "toIntervalDay(9)" in ddl and "written_at" in ddl
        assert "toIntervalDay(9)" in s.client.command(f"SHOW CREATE TABLE {s.db}.evaluations")
    finally:
        s.close()


def _due_closer(store: ConversationStore, clock: ManualClock) -> ConversationCloser:
    wset = WindowSettings(size_seconds=60, grace_seconds=0, idle_close_seconds=1e9)
    settings = ConversationSettings(idle_seconds=100, close_batch=10)
    return ConversationCloser(settings, wset, store, clock=clock)


async def test_an_unavailable_clickhouse_ends_the_round_with_one_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = ManualClock(T0 + timedelta(seconds=10))
    down = FailingTurns(ConnectionError("ClickHouse down"))
    convs = _due_closer(down, clock)
    await convs.touch([ev(f"t{i}", f"c{i}", 1, end=True) for i in range(1000)])
    assert await convs.close_due() == []
    assert down.reads == 1  # like the window closer: one unavailable read ends the round
    assert len([r for r in caplog.records if r.levelname == "WARNING"]) == 1
    assert await convs.close_due() == [] and down.reads == 2  # all still open: tried at the next tick
    caplog.clear()
    result = await convs.finish(budget_s=30.0)
    assert (result.closed, result.left, down.reads) == (0, 1000, 3)
    assert "ClickHouse unavailable" in caplog.text and "LEFT" in caplog.text


async def test_failing_batches_log_a_few_lines_a_round(caplog: pytest.LogCaptureFixture) -> None:
    clock = ManualClock(T0 + timedelta(seconds=10))
    refused = FailingTurns(ValueError("refused"))
    convs = _due_closer(refused, clock)
    await convs.touch([ev(f"t{i}", f"c{i}", 1, end=True) for i in range(1000)])
    assert await convs.close_due() == []
    assert refused.reads == 100  # not an outage: every batch is tried
    lines = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(lines) == 6 and "95 more batches failed" in lines[-1], lines


async def test_the_stop_closes_conversations_within_its_budget_then_nothing_more(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = ManualClock(T0 + timedelta(seconds=10))
    slow = FailingTurns(ValueError("slow and refused"), clock, seconds=2.0)
    convs = _due_closer(slow, clock)
    await convs.touch([ev(f"t{i}", f"c{i}", 1, end=True) for i in range(1000)])
    result = await convs.finish(budget_s=9.0)
    # a batch begins only while the last one's 2 s still fit: at 0, 2, 4, 6 s (8 + 2 > 9)
    assert (slow.reads, result.closed, result.left, result.failed) == (4, 0, 1000, 4)
    assert "budget of 9 s ran out" in caplog.text
    assert await convs.close_due() == [] and slow.reads == 4  # nothing closes after the stop
    assert (await convs.finish(budget_s=9.0)).left == 0 and slow.reads == 4


async def test_a_timer_round_ends_after_its_batch_when_the_stop_begins() -> None:
    clock = ManualClock(T0 + timedelta(seconds=10))
    gate = asyncio.Event()

    class Hanging(FailingTurns):
        async def turns(self, app: str, model: str, ids: object) -> dict[str, list[ConversationTurn]]:
            self.reads += 1
            await gate.wait()
            raise self.error

    hanging = Hanging(ValueError("refused"))
    convs = _due_closer(hanging, clock)
    await convs.touch([ev(f"t{i}", f"c{i}", 1, end=True) for i in range(1000)])
    timer = asyncio.create_task(convs.close_due())
    await asyncio.sleep(0)
    final = asyncio.create_task(convs.finish(budget_s=-1.0))  # (a stop's round that begins nothing)
    await asyncio.sleep(0)
    gate.set()
    await timer
    result = await final
    assert (hanging.reads, result.left) == (1, 1000)


def test_a_conversation_sampled_out_is_not_counted_as_resolved() -> None:
    """A conversation none of whose turns was judged has no verdict: the rates read from verdicts leave it
    out; it is closed and its turns counted all the same."""
    rows = [EvalRow.from_evaluation(ev("j", None, 1, refusal=True))]
    unjudged = {"judged": False, "hallucination": None, "answer_refusal": None, "skip_reason": "rate"}
    skipped = [ev(f"s{i}", None, 2 + i).model_copy(update=unjudged) for i in range(9)]
    asked = "Where is my parcel?"
    skipped += [ev(f"m{i}", "multi", 20 + i, question=asked).model_copy(update=unjudged) for i in (1, 2)]
    rows += [EvalRow.from_evaluation(e) for e in skipped if e.conversation_id is None]
    multi = rollup("a", "m", "multi", [turn_of(e) for e in skipped if e.conversation_id], 0.8)
    w = aggregate(rows, window_start=T0, window_end=T0 + timedelta(seconds=60), app="a", model="m",
                  conversations=[multi])  # fmt: skip
    assert w.answer_refusal_rate == 1.0  # over the judged interactions
    assert (w.conversations, w.conversations_judged) == (11, 1)
    assert (w.conversation_unresolved_rate, w.conversation_hallucinated_rate) == (1.0, 0.0)
    # the rates read from texts and the turns are over every conversation
    assert (w.conversation_reask_rate, w.mean_turns_per_conversation) == (1 / 11, 12 / 11)
    found = figures([ev("j", None, 1, refusal=True), *skipped], 0.8)
    assert found.metrics["conversation_unresolved_rate"] == 1.0
    assert found.metrics["mean_turns_per_conversation"] == 12 / 11
    pooled = METRICS_BY_NAME["conversation_unresolved_rate"]
    assert pooled.denominator == "conversations_judged" and pooled.totals(w) == (1.0, 1)


@pytest.mark.parametrize("similarity", [0.01, 0.35, 0.6, 1.0])
def test_the_indexed_reasks_and_contradictions_equal_the_verdicts_of_every_pair(similarity: float) -> None:
    from pipeline.conversations import contradiction_verdicts, contradictions, flagged, reask_verdicts, reasks

    words = "warranty battery delivery screen refund order Paris London lasts years costs price euro".split()
    rng = random.Random(7)
    for _ in range(200):
        n = rng.randint(0, 20)
        questions = [" ".join(rng.choice(words) for _ in range(rng.randint(0, 6))) + "?" for _ in range(n)]
        answers = [
            f"The {rng.choice(words)} {rng.choice(['costs', 'lasts'])} {rng.randint(1, 3)} "
            f"{rng.choice(['years', 'euro'])} in {rng.choice(['Paris', 'London'])}."
            for _ in range(n)
        ]
        assert reasks(questions, similarity) == flagged(n, reask_verdicts(questions, similarity)), questions
        assert contradictions(answers) == flagged(n, contradiction_verdicts(answers)), answers


def test_a_5000_turn_rollup_compares_a_few_pairs_per_turn_not_every_pair(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every pair of 5,000 turns is 12.5 million comparisons (33 s holding the loop); the indexed rollup
    compares a turn with the few earlier ones that share its rarest words."""
    import pipeline.conversations as conversations

    compared = 0
    real = conversations.jaccard

    def counting(a: frozenset[str], b: frozenset[str]) -> float:
        nonlocal compared
        compared += 1
        return real(a, b)

    monkeypatch.setattr(conversations, "jaccard", counting)
    topics = ["the warranty", "the battery", "the delivery", "the screen", "the refund"]
    turns = [
        ConversationTurn(
            interaction_id=f"t{i}", timestamp=T0 + timedelta(seconds=i),
            question=f"How long does {topics[i % 5]} of order {i} last in Paris?",
            answer=f"{topics[i % 5].capitalize()} of order {i % 97} lasts {i % 7 + 1} years in Paris.",
        )
        for i in range(5000)
    ]  # fmt: skip
    c = conversations.rollup("a", "m", "c", turns, 0.35)
    assert c.turns == 5000 and c.reasked_turns > 0 and c.contradictions > 0
    assert compared < 20 * 5000, f"{compared:,} comparisons"
