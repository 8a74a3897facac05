"""Citations on the dashboard, on real chDB: the drill-down's statements carry their citations (which
passages, whether each supports the statement, dangling references) and the Documents page counts, per
document, the citations of its passages for a statement they do not support. The answers are judged by
the worker's staged processors with the lexical judge, as the worker stores them."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from schemas.documents import DocumentReport
from schemas.evaluation import Evaluation
from schemas.slice_filter import SliceFilter
from streams.clickhouse.store import ClickHouseStore
from streams.dashboard.documents import document_row, render_documents, worst_first
from tests.fixtures.citations import ANSWERS, CONTEXTS, cases, online
from tests.fixtures.dashboard import client_for
from tests.fixtures.messages import T0

NAMES = [c["document"] for c in CONTEXTS]
RANGE = {"start": T0.isoformat(), "end": (T0 + timedelta(hours=1)).isoformat()}


async def judged_and_stored(store: ClickHouseStore) -> dict[str, Evaluation]:
    evaluations = {e.interaction_id: e for e in await online(cases())}
    assert sorted(evaluations) == sorted(ANSWERS)
    await store.insert_evaluations(list(evaluations.values()))
    return evaluations


async def get(store: ClickHouseStore, path: str, params: dict[str, str] | None = None) -> Any:
    client = await client_for(store)
    try:
        response = await client.get(f"/dashboard/api/{path}", params=params or {})
        assert response.status == 200, await response.text()
        return await response.json()
    finally:
        await client.close()


def statements(detail: dict[str, Any]) -> list[dict[str, Any]]:
    pair = next(p for p in detail["evaluation"]["pairs"] if p["pair"] == "context_answer")
    return [s for h in pair["hypotheses"] for s in h["statements"]]


async def test_the_drill_down_returns_each_statements_citations(store: ClickHouseStore) -> None:
    await judged_and_stored(store)
    swapped = await get(store, "interactions/swapped")
    assert swapped["evaluation"]["miscited"] is True and swapped["evaluation"]["hallucination"] is False
    assert swapped["evaluation"]["citation_precision"] == 0.0
    cites = [s["citations"] for s in statements(swapped)]
    # "The Eiffel Tower ... [2]": cites the Colosseum's passage, which does not say it; and the other way
    assert [(c["cited"], c["precise"], c["supported"]) for c in cites] == [
        ([1], [False], False),
        ([0], [False], False),
    ]
    assert [s["supported_by"] for s in statements(swapped)] == [[0], [1]]
    right = await get(store, "interactions/right")
    assert [(s["citations"]["cited"], s["citations"]["precise"]) for s in statements(right)] == [
        ([0], [True]),
        ([1], [True]),
    ]
    assert right["evaluation"]["miscited"] is False
    # "[3]" names Big Ben's passage; "[4]" names no passage: kept as written, dangling
    off = await get(store, "interactions/off_by_one")
    off_cites = [s["citations"] for s in statements(off)]
    assert off_cites[1]["dangling"] == ["[4]"] and off_cites[1]["cited"] == []
    assert off["evaluation"]["dangling_citations"] == 1
    # a factual statement of a citing answer without any citation: what the page marks uncited
    uncited = await get(store, "interactions/uncited")
    first = statements(uncited)[0]["citations"]
    assert first["cited"] == [] and first["dangling"] == [] and first["factual"] is True
    assert uncited["evaluation"]["uncited_statements"] == 0.5
    # the interaction's evidence names the documents the page shows beside the passage numbers
    contexts = swapped["evaluation"]["interaction"]["contexts"]
    assert [c["document"] for c in contexts] == NAMES


async def test_documents_count_the_citations_of_their_passages_for_statements_they_do_not_support(
    store: ClickHouseStore,
) -> None:
    evaluations = await judged_and_stored(store)
    # what the stored statements say, counted here from the Evaluations the worker wrote
    expected: dict[str, list[int]] = {name: [0, 0] for name in NAMES}
    for e in evaluations.values():
        for pair in e.pairs:
            if pair.pair != "context_answer":
                continue
            for st in (s for h in pair.hypotheses for s in h.statements):
                c = st.citations
                if c is None:
                    continue
                for k, passage in enumerate(c.cited):
                    counts = expected[NAMES[passage]]
                    counts[0] += 1
                    counts[1] += bool(c.precise) and not c.precise[k]
    body = await get(store, "documents", {**RANGE, "limit": "50"})
    got = {d["document"]: [d["cited"], d["miscited"]] for d in body["documents"]}
    assert got == expected
    # by hand: swapped cites each of eiffel.md and colosseum.md once for the other's claim, invented cites
    # eiffel.md twice for claims it does not make; off_by_one's "[3]" is bigben.md for the Colosseum's claim
    assert got["eiffel.md"][1] >= 3 and got["colosseum.md"][1] >= 1 and got["bigben.md"][1] >= 1
    assert all(miscited <= cited for cited, miscited in got.values())


def without_precision(e: Evaluation, interaction_id: str) -> Evaluation:
    """``e`` as a judge that named no supporting passages leaves it: each citation's support unknown."""
    pairs = []
    for pair in e.pairs:
        hyps = []
        for h in pair.hypotheses:
            kept = [
                s.model_copy(update={"citations": s.citations.model_copy(update={"precise": []})})
                if s.citations is not None
                else s
                for s in h.statements
            ]
            hyps.append(h.model_copy(update={"statements": kept}))
        pairs.append(pair.model_copy(update={"hypotheses": hyps}))
    return e.model_copy(update={"interaction_id": interaction_id, "pairs": pairs})


async def test_a_citation_of_unknown_support_counts_as_cited_not_miscited(store: ClickHouseStore) -> None:
    swapped = next(e for e in await online(cases()) if e.interaction_id == "swapped")
    await store.insert_evaluations([swapped, without_precision(swapped, "unknown")])
    body = await get(store, "documents", {**RANGE, "limit": "50"})
    got = {d["document"]: (d["cited"], d["miscited"]) for d in body["documents"]}
    assert got["eiffel.md"] == (2, 1) and got["colosseum.md"] == (2, 1)
    assert got["bigben.md"] == (0, 0)  # retrieved, never cited


def test_report_documents_prints_the_miscitations() -> None:
    rows = [
        {"document": "wrong.md", "retrieved": 4, "statements": 4, "supported": 4, "not_stated": 0,
         "contradicted": 0, "cited": 5, "miscited": 3},
    ]  # fmt: skip
    documents = worst_first([document_row(r) for r in rows])
    report = DocumentReport(
        start=T0, end=T0 + timedelta(hours=1), slice=SliceFilter(), documents=documents, total=1,
        statements_without_passage=0,
    )  # fmt: skip
    text = render_documents(report)
    header, row = text.splitlines()[1:3]
    assert "miscited" in header and row.split()[-1] == "3"
