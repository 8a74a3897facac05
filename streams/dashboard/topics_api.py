"""The Topics page's endpoint (docs/topics.md):

    GET /api/topics    each topic of a range with its share and rates against a baseline period (by
                       default as long as the range, ending at its start), a sparkline and its worst
                       interactions (start, end, app, model*, slice*, examples, baseline_start,
                       baseline_end)

The figures are the ``topic`` dimension's slices (``SliceReader.totals``, as the Breakdown computes them),
so a topic's rate here is its rate in the Breakdown by topic; ``pipeline.topic_trends`` says what rose.
"""

from __future__ import annotations

import math

from aiohttp import web

from pipeline.dimensions import NONE, TOPIC
from pipeline.topic_trends import Totals, sparklines, topic_rows
from schemas.metrics import named
from schemas.topics_page import SPARK_POINTS, TOPIC_METRICS, TopicsPage, TopicsQuery
from streams.clickhouse.labels import LabelStore
from streams.clickhouse.slices import SliceReader
from streams.clickhouse.topic_rows import TopicReader
from streams.dashboard.http import SETTINGS_KEY, json_response, parse_query, queries_of
from streams.judge_quality import pooled_agreements


def spark_step(span_seconds: float, window_seconds: int | None) -> int:
    """A sparkline bucket: whole windows, at most SPARK_POINTS of them over the range."""
    window = max(1, window_seconds or 60)
    return window * max(1, math.ceil(span_seconds / SPARK_POINTS / window))


async def topics(request: web.Request) -> web.Response:
    q = parse_query(request, TopicsQuery, lists=("models",), repeated=("slice",))
    queries = queries_of(request)
    slices, reader = SliceReader(queries.store), TopicReader(queries.store)
    before_start, before_end = q.baseline()
    now_totals: Totals = {m: await slices.totals(named(m), TOPIC, q, q.start, q.end) for m in TOPIC_METRICS}
    before_totals: Totals = {
        m: await slices.totals(named(m), TOPIC, q, before_start, before_end) for m in TOPIC_METRICS
    }
    step = spark_step((q.end - q.start).total_seconds(), await queries.window_seconds())
    first = int(q.start.timestamp()) // step * step
    t = list(range(first, int(q.end.timestamp()), step))
    spark_rows = await reader.spark_rows(q, step)
    models: dict[str, set[str]] = {}  # per topic, the model versions that assigned it in the range
    for row in spark_rows:
        models.setdefault(str(row["value"]), set()).update(row["models"])
    volume = {s.value: s.interactions for s in now_totals[TOPIC_METRICS[0]]}
    settings = request.app[SETTINGS_KEY]
    model = q.models[0] if len(q.models) == 1 else None
    agreements = await pooled_agreements(LabelStore(queries.store), settings, q.start, q.end, q.app, model)
    page = TopicsPage(
        start=q.start, end=q.end, before_start=before_start, before_end=before_end, slice=q.slice,
        step_seconds=step, t=t,
        interactions=sum(volume.values()), without_topic=volume.get(NONE, 0),
        topics=topic_rows(
            now_totals, before_totals, sparklines(spark_rows, t), models, await reader.examples(q), len(t),
            agreements, settings.labels.min_per_class,
        ),
    )  # fmt: skip
    return json_response(page)


def add_routes(app: web.Application) -> None:
    app.router.add_get("/api/topics", topics)
