"""What the Topics page reads beyond the slices' sums (``SliceReader.totals`` by the ``topic`` dimension):
each topic's sparkline rates per bucket with the topic model versions that assigned it, and its worst
interactions (``pipeline.topic_trends`` turns both into the page)."""

from __future__ import annotations

from typing import Any

from pipeline.dimensions import TOPIC, TOPIC_MODEL
from schemas.metrics import named
from schemas.topics_page import SPARK_METRICS, TopicExample, TopicsQuery
from schemas.utc import utc
from streams.clickhouse.slices import dimension_sql, metric_sql, sliced, where
from streams.clickhouse.store import ClickHouseStore

#: worst first: an answer hallucinated, stated without evidence or refused, then the least entailed
WORST_FIRST = (
    "greatest(ifNull(hallucination, 0), ifNull(no_evidence, 0), ifNull(answer_refusal, 0)) DESC, "
    "ifNull(context_entailment, 2) ASC, timestamp DESC, interaction_id"
)


def spark_sql(db: str, condition: str) -> str:
    """Per (bucket, topic): each of SPARK_METRICS' numerator and denominator, and the topic model versions
    (the ``topic_model`` dimension) that assigned its interactions."""
    parts = []
    for name in SPARK_METRICS:
        num, den = metric_sql(named(name))
        parts += [f"{num} AS `{name}__num`", f"{den} AS `{name}__den`"]
    return (
        "SELECT toUnixTimestamp(toStartOfInterval(timestamp, toIntervalSecond({step:UInt32}))) AS t, "
        f"{dimension_sql('dim')} AS value, {', '.join(parts)}, "
        f"groupUniqArrayIf(dimensions['{TOPIC_MODEL}'], mapContains(dimensions, '{TOPIC_MODEL}')) AS models "
        f"FROM {db}.evaluations FINAL WHERE {where(condition)} GROUP BY t, value"
    )


def examples_sql(db: str, condition: str) -> str:
    """Each topic's worst ``{examples}`` interactions (``WORST_FIRST``) with their stored question, one
    interaction a question (traffic repeats its questions: the worst of each)."""
    worst = (
        f"SELECT {dimension_sql('dim')} AS value, interaction_id, app, model, timestamp, "
        "JSONExtractString(payload, 'interaction', 'question') AS question, hallucination, answer_refusal, "
        f"no_evidence, context_entailment FROM {db}.evaluations FINAL WHERE {where(condition)} "
        f"AND mapContains(dimensions, {{dim:String}}) ORDER BY {WORST_FIRST} LIMIT 1 BY value, question"
    )
    return (
        "SELECT value, interaction_id, app, model, timestamp, question, hallucination, answer_refusal, "
        f"no_evidence FROM ({worst}) ORDER BY {WORST_FIRST} LIMIT {{examples:UInt32}} BY value"
    )


class TopicReader:
    def __init__(self, store: ClickHouseStore) -> None:
        self.store = store
        self.db = store.db

    def _params(self, q: TopicsQuery) -> tuple[str, dict[str, Any]]:
        condition, values = sliced(q)
        return condition, {**values, "start": q.start, "end": q.end, "dim": TOPIC}

    async def spark_rows(self, q: TopicsQuery, step: int) -> list[dict[str, Any]]:
        condition, params = self._params(q)
        return await self.store.query(spark_sql(self.db, condition), {**params, "step": step})

    async def examples(self, q: TopicsQuery) -> dict[str, list[TopicExample]]:
        if q.examples == 0:
            return {}
        condition, params = self._params(q)
        rows = await self.store.query(examples_sql(self.db, condition), {**params, "examples": q.examples})
        out: dict[str, list[TopicExample]] = {}
        for r in rows:
            out.setdefault(str(r["value"]), []).append(
                TopicExample.model_validate(
                    {**{k: v for k, v in r.items() if k != "value"}, "timestamp": utc(r["timestamp"])}
                )
            )
        return out
