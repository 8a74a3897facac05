"""Latency of the built-in dashboard's JSON API over a month of windows in embedded chDB.

    python benchmarks/dashboard_latency.py [--interactions 1000000] [--days 30] [--repeat 10]
                                           [--workdir DIR] [--reuse] [--json OUT] [--only NAMES]

1. Builds a data set through the product's own schema (``ClickHouseStore.open_sync`` applies the
   migrations to a fresh ``chdb:///<workdir>/chdb``): ``--interactions`` rows of ``evaluations`` spread
   uniformly over the last ``--days`` days, 4 app/model series of different volumes, random (uuid4) ids,
   a small Evaluation JSON payload per row (question, context, answer, the judge calls), inserted in
   time order in chunks of 100k with ``client.insert``, each with 3 of 400 context documents and one of
   50,000 questions (both skewed), and for each scored one 2 context-answer ``evaluation_statements``
   judged against its first two documents; the matching ``window_aggregates`` (one row per
   series and 1-minute window, plus 2 % recomputed windows: a second copy with a newer version, as late
   rows leave behind), a few thousand ``dead_letters`` and a few hundred ``alerts``. The window columns
   are computed with numpy from the same arrays as the rows (the same definitions as
   ``streams.windows.aggregator.WindowStats``, which is checked against them on a sample of windows).
2. Serves ``streams.dashboard.api.root_app`` on an aiohttp ``AppRunner`` + ``TCPSite`` bound to
   127.0.0.1 in this process, and times real HTTP GETs (aiohttp client, body read in full):
   ``/dashboard/api/overview`` for the last 1 hour, 7 days and 30 days (all series, then one model),
   ``/api/options``, ``/api/bucket`` for one 1-minute window, ``/api/documents`` and ``/api/compare``
   (two models of one app) for 7 and 30 days, ``/api/interactions/{id}``. One warm-up, then
   ``--repeat`` timed requests each: median, p95, max (``--only`` measures the requests whose name
   starts with one of its comma-separated prefixes).
3. Splits the time of each overview: the series SQL alone (``store.query_sync``), the same SQL without
   FINAL, ``DashboardQueries.overview`` in process (all its SQL + Python), ``Overview.model_dump_json``;
   the two SQL statements of the bucket drill-down; and each SQL statement of Documents and Compare.

With ``--reuse`` and a ``--workdir`` that holds a finished build, step 1 is skipped. Output: a markdown
table, the machine and its load (``benchmarks/machine.py``), ``--json`` figures.

Slices: every row carries three metadata dimensions of 5, 50 and 5,000 values (``prompt_version``,
``locale``, ``customer``; stored without the cardinality guard, the worst case) and the three built-ins;
the run times ``/api/slices/breakdown`` (7 and 30 days) and ``/api/slices/changes`` (7 days against the 7
before, 15 against 15) by each, the overview of one slice over 30 days, and reports the ``dimensions``
column's compressed bytes per row.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from aiohttp import ClientSession, web  # noqa: E402

from benchmarks.machine import Machine, rss_mb, write_json  # noqa: E402
from schemas.alert import Alert  # noqa: E402
from schemas.compare import CompareQuery  # noqa: E402
from schemas.dashboard import BucketQuery, OverviewQuery  # noqa: E402
from schemas.documents import DocumentsQuery  # noqa: E402
from schemas.evaluation import Evaluation  # noqa: E402
from schemas.evaluation_row import EvalRow  # noqa: E402
from schemas.interaction import Interaction  # noqa: E402
from schemas.latency import LATENCY_BUCKET_EDGES_MS, LATENCY_BUCKETS  # noqa: E402
from schemas.latency import quantile as latency_quantile  # noqa: E402
from schemas.results import JudgeCall  # noqa: E402
from schemas.settings import ClickHouseSettings, DashboardSettings  # noqa: E402
from streams.clickhouse.dead_letter_rows import DEAD_LETTER_COLUMNS  # noqa: E402
from streams.clickhouse.rows import (  # noqa: E402
    ALERT_COLUMNS,
    EVALUATION_COLUMNS,
    STATEMENT_COLUMNS,
    WINDOW_COLUMNS,
    alert_row,
)
from streams.clickhouse.slices import slice_condition  # noqa: E402
from streams.clickhouse.store import ClickHouseStore  # noqa: E402
from streams.dashboard.api import root_app  # noqa: E402
from streams.dashboard.compare import question_counts_sql, questions_sql, slices_sql  # noqa: E402
from streams.dashboard.documents import documents_sql  # noqa: E402
from streams.dashboard.queries import DashboardQueries, overview_sql  # noqa: E402
from streams.dashboard.rollup import choose_rollup  # noqa: E402
from streams.windows.aggregator import WindowStats  # noqa: E402

#: (app, model, share of the interactions, base context entailment): volumes and quality differ
SERIES = (
    ("support-bot", "gpt-4o-mini", 0.40, 0.82),
    ("support-bot", "llama-3.1-8b", 0.20, 0.72),
    ("search-assistant", "gpt-4o-mini", 0.25, 0.80),
    ("search-assistant", "claude-3-haiku", 0.15, 0.85),
)
WINDOW_S = 60
CHUNK = 100_000
PAYLOAD = EVALUATION_COLUMNS.index("payload")
HALLUCINATION_THRESHOLD = 0.5
STAGES = ("convert", "pronouns", "nli", "refusal", "join", "sink", "validate")
#: context documents (each interaction retrieves 3 distinct ones, some far more often than others) and
#: distinct questions (a few asked very often), for the Documents and Compare pages
DOCUMENTS = 400
QUESTIONS = 50_000
VERDICTS = ("entailed", "not_stated", "contradicted")


def document_name(k: int) -> str:
    return f"kb/doc-{k:03d}.md"


# ---- the data --------------------------------------------------------------------------------------


def simulate(n: int, days: int, end_ms: int, seed: int = 7) -> dict[str, np.ndarray]:
    """Per-interaction columns (numpy, time-ordered) and the flat judge-call latencies."""
    rng = np.random.default_rng(seed)
    span_ms = days * 86_400_000
    ts = np.sort(end_ms - span_ms + rng.integers(0, span_ms, n))
    series = rng.choice(len(SERIES), n, p=[s[2] for s in SERIES])
    base = np.array([s[3] for s in SERIES])[series]
    incomplete = rng.random(n) < 0.005
    refusal = rng.random(n) < 0.05
    has_gt = rng.random(n) < 0.3
    gt_refusal = rng.random(n) < 0.03
    scored = ~refusal & ~incomplete
    # context entailment: mostly high, a tail under the threshold (the hallucinations)
    ctx = np.clip(base + rng.normal(0, 0.2, n), 0, 1)
    gt_ans = np.clip(base - 0.05 + rng.normal(0, 0.2, n), 0, 1)
    ans_gt = np.clip(base - 0.10 + rng.normal(0, 0.25, n), 0, 1)
    grounded = np.clip(base + rng.normal(0, 0.15, n), 0, 1)
    calls = np.minimum(1 + rng.poisson(1.4, n), 8)
    latencies = rng.lognormal(np.log(700.0), 0.6, int(calls.sum()))
    offsets = np.concatenate(([0], np.cumsum(calls)))
    judge_latency = np.add.reduceat(latencies, offsets[:-1])
    input_tokens = calls * 550 + rng.integers(0, 400, n)
    # documents: the first by popularity, the other two at distinct offsets from it
    first = np.minimum((DOCUMENTS * rng.random(n) ** 2).astype(np.int64), DOCUMENTS - 1)
    half = DOCUMENTS // 2
    second = (first + 1 + rng.integers(0, half, n)) % DOCUMENTS
    third = (first + half + 1 + rng.integers(0, half - 1, n)) % DOCUMENTS
    documents = np.stack([first, second, third], axis=1)
    # two answer statements per scored interaction, judged against its first and second passage: entailed
    # more often with a higher context entailment and a better document; otherwise 4:1 not stated
    quality = 0.55 + 0.45 * rng.random(DOCUMENTS)
    supported = rng.random((n, 2)) < np.clip(ctx[:, None] * quality[documents[:, :2]] + 0.15, 0, 1)
    verdicts = np.where(supported, 0, np.where(rng.random((n, 2)) < 0.8, 1, 2))
    output_tokens = calls * 60 + rng.integers(0, 80, n)
    return {
        "ts": ts,
        "evaluated": ts + judge_latency.astype(np.int64) + rng.integers(500, 5_000, n),
        "series": series,
        "complete": ~incomplete,
        "refusal": refusal,
        "gt_known": has_gt,
        "gt_refusal": gt_refusal,
        "ctx_known": scored,
        "ctx": ctx,
        "gt_known_scored": has_gt & scored,
        "gt_ans": gt_ans,
        "ans_gt": ans_gt,
        "grounded": grounded,
        "calls": calls,
        "offsets": offsets,
        "latencies": latencies,
        "judge_latency": judge_latency,
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "cost": input_tokens * 0.15e-6 + output_tokens * 0.6e-6,
        "documents": documents,
        "verdicts": verdicts,
        "question": np.minimum((QUESTIONS * rng.random(n) ** 3).astype(np.int64), QUESTIONS - 1),
    }


def windows(d: dict[str, np.ndarray], end_ms: int, days: int) -> dict[str, Any]:
    """The window_aggregates columns of every (series, 1-minute window) with interactions: the
    definitions of WindowStats, vectorised."""
    minutes = days * 1440
    first_ms = end_ms - minutes * 60_000
    minute = (d["ts"] - first_ms) // 60_000
    key = d["series"].astype(np.int64) * minutes + minute
    keys, inverse = np.unique(key, return_inverse=True)
    w = len(keys)

    def total(values: np.ndarray, where: np.ndarray | None = None) -> np.ndarray:
        weights = values.astype(np.float64) if where is None else np.where(where, values, 0.0)
        return np.bincount(inverse, weights=weights, minlength=w)

    def count(where: np.ndarray) -> np.ndarray:
        return np.bincount(inverse, weights=where.astype(np.float64), minlength=w).astype(np.int64)

    def mean(values: np.ndarray, where: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n = count(where)
        return np.where(n > 0, total(values, where) / np.maximum(n, 1), np.nan), n

    ctx_known, gt_known = d["ctx_known"], d["gt_known_scored"]
    answered = count(ctx_known)
    hallucinations = count(ctx_known & (d["ctx"] < HALLUCINATION_THRESHOLD))
    refusal_known = np.bincount(inverse, minlength=w).astype(np.int64)
    gt_refusal_known = count(d["gt_known"])
    # judge-call latencies: a histogram per window (schemas.latency.histogram) and its p50/p95
    # (schemas.latency.quantile, the one definition)
    call_window = np.repeat(inverse, d["calls"])
    buckets = np.searchsorted(np.array(LATENCY_BUCKET_EDGES_MS), np.maximum(d["latencies"], 0.0), "left")
    hist = np.bincount(call_window * LATENCY_BUCKETS + buckets, minlength=w * LATENCY_BUCKETS)
    per_window = hist.reshape(w, LATENCY_BUCKETS).tolist()

    def quantile(q: float) -> np.ndarray:
        values = (latency_quantile(counts, q) for counts in per_window)
        return np.array([np.nan if v is None else v for v in values], dtype=np.float64)

    ctx_mean, ctx_n = mean(d["ctx"], ctx_known)
    gt_ans_mean, gt_ans_n = mean(d["gt_ans"], gt_known)
    ans_gt_mean, ans_gt_n = mean(d["ans_gt"], gt_known)
    grounded_mean, grounded_n = mean(d["grounded"], ctx_known)
    refusals = count(d["refusal"])
    gt_refusals = count(d["gt_known"] & d["gt_refusal"])
    return {
        "keys": keys,
        "minutes": minutes,
        "first_ms": first_ms,
        "inverse": inverse,
        "count": refusal_known,
        "judged": refusal_known,  # every generated interaction was judged (no sampling)
        "skipped": np.zeros_like(refusal_known),
        "mean_context_entailment": ctx_mean,
        "mean_ground_truth_entails_answer": gt_ans_mean,
        "mean_answer_entails_ground_truth": ans_gt_mean,
        "answered": answered,
        "hallucinations": hallucinations,
        "hallucination_rate": np.where(answered > 0, hallucinations / np.maximum(answered, 1), np.nan),
        "answer_refusal_rate": refusals / refusal_known,
        "ground_truth_refusal_rate": np.where(
            gt_refusal_known > 0, gt_refusals / np.maximum(gt_refusal_known, 1), np.nan
        ),
        "input_tokens": total(d["input_tokens"]).astype(np.int64),
        "output_tokens": total(d["output_tokens"]).astype(np.int64),
        "cost_usd": total(d["cost"]),
        "judge_latency_p50_ms": quantile(0.5),
        "judge_latency_p95_ms": quantile(0.95),
        "incomplete": count(~d["complete"]),
        "answer_refusal_known": refusal_known,
        "ground_truth_refusal_known": gt_refusal_known,
        "context_scored": ctx_n,
        "ground_truth_answer_scored": gt_ans_n,
        "answer_ground_truth_scored": ans_gt_n,
        "judge_latency_calls": np.bincount(call_window, minlength=w),
        "mean_grounded_precision": grounded_mean,
        "grounded_precision_scored": grounded_n,
        "judge_latency_histogram": hist.reshape(w, LATENCY_BUCKETS),
    }


def _opt(value: float, known: bool) -> float | None:
    return float(value) if known else None


def eval_row(d: dict[str, np.ndarray], i: int) -> EvalRow:
    """Interaction i as the EvalRow the worker's windows aggregate."""
    app, model = SERIES[d["series"][i]][:2]
    scored, gt = bool(d["ctx_known"][i]), bool(d["gt_known_scored"][i])
    return EvalRow(
        interaction_id=str(i),
        timestamp=datetime.fromtimestamp(d["ts"][i] / 1000, UTC),
        app=app,
        model=model,
        context_entailment=_opt(d["ctx"][i], scored),
        ground_truth_entails_answer=_opt(d["gt_ans"][i], gt),
        answer_entails_ground_truth=_opt(d["ans_gt"][i], gt),
        answer_refusal=bool(d["refusal"][i]),
        ground_truth_refusal=bool(d["gt_refusal"][i]) if d["gt_known"][i] else None,
        hallucination=bool(d["ctx"][i] < HALLUCINATION_THRESHOLD) if scored else None,
        grounded_precision=_opt(d["grounded"][i], scored),
        input_tokens=int(d["input_tokens"][i]),
        output_tokens=int(d["output_tokens"][i]),
        cost_usd=float(d["cost"][i]),
        judge_latency_ms=float(d["judge_latency"][i]),
        call_latencies_ms=d["latencies"][d["offsets"][i] : d["offsets"][i + 1]].tolist(),
        complete=bool(d["complete"][i]),
    )


def check_windows(d: dict[str, np.ndarray], win: dict[str, Any], sample: int = 200) -> int:
    """Compare the vectorised windows with WindowStats on ``sample`` random windows; returns how many."""
    rng = np.random.default_rng(1)
    picked = rng.choice(len(win["keys"]), min(sample, len(win["keys"])), replace=False)
    members: dict[int, list[int]] = {int(k): [] for k in picked}
    for i in np.flatnonzero(np.isin(win["inverse"], picked)):
        members[int(win["inverse"][i])].append(int(i))
    for k, rows in members.items():
        s = WindowStats().extend(eval_row(d, i) for i in rows)
        dummy = datetime(2000, 1, 1, tzinfo=UTC)
        ref = s.result(window_start=dummy, window_end=dummy, app="", model="").model_dump()
        for col, value in ref.items():
            if col in ("window_start", "window_end", "app", "model"):
                continue
            if col == "skipped_by_reason":
                assert value == {}, (col, k, value)
                continue
            ours = win[col][k]
            ours = ours.tolist() if col == "judge_latency_histogram" else ours
            if isinstance(value, dict):
                assert value == ours, (col, k)
            elif value is None:
                assert np.isnan(ours), (col, k, ours)
            elif isinstance(value, list | dict):
                assert value == ours, (col, k)
            else:
                assert abs(float(value) - float(ours)) <= 1e-9 * max(1.0, abs(float(value))), (
                    col,
                    value,
                    ours,
                )
    return len(members)


def payload_template() -> str:
    """A valid Evaluation as JSON with ``{name}`` holes for the values that vary per row."""
    holes = {
        "interaction_id": "iid",
        "timestamp": "ts",
        "evaluated_at": "ev",
        "app": "app",
        "model": "model",
        "conversation_id": "conv",
    }
    numbers = {
        "context_entailment": "ctx",
        "ground_truth_entails_answer": "gt_ans",
        "answer_entails_ground_truth": "ans_gt",
        "answer_refusal": "refusal",
        "ground_truth_refusal": "gt_refusal",
        "grounded_precision": "grounded",
        "hallucination": "hallucination",
        "judge_calls": "calls",
        "input_tokens": "in_tok",
        "output_tokens": "out_tok",
        "cost_usd": "cost",
        "judge_latency_ms": "latency",
        "complete": "complete",
    }
    now = datetime(2000, 1, 1, tzinfo=UTC)
    e = Evaluation(
        interaction_id="x",
        timestamp=now,
        evaluated_at=now,
        app="a",
        model="m",
        conversation_id="c",
        judge="openai",
        calls=[JudgeCall(stage="nli", judge="openai", model="gpt-4o-mini")],
        interaction=Interaction(
            interaction_id="x",
            question="How do I reset the password of my account when the recovery e-mail never arrives?",
            contexts=[
                {
                    "text": "If the recovery e-mail does not arrive within ten minutes, check the spam "
                    "folder, then ask support to verify the address on file.",
                    "document": "help/account-recovery.md",
                }
            ],
            answer="Check your spam folder first; if the e-mail is not there after ten minutes, contact "
            "support so they can verify the address on your account.",
        ),
    )
    data = e.model_dump(mode="json")
    for field, hole in {**holes, **numbers}.items():
        data[field] = f"\x01{hole}\x01"
    data["interaction"]["interaction_id"] = "\x01iid\x01"
    data["calls"] = "\x01calls_json\x01"
    text = json.dumps(data, separators=(",", ":")).replace("{", "{{").replace("}", "}}")
    for hole in [*holes.values(), "calls_json"]:
        quote = "" if hole == "calls_json" else '"'
        text = text.replace(f'"\\u0001{hole}\\u0001"', f"{quote}{{{hole}}}{quote}")
    for hole in numbers.values():
        text = text.replace(f'"\\u0001{hole}\\u0001"', f"{{{hole}}}")
    assert "\\u0001" not in text, text
    return text


def _json_num(value: float | None) -> str:
    return "null" if value is None else repr(value)


def _json_flag(value: bool | None) -> str:
    return "null" if value is None else ("true" if value else "false")


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat().replace("+00:00", "Z")


#: three metadata dimensions of 5, 50 and 5,000 values (drawn uniformly; stored without the cardinality
#: guard, the worst case for storage and queries) beside the three built-ins
DIMENSIONS = (("prompt_version", 5), ("locale", 50), ("customer", 5000))
ANSWER_LENGTHS = ("<100", "100-499", "500-1999", "2000+")
TURNS = ("1", "2", "3-5", "6-10", "11+")


def dimension_maps(lo: int, hi: int, seed: int = 13) -> list[dict[str, str]]:
    rng = np.random.default_rng(seed + lo)
    n = hi - lo
    drawn = {name: rng.integers(0, size, n) for name, size in DIMENSIONS}
    lengths, turns, truths = rng.integers(0, 4, n), rng.integers(0, 5, n), rng.integers(0, 2, n)
    return [
        {
            **{name: f"{name}-{int(drawn[name][k])}" for name, _ in DIMENSIONS},
            "answer_length": ANSWER_LENGTHS[int(lengths[k])],
            "has_ground_truth": "yes" if truths[k] else "no",
            "turn": TURNS[int(turns[k])],
        }
        for k in range(n)
    ]


def evaluation_chunk(
    d: dict[str, np.ndarray], lo: int, hi: int, ids: list[str], template: str
) -> list[list[Any]]:
    """Rows of ``evaluations`` (EVALUATION_COLUMNS) for interactions lo..hi-1, column-oriented."""
    cols: dict[str, list[Any]] = {c: [] for c in EVALUATION_COLUMNS}
    dims = dimension_maps(lo, hi)
    offsets, latencies = d["offsets"], d["latencies"]
    for i in range(lo, hi):
        app, model = SERIES[d["series"][i]][:2]
        scored, gt = bool(d["ctx_known"][i]), bool(d["gt_known_scored"][i])
        complete = bool(d["complete"][i])
        ctx = _opt(d["ctx"][i], scored)
        gt_ans = _opt(d["gt_ans"][i], gt)
        ans_gt = _opt(d["ans_gt"][i], gt)
        grounded = _opt(d["grounded"][i], scored)
        refusal = bool(d["refusal"][i])
        gt_refusal = bool(d["gt_refusal"][i]) if d["gt_known"][i] else None
        hallucination = (ctx < HALLUCINATION_THRESHOLD) if ctx is not None else None
        call_ms = latencies[offsets[i] : offsets[i + 1]].tolist()
        ts_ms, ev_ms = int(d["ts"][i]), int(d["evaluated"][i])
        ts, ev = datetime.fromtimestamp(ts_ms / 1000, UTC), datetime.fromtimestamp(ev_ms / 1000, UTC)
        in_tok, out_tok = int(d["input_tokens"][i]), int(d["output_tokens"][i])
        cost, latency = float(d["cost"][i]), float(d["judge_latency"][i])
        conv = f"conv-{i // 4}"
        calls_json = ",".join(
            '{"stage":"nli","judge":"openai","model":"gpt-4o-mini","input_tokens":0,"output_tokens":0,'
            f'"latency_ms":{ms!r},"cost_usd":0.0,"cached":false,"attempts":1,"items":1,"wall_ms":{ms!r}}}'
            for ms in call_ms
        )
        payload = template.format(
            iid=ids[i - lo],
            ts=_iso(ts_ms),
            ev=_iso(ev_ms),
            app=app,
            model=model,
            conv=conv,
            ctx=_json_num(ctx),
            gt_ans=_json_num(gt_ans),
            ans_gt=_json_num(ans_gt),
            refusal=_json_flag(refusal),
            gt_refusal=_json_flag(gt_refusal),
            grounded=_json_num(grounded),
            hallucination=_json_flag(hallucination),
            calls=len(call_ms),
            in_tok=in_tok,
            out_tok=out_tok,
            cost=repr(cost),
            latency=repr(latency),
            complete=_json_flag(complete),
            calls_json="[" + calls_json + "]",
        )
        doc_ids = d["documents"][i]
        values = {
            "interaction_id": ids[i - lo],
            "timestamp": ts,
            "evaluated_at": ev,
            "app": app,
            "model": model,
            "conversation_id": conv,
            "judge": "openai",
            "judge_model": "gpt-4o-mini",
            "prompt_version": "nli:3",
            "context_entailment": ctx,
            "ground_truth_entails_answer": gt_ans,
            "answer_entails_ground_truth": ans_gt,
            "answer_refusal": int(refusal),
            "ground_truth_refusal": None if gt_refusal is None else int(gt_refusal),
            "grounded_precision": grounded,
            "hallucination": None if hallucination is None else int(hallucination),
            "relevance": None,
            "unsupported_claims": ["an unsupported claim"] if hallucination else [],
            "judge_calls": len(call_ms),
            "input_tokens": in_tok,
            "output_tokens": out_tok,
            "cost_usd": cost,
            "judge_latency_ms": latency,
            "call_latencies_ms": call_ms,
            "complete": int(complete),
            "missing": [] if complete else ["nli"],
            "judged": 1,
            "skip_reason": None,
            "version": (int(complete) << 50) | ev_ms,
            "payload": payload,
            "history_turns": 0,
            "history_truncated": 0,
            "context_documents": [document_name(int(k)) for k in doc_ids],
            "question_hash": int(d["question"][i]) + 1,  # any non-zero 64-bit value per question
            "dimensions": dims[i - lo],
            "tool_calls": 0,  # the synthetic traffic calls no tools
            "tool_error": None,
            "no_evidence": None if refusal else 0,
            "ungrounded_arguments": None,
            "custom_scores": {},  # no custom evaluator in this build
            "custom_missing": {},
            "custom_versions": {},
        }
        assert values.keys() == cols.keys(), set(values).symmetric_difference(cols)
        for col, value in values.items():
            cols[col].append(value)
    return list(cols.values())


def statement_chunk(d: dict[str, np.ndarray], lo: int, hi: int, ids: list[str]) -> list[list[Any]]:
    """Rows of ``evaluation_statements`` (STATEMENT_COLUMNS) for the scored interactions lo..hi-1: two
    context-answer statements each, with the passage and document they were judged against."""
    cols: dict[str, list[Any]] = {c: [] for c in STATEMENT_COLUMNS}
    for i in np.flatnonzero(d["ctx_known"][lo:hi]) + lo:
        app, model = SERIES[d["series"][i]][:2]
        ts_ms, ev_ms = int(d["ts"][i]), int(d["evaluated"][i])
        ts, ev = datetime.fromtimestamp(ts_ms / 1000, UTC), datetime.fromtimestamp(ev_ms / 1000, UTC)
        for k in range(2):
            verdict = VERDICTS[int(d["verdicts"][i, k])]
            values = {
                "interaction_id": ids[i - lo],
                "timestamp": ts,
                "evaluated_at": ev,
                "app": app,
                "model": model,
                "pair": "context_answer",
                "hypothesis_index": 0,
                "statement_index": k,
                "hypothesis": "Check your spam folder first; then contact support.",
                "statement": ("Check your spam folder first.", "Contact support.")[k],
                "verdict": verdict,
                "score": 1.0 if verdict == "entailed" else 0.0,
                "tag": "",
                "reason": "",
                "version": (int(d["complete"][i]) << 50) | ev_ms,
                "passage": k,
                "document": document_name(int(d["documents"][i, k])),
            }
            assert values.keys() == cols.keys(), set(values).symmetric_difference(cols)
            for col, value in values.items():
                cols[col].append(value)
    return list(cols.values())


def window_columns(win: dict[str, Any], rows: np.ndarray, recomputed: bool = False) -> list[list[Any]]:
    """window_aggregates rows ``rows`` (indices into win) as WINDOW_COLUMNS, column-oriented: computed
    when the window closed (grace 5 s), or, ``recomputed``, again 3 minutes later (a newer version)."""
    keys = win["keys"][rows]
    series, minute = keys // win["minutes"], keys % win["minutes"]
    start_ms = win["first_ms"] + minute * 60_000
    out: dict[str, list[Any]] = {
        "window_start": [datetime.fromtimestamp(ms / 1000, UTC) for ms in start_ms.tolist()],
        "window_end": [
            datetime.fromtimestamp((ms + WINDOW_S * 1000) / 1000, UTC) for ms in start_ms.tolist()
        ],
        "app": [SERIES[s][0] for s in series.tolist()],
        "model": [SERIES[s][1] for s in series.tolist()],
    }
    for col in WINDOW_COLUMNS:
        if col in out or col in ("computed_at", "version"):
            continue
        if col in ("skipped_by_reason", "custom_values", "custom_scored", "custom_missing"):
            out[col] = [{} for _ in range(len(rows))]  # maps this build leaves empty
            continue
        values = win[col][rows]
        if col in ("judge_latency_histogram", "skipped_by_reason"):
            out[col] = values.tolist()
        elif values.dtype.kind == "f":
            out[col] = [None if v != v else v for v in values.tolist()]  # NaN: no value (NULL)
        else:
            out[col] = values.tolist()
    delay_ms = (WINDOW_S + 5) * 1000 + (180_000 if recomputed else 0)
    out["computed_at"] = [datetime.fromtimestamp((ms + delay_ms) / 1000, UTC) for ms in start_ms.tolist()]
    out["version"] = [int(c.timestamp() * 1_000_000) for c in out["computed_at"]]
    return [out[c] for c in WINDOW_COLUMNS]


def build(store: ClickHouseStore, n: int, days: int, end: datetime) -> dict[str, Any]:
    """Fill the store; returns what was built and how long each part took."""
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    end_ms = int(end.timestamp() * 1000)
    d = simulate(n, days, end_ms)
    win = windows(d, end_ms, days)
    timings["simulate_and_windows_s"] = time.perf_counter() - t0
    t = time.perf_counter()
    checked = check_windows(d, win)
    timings["check_windows_s"] = time.perf_counter() - t
    print(f"windows: {len(win['keys'])}; WindowStats agrees on {checked} random windows", flush=True)

    template = payload_template()
    id_rng = np.random.default_rng(11)
    build_s = insert_s = 0.0
    payload_bytes = statement_rows = 0
    for lo in range(0, n, CHUNK):
        hi = min(n, lo + CHUNK)
        t = time.perf_counter()
        ids = [
            str(uuid.UUID(bytes=bytes(b), version=4))
            for b in id_rng.integers(0, 256, (hi - lo, 16), np.uint8)
        ]
        data = evaluation_chunk(d, lo, hi, ids, template)
        if lo == 0:  # the payloads are valid Evaluations
            for p in data[PAYLOAD][:50]:
                Evaluation.model_validate_json(p)
        payload_bytes += sum(len(p) for p in data[PAYLOAD])
        build_s += time.perf_counter() - t
        t = time.perf_counter()
        store.client.insert(
            f"{store.db}.evaluations", data, column_names=EVALUATION_COLUMNS, column_oriented=True
        )
        insert_s += time.perf_counter() - t
        t = time.perf_counter()
        statements = statement_chunk(d, lo, hi, ids)
        statement_rows += len(statements[0])
        build_s += time.perf_counter() - t
        t = time.perf_counter()
        store.client.insert(
            f"{store.db}.evaluation_statements",
            statements,
            column_names=STATEMENT_COLUMNS,
            column_oriented=True,
        )
        insert_s += time.perf_counter() - t
        print(f"  evaluations {hi}/{n} (rows {build_s:.1f}s, inserts {insert_s:.1f}s)", flush=True)
    timings["evaluation_rows_s"] = build_s
    timings["evaluation_insert_s"] = insert_s

    t = time.perf_counter()
    all_windows = np.arange(len(win["keys"]))
    recomputed = np.random.default_rng(3).choice(all_windows, len(all_windows) // 50, replace=False)
    window_rows = 0
    for lo in range(0, len(all_windows), CHUNK):
        part = all_windows[lo : lo + CHUNK]
        store.client.insert(
            f"{store.db}.window_aggregates",
            window_columns(win, part),
            column_names=WINDOW_COLUMNS,
            column_oriented=True,
        )
        window_rows += len(part)
    # late rows made the worker write these windows again (same figures here, a newer version)
    store.client.insert(
        f"{store.db}.window_aggregates",
        window_columns(win, np.sort(recomputed), recomputed=True),
        column_names=WINDOW_COLUMNS,
        column_oriented=True,
    )
    window_rows += len(recomputed)
    timings["windows_insert_s"] = time.perf_counter() - t

    t = time.perf_counter()
    rng = np.random.default_rng(5)
    dead = []
    first_ms = end_ms - days * 86_400_000
    for k in range(max(1, n // 333)):  # ~3000 per million
        s = int(rng.integers(0, len(SERIES)))
        app, model = SERIES[s][:2] if rng.random() < 0.8 else ("", "")
        dead.append(
            [
                hashlib.sha256(f"dead-{k}".encode()).hexdigest(),
                datetime.fromtimestamp(int(rng.integers(first_ms, end_ms)) / 1000, UTC),
                STAGES[int(rng.integers(0, len(STAGES)))],
                "JudgeError",
                "judge answered 429 Too Many Requests after 5 attempts",
                "groundwatch.nli",
                str(uuid.UUID(int=int(rng.integers(0, 2**62)))),
                app,
                model,
                int(rng.integers(500, 4000)),
                0,
            ]
        )
    store.client.insert(f"{store.db}.dead_letters", dead, column_names=DEAD_LETTER_COLUMNS)
    alerts = []
    for k in range(max(1, n // 3333)):  # ~300 per million
        s = int(rng.integers(0, len(SERIES)))
        app, model = SERIES[s][:2]
        w_end = first_ms + int(rng.integers(3, days * 1440)) * 60_000
        alerts.append(
            alert_row(
                Alert(
                    alert_id=f"hallucination-high:{app}:{model}:{w_end}:{k}",
                    rule="hallucination-high",
                    metric="hallucination_rate",
                    app=app,
                    model=model,
                    value=0.3,
                    threshold=0.2,
                    op=">",
                    windows=3,
                    interactions=int(rng.integers(20, 60)),
                    window_start=datetime.fromtimestamp((w_end - 180_000) / 1000, UTC),
                    window_end=datetime.fromtimestamp(w_end / 1000, UTC),
                    fired_at=datetime.fromtimestamp((w_end + 6_000) / 1000, UTC),
                    message=f"hallucination_rate 0.30 > 0.2 over 3 windows ({app}/{model})",
                )
            )
        )
    store.client.insert(f"{store.db}.alerts", alerts, column_names=ALERT_COLUMNS)
    timings["dead_letters_alerts_s"] = time.perf_counter() - t
    timings["total_s"] = time.perf_counter() - t0
    busiest = int(np.argmax([s[2] for s in SERIES]))
    return {
        "interactions": n,
        "days": days,
        "end": end.isoformat(),
        "statement_rows": statement_rows,
        "documents": DOCUMENTS,
        "questions": QUESTIONS,
        "window_rows": window_rows,
        "windows": len(win["keys"]),
        "recomputed_windows": len(recomputed),
        "dead_letters": len(dead),
        "alerts": len(alerts),
        "payload_bytes_mean": payload_bytes / n,
        "judge_calls": int(d["calls"].sum()),
        "busiest_series": list(SERIES[busiest][:2]),
        "build_seconds": timings,
    }


# ---- the measurement -------------------------------------------------------------------------------


def stats(samples: list[float]) -> dict[str, float]:
    return {
        "median_ms": float(np.median(samples)),
        "p95_ms": float(np.percentile(samples, 95)),
        "max_ms": max(samples),
        "min_ms": min(samples),
    }


async def timed(fn: Callable[[], Awaitable[Any]], repeat: int) -> tuple[list[float], Any]:
    """One warm-up call, then ``repeat`` timed calls (ms); returns the samples and the last result."""
    result = await fn()
    samples = []
    for _ in range(repeat):
        t = time.perf_counter()
        result = await fn()
        samples.append((time.perf_counter() - t) * 1000)
    return samples, result


def table_sizes(store: ClickHouseStore) -> list[dict[str, Any]]:
    return store.query_sync(
        "SELECT table, count() AS parts, sum(rows) AS rows, sum(data_compressed_bytes) AS bytes "
        "FROM system.parts WHERE database = {db:String} AND active GROUP BY table ORDER BY table",
        {"db": store.db},
    )


def dimension_bytes(store: ClickHouseStore) -> dict[str, Any]:
    """The dimensions column's size on disk: compressed and uncompressed bytes, and per row."""
    rows = store.query_sync(
        "SELECT sum(data_compressed_bytes) AS compressed, sum(data_uncompressed_bytes) AS raw "
        "FROM system.columns WHERE database = {db:String} AND table = 'evaluations' AND name = 'dimensions'",
        {"db": store.db},
    )
    n = store.query_sync(f"SELECT count() AS n FROM {store.db}.evaluations")[0]["n"]
    compressed, raw = int(rows[0]["compressed"] or 0), int(rows[0]["raw"] or 0)
    return {
        "rows": int(n), "compressed_bytes": compressed, "uncompressed_bytes": raw,
        "compressed_bytes_per_row": compressed / n if n else 0.0,
        "uncompressed_bytes_per_row": raw / n if n else 0.0,
    }  # fmt: skip


def wait_for_merges(store: ClickHouseStore, limit_s: float = 300.0) -> float:
    """Wait until chDB runs no background merge (they would compete with the requests); seconds waited."""
    started = time.perf_counter()
    while time.perf_counter() - started < limit_s:
        rows = store.query_sync(
            "SELECT count() AS n FROM system.merges WHERE database = {db:String}", {"db": store.db}
        )
        if not rows[0]["n"]:
            break
        time.sleep(1.0)
    return time.perf_counter() - started


#: a request's query: a repeated key (a slice's terms) as a list
Params = dict[str, str | list[str]]


def query_pairs(params: Params) -> list[tuple[str, str]]:
    return [(k, v) for k, vs in params.items() for v in ([vs] if isinstance(vs, str) else vs)]


def plain(params: Params) -> dict[str, str]:
    assert all(isinstance(v, str) for v in params.values()), params
    return {k: v for k, v in params.items() if isinstance(v, str)}


def _z(ts: datetime) -> str:
    return ts.astimezone(UTC).isoformat().replace("+00:00", "Z")


async def measure(
    store: ClickHouseStore,
    meta: dict[str, Any],
    repeat: int,
    machine: Machine,
    only: tuple[str, ...] = (),
) -> dict[str, Any]:
    end = datetime.fromisoformat(meta["end"])
    app, model = meta["busiest_series"]
    runner = web.AppRunner(root_app(lambda: store, DashboardSettings()), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    base = f"http://127.0.0.1:{port}/dashboard/api"
    ranges = {"1h": timedelta(hours=1), "7d": timedelta(days=7), "30d": timedelta(days=30)}
    cases: list[tuple[str, str, Params]] = []
    for name, span in ranges.items():
        cases.append((f"overview {name}", "/overview", {"start": _z(end - span), "end": _z(end)}))
    for name, span in ranges.items():
        params = {"start": _z(end - span), "end": _z(end), "model": model}
        cases.append((f"overview {name}, model={model}", "/overview", params))
    cases.append(("options", "/options", {}))
    for dim, size in DIMENSIONS:
        for name in ("7d", "30d"):
            span = ranges[name]
            sliced = {
                "start": _z(end - span),
                "end": _z(end),
                "metric": "hallucination_rate",
                "dimension": dim,
            }
            cases.append((f"breakdown {name} by {dim} ({size} values)", "/slices/breakdown", sliced))
        for name, span in (("7d", timedelta(days=7)), ("15d", timedelta(days=15))):
            changed = {
                "start": _z(end - span), "end": _z(end), "baseline_start": _z(end - 2 * span),
                "baseline_end": _z(end - span), "metric": "hallucination_rate", "dimension": dim,
            }  # fmt: skip
            cases.append((f"what changed {name} vs the {name} before, by {dim}", "/slices/changes", changed))
    one = {"start": _z(end - ranges["30d"]), "end": _z(end), "slice": "prompt_version:prompt_version-1"}
    cases.append(("overview 30d of one slice (prompt_version)", "/slices/overview", one))
    # the last closed window of the busiest series that holds interactions
    last = store.query_sync(
        f"SELECT max(window_start) AS w FROM {store.db}.window_aggregates WHERE app = {{app:String}} "
        "AND model = {model:String} AND count > 0 AND window_end <= {end:DateTime64(3, 'UTC')}",
        {"app": app, "model": model, "end": end - timedelta(minutes=1)},
    )
    minute = last[0]["w"].replace(tzinfo=UTC) if last[0]["w"].tzinfo is None else last[0]["w"]
    bucket = {"app": app, "model": model, "start": _z(minute), "end": _z(minute + timedelta(minutes=1))}
    cases.append((f"bucket (1 minute of {app}/{model})", "/bucket", bucket))
    for name in ("7d", "30d"):
        period: Params = {"start": _z(end - ranges[name]), "end": _z(end)}
        cases.append((f"documents {name}", "/documents", period))
        one_model: Params = {**period, "slice": [f"model:{model}"]}
        cases.append((f"documents {name}, slice model={model}", "/documents", one_model))
        other = next(s[1] for s in SERIES if s[0] == app and s[1] != model)
        sides: Params = {"a": [f"app:{app}", f"model:{model}"], "b": [f"app:{app}", f"model:{other}"]}
        cases.append((f"compare {name}, {app}: {model} vs {other}", "/compare", {**period, **sides}))
    results: list[dict[str, Any]] = []
    queries = DashboardQueries(store)
    try:
        async with ClientSession() as session:
            async with session.get(f"{base}/bucket", params=bucket) as resp:
                some_id = (await resp.json())["interactions"][0]["interaction_id"]
            cases.append(("interaction detail", f"/interactions/{some_id}", {}))
            for label, path, params in cases:
                if only and not label.startswith(only):
                    continue
                sizes: list[int] = []

                async def get(path: str = path, params: Params = params, sizes: list[int] = sizes) -> Any:
                    async with session.get(base + path, params=query_pairs(params)) as resp:
                        body = await resp.read()
                        assert resp.status == 200, (resp.status, body[:300])
                        sizes.append(len(body))
                        return body

                machine.sample()
                samples, body = await timed(get, repeat)
                row: dict[str, Any] = {"request": label, "path": path, "params": params, **stats(samples)}
                row["samples_ms"] = samples
                row["response_bytes"] = sizes[-1]
                if path == "/overview":
                    data = json.loads(body)
                    row["rollup"], row["step_seconds"] = data["rollup"], data["step_seconds"]
                    row["series"] = len(data["series"])
                    row["buckets_per_series"] = max((len(s["t"]) for s in data["series"]), default=0)
                    row["points"] = sum(len(s["t"]) for s in data["series"])
                    row["dead_letter_buckets"], row["alerts"] = len(data["dead_letters"]), len(data["alerts"])
                    row["breakdown"] = await breakdown(store, queries, plain(params), repeat)
                elif path == "/bucket":
                    row["breakdown"] = await bucket_breakdown(store, queries, plain(params), repeat)
                elif path in ("/documents", "/compare"):
                    row["breakdown"] = await insight_breakdown(store, path, params, repeat)
                results.append(row)
                print(
                    f"  {label}: median {row['median_ms']:.0f} ms, max {row['max_ms']:.0f} ms, "
                    f"{row['response_bytes'] / 1024:.0f} KB",
                    flush=True,
                )
    finally:
        await runner.cleanup()
    return {"port": port, "requests": results}


async def insight_breakdown(
    store: ClickHouseStore, path: str, params: Params, repeat: int
) -> dict[str, float]:
    """Medians of the SQL statements of a Documents or Compare request, in process."""
    out: dict[str, float] = {}
    span = {
        "start": datetime.fromisoformat(str(params["start"])),
        "end": datetime.fromisoformat(str(params["end"])),
    }
    statements: dict[str, tuple[str, dict[str, Any]]] = {}
    if path == "/documents":
        q = DocumentsQuery.model_validate(params)
        cond, cond_params = slice_condition(q.slice, "s")
        statements["documents_sql_ms"] = (documents_sql(store.db, cond), {**cond_params, **span})
    else:
        c = CompareQuery.model_validate(params)
        cond_a, params_a = slice_condition(c.a, "a")
        cond_b, params_b = slice_condition(c.b, "b")
        both = {**params_a, **params_b, **span}
        statements["slices_sql_ms"] = (slices_sql(store.db, cond_a, cond_b), both)
        statements["question_counts_sql_ms"] = (question_counts_sql(store.db, cond_a, cond_b), both)
        statements["questions_sql_ms"] = (
            questions_sql(store.db, cond_a, cond_b),
            {**both, "limit": c.questions},
        )
    for name, (sql, sql_params) in statements.items():

        async def run(sql: str = sql, sql_params: dict[str, Any] = sql_params) -> Any:
            return await store.query(sql, sql_params)

        samples, _ = await timed(run, repeat)
        out[name] = float(np.median(samples))
    return out


async def breakdown(
    store: ClickHouseStore, queries: DashboardQueries, params: dict[str, str], repeat: int
) -> dict[str, float]:
    """Where an overview's time goes, without HTTP: its series SQL (with and without FINAL), the whole
    DashboardQueries.overview (every SQL statement and the Python around them), the JSON encoding."""
    query_params: dict[str, Any] = {k: v for k, v in params.items() if k != "model"}
    if "model" in params:
        query_params["models"] = [params["model"]]
    q = OverviewQuery.model_validate(query_params)
    window = await queries.window_seconds()
    _, step = choose_rollup(q.end - q.start, window, q.rollup)
    sql_params = {"start": q.start, "end": q.end, "step": step, "app": q.app or "", "models": q.models}
    sql = overview_sql(store.db)
    out: dict[str, float] = {}
    samples, _ = await timed(lambda: store.query(sql, sql_params), repeat)
    out["series_sql_ms"] = float(np.median(samples))
    no_final = sql.replace(" FINAL\n", "\n")
    assert no_final != sql
    samples, _ = await timed(lambda: store.query(no_final, sql_params), repeat)
    out["series_sql_without_final_ms"] = float(np.median(samples))
    samples, _ = await timed(queries.window_seconds, repeat)
    out["window_seconds_sql_ms"] = float(np.median(samples))
    samples, overview = await timed(lambda: queries.overview(q), repeat)
    out["queries_overview_ms"] = float(np.median(samples))

    async def encode() -> str:
        return overview.model_dump_json()

    samples, _ = await timed(encode, repeat)
    out["json_encode_ms"] = float(np.median(samples))
    return out


async def bucket_breakdown(
    store: ClickHouseStore, queries: DashboardQueries, params: dict[str, str], repeat: int
) -> dict[str, float]:
    q = BucketQuery.model_validate(params)
    samples, _ = await timed(lambda: queries.bucket(q), repeat)
    count_sql = (
        f"SELECT count() AS n FROM {store.db}.evaluations FINAL WHERE app = {{app:String}} "
        "AND model = {model:String} AND timestamp >= {start:DateTime64(3, 'UTC')} "
        "AND timestamp < {end:DateTime64(3, 'UTC')}"
    )
    p = {"app": q.app, "model": q.model, "start": q.start, "end": q.end}
    count_samples, _ = await timed(lambda: store.query(count_sql, p), repeat)
    plain_samples, _ = await timed(lambda: store.query(count_sql.replace(" FINAL ", " "), p), repeat)
    return {
        "queries_bucket_ms": float(np.median(samples)),
        "count_sql_ms": float(np.median(count_samples)),
        "count_sql_without_final_ms": float(np.median(plain_samples)),
    }


def markdown(report: dict[str, Any]) -> str:
    lines = [
        "| request | rollup (step) | series x buckets | response | median | p95 | max | < 1 s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in report["requests"]:
        shape = f"{r['series']} x {r['buckets_per_series']}" if "rollup" in r else "-"
        rollup = f"{r['rollup']} ({r['step_seconds']} s)" if "rollup" in r else "-"
        lines.append(
            f"| {r['request']} | {rollup} | {shape} | {r['response_bytes'] / 1024:.1f} KB | "
            f"{r['median_ms']:.0f} ms | {r['p95_ms']:.0f} ms | {r['max_ms']:.0f} ms | "
            f"{'yes' if r['max_ms'] < 1000 else 'no'} |"
        )
    lines += [
        "",
        "| overview | series SQL | same without FINAL | window-size SQL | DashboardQueries.overview "
        "| JSON encode | HTTP median |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in report["requests"]:
        b = r.get("breakdown")
        if not b or "series_sql_ms" not in b:
            continue
        lines.append(
            f"| {r['request']} | {b['series_sql_ms']:.0f} ms | {b['series_sql_without_final_ms']:.0f} ms | "
            f"{b['window_seconds_sql_ms']:.0f} ms | {b['queries_overview_ms']:.0f} ms | "
            f"{b['json_encode_ms']:.1f} ms | {r['median_ms']:.0f} ms |"
        )
    lines += [
        "",
        "| Documents / Compare request | its SQL statements (medians, in process) | HTTP median |",
        "|---|---|---|",
    ]
    for r in report["requests"]:
        if r["path"] in ("/documents", "/compare"):
            parts = ", ".join(f"{k.removesuffix('_ms')} {v:.0f} ms" for k, v in r["breakdown"].items())
            lines.append(f"| {r['request']} | {parts} | {r['median_ms']:.0f} ms |")
    for r in report["requests"]:
        b = r.get("breakdown")
        if b and "queries_bucket_ms" in b:
            lines.append(
                f"\nbucket drill-down: DashboardQueries.bucket {b['queries_bucket_ms']:.0f} ms; its "
                f"count() over evaluations FINAL {b['count_sql_ms']:.0f} ms "
                f"(without FINAL {b['count_sql_without_final_ms']:.0f} ms)"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--interactions", type=int, default=1_000_000)
    ap.add_argument("--days", type=int, default=30)
    ap.add_argument("--repeat", type=int, default=10, help="timed requests per case (after one warm-up)")
    ap.add_argument(
        "--workdir", type=Path, help="where the chDB path goes (default build/bench/dashboard_latency)"
    )
    ap.add_argument(
        "--reuse", action="store_true", help="measure the data set a previous run built in --workdir"
    )
    ap.add_argument("--json", type=Path, help="write the figures here")
    ap.add_argument(
        "--only", default="", help="measure only the requests whose name starts with one of these (a,b)"
    )
    args = ap.parse_args(argv)
    machine = Machine.start()
    print(machine.describe_start(), flush=True)
    workdir = (args.workdir or REPO / "build" / "bench" / "dashboard_latency").resolve()
    path = workdir / "chdb"
    meta_file = workdir / "dataset.json"
    if args.reuse:
        if not meta_file.exists():
            ap.error(f"--reuse: no finished build in {workdir}")
        meta = json.loads(meta_file.read_text())
        store = ClickHouseStore.open_sync(ClickHouseSettings(url=f"chdb://{path}"))
        print(f"reusing {meta['interactions']} interactions built {meta['end']} in {workdir}")
    else:
        if path.exists():
            ap.error(f"{path} exists: pass --reuse to measure it, or another --workdir")
        workdir.mkdir(parents=True, exist_ok=True)
        store = ClickHouseStore.open_sync(ClickHouseSettings(url=f"chdb://{path}"))
        end = datetime.now(UTC).replace(second=0, microsecond=0)
        print(
            f"building {args.interactions} interactions over {args.days} days ending {end:%Y-%m-%d %H:%M} UTC"
        )
        meta = build(store, args.interactions, args.days, end)
        meta_file.write_text(json.dumps(meta, indent=2))
        b = meta["build_seconds"]
        print(
            f"built in {b['total_s']:.0f} s: simulation + windows {b['simulate_and_windows_s']:.1f} s, "
            f"evaluation rows {b['evaluation_rows_s']:.0f} s, "
            f"their inserts {b['evaluation_insert_s']:.0f} s, "
            f"window inserts {b['windows_insert_s']:.1f} s; RSS {rss_mb(os.getpid()):.0f} MB"
        )
    waited = wait_for_merges(store)
    print(f"background merges: none running after {waited:.0f} s")
    counts = store.counts_sync()
    parts = table_sizes(store)
    print("rows (FINAL): " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    print(
        "active parts: "
        + ", ".join(f"{p['table']} {p['parts']} ({int(p['bytes']) / 2**20:.0f} MB)" for p in parts)
    )
    dims = dimension_bytes(store)
    print(
        f"dimensions column: {dims['compressed_bytes_per_row']:.2f} bytes per row compressed "
        f"({dims['uncompressed_bytes_per_row']:.1f} uncompressed), {dims['compressed_bytes'] / 2**20:.1f} MB"
    )
    only = tuple(p.strip() for p in args.only.split(",") if p.strip())
    report = asyncio.run(measure(store, meta, args.repeat, machine, only))
    report["dimensions"] = dims
    machine.finish()
    report.update({"dataset": meta, "counts": counts, "parts": parts, "repeat": args.repeat})
    report["merges_waited_s"] = waited
    report["machine"] = machine.as_dict()
    print()
    print(
        f"{meta['interactions']} interactions over {meta['days']} days, {meta['window_rows']} window rows "
        f"({meta['windows']} windows + {meta['recomputed_windows']} recomputed), {meta['dead_letters']} dead "
        f"letters, {meta['alerts']} alerts; {args.repeat} requests per row after one warm-up"
    )
    print(markdown(report))
    print()
    print(machine.describe())
    write_json(args.json, report)
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
