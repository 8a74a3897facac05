"""Evaluations, windows and alerts as ClickHouse rows (column lists beside the values)."""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any

from schemas.alert import Alert
from schemas.evaluation import Evaluation
from schemas.evaluation_row import call_latencies, custom_columns
from schemas.interaction import Passage
from schemas.results import StatementVerdict
from schemas.utc import utc
from schemas.window import WindowAggregate

EVALUATION_COLUMNS = [
    "interaction_id",
    "timestamp",
    "evaluated_at",
    "app",
    "model",
    "conversation_id",
    "judge",
    "judge_model",
    "prompt_version",
    "context_entailment",
    "ground_truth_entails_answer",
    "answer_entails_ground_truth",
    "answer_refusal",
    "ground_truth_refusal",
    "grounded_precision",
    "hallucination",
    "relevance",
    "unsupported_claims",
    "judge_calls",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "judge_latency_ms",
    "call_latencies_ms",
    "complete",
    "missing",
    "judged",
    "skip_reason",
    "version",
    "payload",
    "history_turns",
    "history_truncated",
    "dimensions",
    "context_documents",
    "question_hash",
    "tool_calls",
    "tool_error",
    "no_evidence",
    "ungrounded_arguments",
    "citation_recall",
    "citation_precision",
    "uncited_statements",
    "miscited",
    "dangling_citations",
    "dangling_citation",
    "answerable",
    "answerable_source",
    "over_refusal",
    "answered_unanswerable",
    "refused_unanswerable",
    "answered_answerable",
    "justified_refusal",
    "justified_answer",
    "custom_scores",
    "custom_missing",
    "custom_versions",
]

STATEMENT_COLUMNS = [
    "interaction_id",
    "timestamp",
    "evaluated_at",
    "app",
    "model",
    "pair",
    "hypothesis_index",
    "statement_index",
    "hypothesis",
    "statement",
    "verdict",
    "score",
    "tag",
    "reason",
    "version",
    "passage",
    "document",
    "cited_passages",
    "cited_precise",
    "citation_supported",
    "dangling_citations",
    "cited_documents",
    "supported_by",
]

WINDOW_COLUMNS = [*WindowAggregate.model_fields, "computed_at", "version"]
ALERT_COLUMNS = list(Alert.model_fields)


def _flag(value: bool | None) -> int | None:
    return None if value is None else int(value)


def evidence_passages(e: Evaluation) -> list[Passage]:
    """What a statement's passage indexes: the interaction's contexts, then the tool-result passages
    (``Evaluation.evidence``); [] when the evaluation does not carry its interaction."""
    if e.interaction is None:
        return []
    return [*e.interaction.contexts, *e.evidence]


def context_documents(e: Evaluation) -> list[str]:
    """The distinct document names of the evidence's non-blank passages (contexts, then tool-result
    passages, named as pipeline.evidence says), in order ('' for a passage without a name); [] when the
    evaluation does not carry its interaction."""
    names = (p.document or "" for p in evidence_passages(e) if p.text.strip())
    return list(dict.fromkeys(names))


def question_hash(e: Evaluation) -> int:
    """A 64-bit hash of the question, case and spacing folded, so one question asked in two slices matches;
    0 when the evaluation does not carry its interaction."""
    if e.interaction is None:
        return 0
    folded = " ".join(e.interaction.question.casefold().split())
    return int.from_bytes(hashlib.sha256(folded.encode()).digest()[:8], "big") or 1


def statement_document(e: Evaluation, passage: int | None) -> str | None:
    """The document name of the evidence passage a statement was judged against ('' when it has none);
    None without a passage (or an interaction to look it up in)."""
    passages = evidence_passages(e)
    if passage is None or not 0 <= passage < len(passages):
        return None
    return passages[passage].document or ""


def evaluation_version(e: Evaluation) -> int:
    """A complete judged evaluation always wins over an incomplete or an unjudged one (a replay skipped by
    a spent budget never hides an earlier verdict); among equals the latest wins."""
    ms = int(utc(e.evaluated_at).timestamp() * 1000)
    return (int(e.complete and e.judged) << 50) | ms


def evaluation_row(e: Evaluation, dimensions: dict[str, str] | None = None) -> list[Any]:
    """One evaluations row; ``dimensions`` as the cardinality guard let them through
    (streams/clickhouse/dimensions.py)."""
    return [
        e.interaction_id,
        utc(e.timestamp),
        utc(e.evaluated_at),
        e.app,
        e.model,
        e.conversation_id,
        e.judge,
        e.judge_model,
        e.prompt_version,
        e.context_entailment,
        e.ground_truth_entails_answer,
        e.answer_entails_ground_truth,
        _flag(e.answer_refusal),
        _flag(e.ground_truth_refusal),
        e.grounded_precision,
        _flag(e.hallucination),
        e.relevance,
        list(e.unsupported_claims),
        e.judge_calls,
        e.input_tokens,
        e.output_tokens,
        e.cost_usd,
        e.judge_latency_ms,
        call_latencies(e),
        int(e.complete),
        list(e.missing),
        int(e.judged),
        e.skip_reason,
        evaluation_version(e),
        e.model_dump_json(),
        len(e.interaction.history) if e.interaction is not None else 0,
        int(e.interaction is not None and e.interaction.history_truncated),
        dict(dimensions or {}),
        context_documents(e),
        question_hash(e),
        e.tool_calls,
        _flag(e.tool_error),
        _flag(e.no_evidence),
        _flag(e.ungrounded_arguments),
        e.citation_recall,
        e.citation_precision,
        e.uncited_statements,
        _flag(e.miscited),
        e.dangling_citations,
        _flag(e.dangling_citation),
        _flag(e.answerable),
        e.answerable_source,
        _flag(e.over_refusal),
        _flag(e.answered_unanswerable),
        _flag(e.refused_unanswerable),
        _flag(e.answered_answerable),
        _flag(e.justified_refusal),
        _flag(e.justified_answer),
        *custom_columns(e),
        {name: c.version for name, c in e.custom.items()},
    ]


def _statement_citations(e: Evaluation, st: StatementVerdict) -> list[Any]:
    """The citation columns of a statement row (migration 015): cited passages, per cited passage whether
    it supports the statement, whether they support it, dangling references, the cited documents, the
    supporting passages."""
    c = st.citations
    cited = c.cited if c is not None else []
    documents = [statement_document(e, p) or "" for p in cited]
    return [
        list(cited),
        [int(p) for p in c.precise] if c is not None else [],
        _flag(c.supported) if c is not None else None,
        list(c.dangling) if c is not None else [],
        documents,
        list(st.supported_by or []),
    ]


def statement_rows(e: Evaluation) -> list[list[Any]]:
    rows = []
    version = evaluation_version(e)
    for pair in e.pairs:
        for hi, hyp in enumerate(pair.hypotheses):
            for si, st in enumerate(hyp.statements):
                rows.append(
                    [
                        e.interaction_id,
                        utc(e.timestamp),
                        utc(e.evaluated_at),
                        e.app,
                        e.model,
                        pair.pair,
                        hi,
                        si,
                        hyp.hypothesis,
                        st.statement,
                        st.verdict,
                        st.score,
                        st.tag,
                        st.reason,
                        version,
                        st.passage,
                        statement_document(e, st.passage),
                        *_statement_citations(e, st),
                    ]
                )
    return rows


def window_row(w: WindowAggregate, computed_at: datetime) -> list[Any]:
    values = w.model_dump()
    values["window_start"] = utc(w.window_start)
    values["window_end"] = utc(w.window_end)
    computed = utc(computed_at)
    return [values[c] for c in WindowAggregate.model_fields] + [
        computed,
        int(computed.timestamp() * 1_000_000),
    ]


def alert_row(a: Alert) -> list[Any]:
    values = a.model_dump()
    for key in ("window_start", "window_end", "fired_at", "starts_at", "ends_at"):
        if values[key] is not None:
            values[key] = utc(values[key])
    values["incident_id"] = a.incident
    return [values[c] for c in ALERT_COLUMNS]
