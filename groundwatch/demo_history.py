"""Simulated history for `groundwatch demo`: the bundled sample spread over past days, with a drift.

Interactions are drawn from the bundled sample (real records, groundwatch/data/README.md) and stamped
over the last ``days`` days, more by day than by night. Every series draws its records with a fixed
share of known-bad answers, except one: from ``onset`` on, ``wiki-qa / beta`` serves most of its traffic
with prompt ``v2``, and those answers come from the hallucinated half of its pool far more often, so its
hallucination rate rises, the demo's alert rules fire near the onset (one of them on the
``prompt_version=v2`` slice) and the dashboard's Breakdown puts ``v2`` first in "what changed". Every
interaction carries the metadata ``prompt_version`` (``v1`` everywhere else) and ``retriever`` (``bm25``
or ``dense``, half each, unrelated to the drift). Each drawn record gets an interaction id of its own,
and each of the sample's passages a document name of its own (``wiki-qa/passage-NNN``).

One series is a tool-calling agent (``support-agent / delta``, ``SeriesPlan.tool``): each of its records
becomes an OpenAI chat-format conversation (a system turn, the question, an assistant turn calling
``search_kb`` with the question as its query, and the tool's result: the record's passages as a JSON list
of documents) with no ``contexts`` of their own, so the answer is judged against what the tool returned.
From ``kb_outage`` on (the knowledge base's index breaks) most of its searches return ``[]``; the agent
answers anyway, so its answers without evidence step up and the demo's rule on ``no_evidence_rate`` fires
for its ``search_kb`` slice.

``car-manual / gamma`` is multi-turn: conversations of 2 to 3 turns a few minutes apart (a
``conversation_id`` each, the last turn marked ``conversation_end``), and from the onset on most of them
end on a refusal, so its unresolved-conversation rate rises and the demo's rule on it fires.

``policy-qa / epsilon`` answers with citations (``SeriesPlan.cites``): each answer gets three passages (its
own and two others of the sample, its own first or second) and cites its own one by number ("... [2]").
From ``citation_bug`` on its citation renderer is off by one: every answer cites the passage after its
own, so its miscited rate steps up and the demo's rule on ``miscited_rate`` fires while its answers, and
so its hallucination rate, stay as they were (the markers are removed before an answer is judged).
``wiki-qa / alpha`` fails on one subject only (``SeriesPlan.refuses_subject``): from ``subject_outage`` on
(its music index goes missing) it refuses nine in ten of its questions about music (``SUBJECT``: the
question names an album, a song, a band, a singer, music or a musician), "I'm sorry, I can't find ...";
its other answers stay as they were, so its overall refusal rate moves little while the rate of the topic
holding its music questions (``groundwatch topics``, docs/topics.md) rises and the demo's per-topic rule
fires. Its refused records
carry the label a reviewer would give them (``answer_refusal``: 1).
Deterministic for a seed.
"""

from __future__ import annotations

import json
import math
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from schemas.interaction import Interaction


@dataclass(frozen=True)
class SeriesPlan:
    """One app/model of the simulated traffic."""

    app: str
    model: str
    source_app: str  # which records of the sample it draws from (by their app)
    share: float  # of all events
    bad_share: float  # share of records drawn from the "bad" label value (hallucinated, incorrect)
    bad_share_after_onset: float | None = None  # the drift, in prompt v2's answers: None keeps bad_share
    v2_share_after_onset: float = 0.0  # share of its traffic served with prompt v2 from the onset on
    tool: bool = False  # a tool-calling agent: its passages come back from a search_kb call
    empty_share_after_outage: float = 0.0  # share of its searches that return nothing from kb_outage on
    max_turns: int = 1  # > 1: conversations of 2 to max_turns turns
    unresolved_after_onset: float | None = None  # share of conversations ending on a bad answer from onset
    cites: bool = False  # answers cite their passage by number; off by one from citation_bug on
    refuses_subject: bool = False  # refuses most questions about SUBJECT from subject_outage on


PLANS: tuple[SeriesPlan, ...] = (
    SeriesPlan("wiki-qa", "alpha", "wiki-qa", 0.25, 0.08, refuses_subject=True),
    SeriesPlan(
        "wiki-qa", "beta", "wiki-qa", 0.30, 0.08, bad_share_after_onset=0.75, v2_share_after_onset=0.7
    ),
    SeriesPlan("open-qa", "alpha", "open-qa", 0.15, 0.40),
    SeriesPlan("car-manual", "gamma", "car-manual", 0.15, 0.30, max_turns=3, unresolved_after_onset=0.8),
    SeriesPlan("support-agent", "delta", "wiki-qa", 0.15, 0.0, tool=True, empty_share_after_outage=0.7),
    SeriesPlan("policy-qa", "epsilon", "wiki-qa", 0.10, 0.05, cites=True),
)
CITED_PASSAGES = 3  # passages a citing answer is given: its own, first or second, and others of the sample
SYSTEM_PROMPT = "You are the support agent. Search the knowledge base before you answer."
#: the subject one series stops answering (``refused_on_subject``): questions about music
SUBJECT = re.compile(r"\b(?:albums?|songs?|band|singer|music|musician)\b", re.IGNORECASE)
SUBJECT_NAME = "music"
SUBJECT_REFUSAL = "I'm sorry, I can't find anything about that in the music sources I have."
SUBJECT_REFUSED_OF_TEN = 9  # of every ten of its subject's questions after the outage, this many refused


@dataclass(frozen=True)
class History:
    lines: list[str]  # JSON interactions in time order
    start: datetime
    end: datetime
    onset: datetime | None  # None: a user's own traffic (no simulated drift)
    drifting: tuple[str, str] | None  # (app, model) whose hallucination rate rises at onset
    kb_outage: datetime | None = None  # when the tool-calling agent's search starts returning nothing
    tool_agent: tuple[str, str] | None = None  # (app, model) of the tool-calling agent
    citation_bug: datetime | None = None  # when the citing app's citations start pointing one passage off
    citing: tuple[str, str] | None = None  # (app, model) of the app answering with citations
    subject_outage: datetime | None = None  # when one series starts refusing questions about SUBJECT
    subject_failing: tuple[str, str] | None = None  # (app, model) of that series

    def conversations(self) -> int:
        """How many conversations (with a conversation_id) the interactions hold: the rows the worker
        writes to ``conversations``."""
        keys = set()
        for line in self.lines:
            record = json.loads(line)
            if record.get("conversation_id"):
                keys.add((record["app"], record["model"], record["conversation_id"]))
        return len(keys)

    def windows(self, size_seconds: int) -> int:
        """How many (app, model, window) the interactions fall in: the window rows the worker writes. A
        line without app or model is in the schema's default one, as the worker stores it."""
        fields = Interaction.model_fields
        keys = set()
        for line in self.lines:
            record = json.loads(line)
            stamp = datetime.fromisoformat(record["timestamp"]).timestamp()
            app = record.get("app", fields["app"].default)
            model = record.get("model", fields["model"].default)
            keys.add((app, model, int(stamp // size_seconds)))
        return len(keys)


def _is_bad(record: dict[str, Any]) -> bool:
    labels = record.get("labels") or {}
    return labels.get("grounded") == 0 or labels.get("correct") == 0 or labels.get("answer_refusal") == 1


def _named_contexts(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records with a document name on every passage that has none: one per distinct passage text,
    ``<app>/passage-NNN`` in order of first appearance (the sample's passages carry no names; this way
    the Documents page has a document per passage to rank)."""
    names: dict[str, str] = {}
    out = []
    for r in records:
        contexts = []
        for c in r.get("contexts") or []:
            passage = {"text": c} if isinstance(c, str) else dict(c)
            if not passage.get("document") and isinstance(passage.get("text"), str):
                name = names.setdefault(passage["text"], f"{r.get('app')}/passage-{len(names) + 1:03d}")
                passage["document"] = name
            contexts.append(passage)
        out.append({**r, "contexts": contexts} if contexts else r)
    return out


def _pools(records: Sequence[dict[str, Any]]) -> dict[tuple[str, bool], list[dict[str, Any]]]:
    pools: dict[tuple[str, bool], list[dict[str, Any]]] = {}
    for r in _named_contexts(records):
        pools.setdefault((str(r.get("app")), _is_bad(r)), []).append(r)
    return pools


def _times(rng: random.Random, n: int, start: datetime, seconds: float) -> list[datetime]:
    """``n`` times in [start, start + seconds), denser in the (UTC) day than at night."""
    out: list[datetime] = []
    while len(out) < n:
        offset = rng.random() * seconds
        hour = ((start.timestamp() + offset) % 86_400) / 3600
        if rng.random() < 0.55 + 0.45 * math.sin(math.pi * (hour - 6) / 12):
            out.append(start + timedelta(seconds=offset))
    return sorted(out)


def as_tool_call(record: dict[str, Any], call_id: str, empty: bool) -> dict[str, Any]:
    """A RAG record as a tool-calling agent's interaction: its question asked in an OpenAI chat-format
    conversation whose assistant turn calls ``search_kb`` and whose tool turn returns the record's passages
    as documents (``[]`` when ``empty``); the record's own contexts are dropped (the tool result is the
    evidence). A record without a question string is not one of the sample's: callers leave it as it is."""
    documents = [
        {"id": c.get("document") or f"kb-{n + 1}", "content": c["text"]}
        for n, c in enumerate(record.get("contexts") or [])
        if isinstance(c, dict) and isinstance(c.get("text"), str)
    ]
    question = record["question"]
    call = {"id": call_id, "type": "function",
            "function": {"name": "search_kb", "arguments": json.dumps({"query": question})}}  # fmt: skip
    messages = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": question},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {
            "role": "tool",
            "tool_call_id": call_id,
            "content": json.dumps([] if empty else documents, ensure_ascii=False),
        },
    ]
    out = {k: v for k, v in record.items() if k not in ("question", "contexts")}
    return {**out, "messages": messages}


def simulate(
    records: Sequence[dict[str, Any]],
    events: int,
    *,
    days: float = 14.0,
    onset_fraction: float = 0.65,
    outage_fraction: float = 0.8,
    citation_bug_fraction: float = 0.5,
    subject_outage_fraction: float = 0.55,
    now: datetime | None = None,
    seed: int = 7,
) -> History:
    """``events`` interactions over the ``days`` before ``now`` (see the module docstring)."""
    fractions = (onset_fraction, outage_fraction, citation_bug_fraction, subject_outage_fraction)
    if events < 1 or days <= 0 or not all(0 < f < 1 for f in fractions):
        raise ValueError(
            "events >= 1, days > 0 and onset_fraction, outage_fraction, citation_bug_fraction, "
            "subject_outage_fraction within (0, 1) are required"
        )
    rng = random.Random(seed)
    end = (now or datetime.now(UTC)).replace(minute=0, second=0, microsecond=0)
    start = end - timedelta(days=days)
    onset = start + (end - start) * onset_fraction
    outage = start + (end - start) * outage_fraction
    bug = start + (end - start) * citation_bug_fraction
    subject_outage = start + (end - start) * subject_outage_fraction
    pools = _pools(records)
    stamped: list[tuple[datetime, str]] = []
    for plan in PLANS:
        if plan.max_turns > 1:  # its own generator: the single-turn series draw as they always did
            stamped += _conversations(plan, pools, events, start, end, onset, random.Random(seed * 7919 + 34))
            continue
        if plan.cites:  # its own generator too, for the same reason
            stamped += _citing(plan, pools, events, start, end, bug, random.Random(seed * 7919 + 35))
            continue
        stamped += _single_turn(plan, pools, events, (start, end), (onset, outage, subject_outage), rng)
    stamped.sort(key=lambda pair: pair[0])
    drifting = next((p.app, p.model) for p in PLANS if p.bad_share_after_onset is not None)
    agent = next(((p.app, p.model) for p in PLANS if p.tool), None)
    citing = next(((p.app, p.model) for p in PLANS if p.cites), None)
    failing = next(((p.app, p.model) for p in PLANS if p.refuses_subject), None)
    return History(
        lines=[line for _, line in stamped],
        start=start,
        end=end,
        onset=onset,
        drifting=drifting,
        kb_outage=outage if agent else None,
        tool_agent=agent,
        citation_bug=bug if citing else None,
        citing=citing,
        subject_outage=subject_outage if failing else None,
        subject_failing=failing,
    )


def refused_on_subject(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` answered with ``SUBJECT_REFUSAL`` and labeled as the refusal it is."""
    return {**record, "answer": SUBJECT_REFUSAL, "labels": {"answer_refusal": 1}}


def _single_turn(
    plan: SeriesPlan,
    pools: dict[tuple[str, bool], list[dict[str, Any]]],
    events: int,
    span: tuple[datetime, datetime],
    moments: tuple[datetime, datetime, datetime],
    rng: random.Random,
) -> list[tuple[datetime, str]]:
    """A single-turn series over ``span``: from ``onset`` on, ``v2_share_after_onset`` of it served with
    prompt v2 (drawn bad with ``bad_share_after_onset``); drawn from the generator the series share. From
    ``subject_outage`` on, a series that ``refuses_subject`` refuses ``SUBJECT_REFUSED_OF_TEN`` in ten of
    its questions about it (counted, not drawn: the shared generator's draws stay as they were)."""
    start, end = span
    onset, outage, subject_outage = moments
    on_subject = 0
    out: list[tuple[datetime, str]] = []
    count = max(1, round(events * plan.share))
    for i, when in enumerate(_times(rng, count, start, (end - start).total_seconds())):
        v2 = when >= onset and rng.random() < plan.v2_share_after_onset
        bad = plan.bad_share_after_onset if v2 and plan.bad_share_after_onset is not None else plan.bad_share
        pool = pools.get((plan.source_app, rng.random() < bad)) or pools.get((plan.source_app, False)) or []
        if pool:
            record = _planned_record(rng, plan, rng.choice(pool), i, when, v2=v2, outage=outage)
            about = SUBJECT.search(str(record.get("question")))
            if plan.refuses_subject and when >= subject_outage and about:
                on_subject += 1
                if on_subject % 10 < SUBJECT_REFUSED_OF_TEN:
                    record = refused_on_subject(record)
            out.append((when, json.dumps(record, ensure_ascii=False)))
    return out


def with_citation(
    record: dict[str, Any], others: Sequence[dict[str, Any]], own_at: int, *, off_by_one: bool
) -> dict[str, Any]:
    """``record`` answered with a citation: its passages are its own first one at 1-based position
    ``own_at`` among the first passage of each of ``others`` (``CITED_PASSAGES`` in all), and its answer
    ends with ``[own_at]``, or with ``[own_at + 1]`` (the next passage, another document) when
    ``off_by_one``. ``own_at`` is at most ``CITED_PASSAGES - 1``, so the wrong number still names a
    passage."""
    if not 1 <= own_at < CITED_PASSAGES or len(others) < CITED_PASSAGES - 1:
        raise ValueError(
            f"own_at within [1, {CITED_PASSAGES - 1}] and {CITED_PASSAGES - 1} others are required"
        )
    passages = [o["contexts"][0] for o in others[: CITED_PASSAGES - 1]]
    passages.insert(own_at - 1, record["contexts"][0])
    answer = str(record["answer"]).rstrip()
    return {**record, "contexts": passages, "answer": f"{answer} [{own_at + 1 if off_by_one else own_at}]"}


def _citing(
    plan: SeriesPlan,
    pools: dict[tuple[str, bool], list[dict[str, Any]]],
    events: int,
    start: datetime,
    end: datetime,
    bug: datetime,
    rng: random.Random,
) -> list[tuple[datetime, str]]:
    """A series answering with citations (``with_citation``), off by one from ``bug`` on."""
    every = [r for good in (False, True) for r in pools.get((plan.source_app, good), []) if r.get("contexts")]
    out: list[tuple[datetime, str]] = []
    for i, when in enumerate(
        _times(rng, max(1, round(events * plan.share)), start, (end - start).total_seconds())
    ):
        pool = [
            r for r in pools.get((plan.source_app, rng.random() < plan.bad_share)) or [] if r.get("contexts")
        ]
        if not pool or len(every) < CITED_PASSAGES:
            continue
        source = rng.choice(pool)
        others = rng.sample(
            [r for r in every if r["contexts"][0] != source["contexts"][0]], CITED_PASSAGES - 1
        )
        cited = with_citation(source, others, rng.randint(1, CITED_PASSAGES - 1), off_by_one=when >= bug)
        record = _planned_record(rng, plan, cited, i, when, v2=False, outage=end)
        out.append((when, json.dumps(record, ensure_ascii=False)))
    return out


def _conversations(
    plan: SeriesPlan,
    pools: dict[tuple[str, bool], list[dict[str, Any]]],
    events: int,
    start: datetime,
    end: datetime,
    onset: datetime,
    rng: random.Random,
) -> list[tuple[datetime, str]]:
    """A multi-turn series: conversations of 2 to ``max_turns`` turns, 20 s to 3 min apart; each turn
    drawn bad with ``bad_share``, but from ``onset`` on a conversation's last turn with
    ``unresolved_after_onset``."""
    mean_turns = (2 + plan.max_turns) / 2
    count = max(1, round(events * plan.share / mean_turns))
    out: list[tuple[datetime, str]] = []
    for j, begin in enumerate(_times(rng, count, start, (end - start).total_seconds())):
        turns = rng.randint(2, plan.max_turns)
        when = begin
        for k in range(turns):
            if k:
                when += timedelta(seconds=rng.uniform(20, 180))
            last = k == turns - 1
            bad = plan.bad_share
            if last and when >= onset and plan.unresolved_after_onset is not None:
                bad = plan.unresolved_after_onset
            pool = (
                pools.get((plan.source_app, rng.random() < bad)) or pools.get((plan.source_app, False)) or []
            )
            if not pool:
                continue
            record = dict(rng.choice(pool))
            metadata = dict(record.get("metadata") or {})
            metadata.update(prompt_version="v1", retriever=rng.choice(("bm25", "dense")))
            if last:
                metadata["conversation_end"] = True
            record.update(
                metadata=metadata,
                id=f"{record['id']}-{plan.model}-c{j}-{k}",
                conversation_id=f"{plan.app}-{plan.model}-conversation-{j}",
                app=plan.app,
                model=plan.model,
                timestamp=when.isoformat(),
            )
            out.append((when, json.dumps(record, ensure_ascii=False)))
    return out


def _planned_record(
    rng: random.Random,
    plan: SeriesPlan,
    source: dict[str, Any],
    i: int,
    when: datetime,
    *,
    v2: bool,
    outage: datetime,
) -> dict[str, Any]:
    """The ``i``-th interaction of ``plan`` at ``when``, built from ``source``: its prompt version and
    retriever in its metadata, and, for a tool agent, as a tool call (empty after the outage, sometimes)."""
    record = dict(source)
    metadata = dict(record.get("metadata") or {})
    metadata.update(prompt_version="v2" if v2 else "v1", retriever=rng.choice(("bm25", "dense")))
    record.update(
        metadata=metadata,
        id=f"{record['id']}-{plan.model}-{i}",
        app=plan.app,
        model=plan.model,
        timestamp=when.isoformat(),
    )
    if plan.tool and isinstance(record.get("question"), str):
        empty = when >= outage and rng.random() < plan.empty_share_after_outage
        record = as_tool_call(record, f"call_{plan.model}_{i}", empty)
    return record


def stamp_file(
    records: Sequence[dict[str, Any]], *, days: float = 14.0, now: datetime | None = None
) -> History:
    """A user's own interactions as history: every record once, in file order, its id kept, stamped at
    even steps over the ``days`` before ``now`` (no drift is simulated). ValueError names a record without
    an id."""
    if days <= 0:
        raise ValueError("days > 0 is required")
    end = (now or datetime.now(UTC)).replace(minute=0, second=0, microsecond=0)
    start = end - timedelta(days=days)
    step = (end - start) / max(1, len(records))
    lines = []
    for i, source in enumerate(records):
        if source.get("interaction_id", source.get("id")) in (None, ""):
            raise ValueError(f"record {i + 1} has no interaction_id (or id)")
        record = dict(source)
        record["timestamp"] = (start + step * (i + 0.5)).isoformat()
        lines.append(json.dumps(record, ensure_ascii=False))
    return History(lines=lines, start=start, end=end, onset=None, drifting=None)
