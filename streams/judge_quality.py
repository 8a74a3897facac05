"""The judge's quality over a period, read from ClickHouse: what ``groundwatch agreement``, the
dashboard's Judge quality page and the overview's corrected lines all show.

Labels joined with the judge's verdicts (``streams.clickhouse.labels``) go through the pure
``pipeline.judge_quality``; each app/model's blocks then get their rate corrected with the flags and
denominators its windows pooled over the same period.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from pipeline.judge_quality import CorrectThreshold, QualityBlock, judge_quality, with_corrected
from schemas.settings import Settings
from streams.clickhouse.labels import LabelStore


class QualityReport(BaseModel):
    start: datetime
    end: datetime
    min_per_class: int = Field(description="labels of each class needed before a rate is corrected")
    include_end_user: bool
    judges: list[QualityBlock] = Field(description="per app, model, judge identity and label kind")
    apps: list[QualityBlock] = Field(
        description="per app, model and label kind over every judge identity, with the corrected rate"
    )


def correct_threshold(settings: Settings) -> CorrectThreshold:
    """The judge's "correct" threshold per judge kind, as the pipeline applies it."""

    def threshold(judge: str) -> float:
        return settings.pipeline.threshold_for("answer_entails_ground_truth", judge)

    return threshold


async def read_quality(
    labels: LabelStore,
    settings: Settings,
    start: datetime,
    end: datetime,
    app: str | None = None,
    model: str | None = None,
) -> QualityReport:
    ls = settings.labels
    rows = await labels.labeled_rows(start, end, app, model)
    judges, pooled = (
        judge_quality(
            rows,
            correct_threshold(settings),
            per_identity=per_identity,
            include_end_user=ls.include_end_user,
            resamples=ls.bootstrap_resamples,
        )
        for per_identity in (True, False)
    )
    counts = {(c.app, c.model): c for c in await labels.flag_counts(start, end, app, model)}
    apps = []
    for block in pooled:
        c = counts.get((block.app, block.model))
        if block.rate_metric is not None and c is not None:
            block = with_corrected(
                block,
                c.flagged[block.rate_metric],
                c.total[block.rate_metric],
                min_per_class=ls.min_per_class,
            )
        apps.append(block)
    return QualityReport(
        start=start,
        end=end,
        min_per_class=ls.min_per_class,
        include_end_user=ls.include_end_user,
        judges=judges,
        apps=apps,
    )
