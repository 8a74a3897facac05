"""The judge's quality over a period, read from ClickHouse: what ``groundwatch agreement``, the
dashboard's Judge quality page and the overview's corrected lines all show.

Labels joined with the judge's verdicts (``streams.clickhouse.labels``) go through the pure
``pipeline.judge_quality``; each app/model's blocks then get their rate corrected with the flags and
denominators its windows pooled over the same period.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from pipeline.judge_quality import (
    CorrectThreshold,
    QualityBlock,
    Verdicts,
    corrected_buckets,
    judge_quality,
    with_corrected,
)
from pipeline.metrics.agreement import Agreement
from schemas.dashboard import CorrectedLine, Overview, Series
from schemas.label import KIND_OF_RATE, LabeledRow
from schemas.settings import Settings
from streams.clickhouse.labels import LabelStore

#: the overview's rates drawn with a corrected line beside them (api/overview, ``Series.corrected``)
CORRECTED_RATES = ("hallucination_rate",)
#: the app and model the labeled rows of every app and model are pooled under (``pooled_agreements``)
POOLED = "*"


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
    """The judge's "correct" threshold for an interaction's judge, app and model, as the pipeline applies
    it (``pipeline.app_thresholds`` over the judge's own)."""

    def threshold(v: Verdicts) -> float:
        return settings.pipeline.threshold_for("answer_entails_ground_truth", v.judge, v.app, v.model)

    return threshold


def _blocks(rows: list[LabeledRow], settings: Settings, *, per_identity: bool) -> list[QualityBlock]:
    return judge_quality(
        rows,
        correct_threshold(settings),
        per_identity=per_identity,
        include_end_user=settings.labels.include_end_user,
        resamples=settings.labels.bootstrap_resamples,
    )


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
    judges, pooled = (_blocks(rows, settings, per_identity=per_identity) for per_identity in (True, False))
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


async def pooled_agreements(
    labels: LabelStore, settings: Settings, start: datetime, end: datetime, app: str | None, model: str | None
) -> dict[str, Agreement]:
    """Per catalogue rate a label kind corrects: the judge's agreement with people's labels over the
    period's labeled interactions (of ``app`` and ``model`` when given), every app and model pooled, as
    a slice's rate is corrected (the Topics page: the judge's errors taken as the same in every slice)."""
    rows = [
        r.model_copy(update={"app": POOLED, "model": POOLED})
        for r in await labels.labeled_rows(start, end, app, model)
    ]
    return {
        b.rate_metric: b.agreement
        for b in _blocks(rows, settings, per_identity=False)
        if b.rate_metric is not None and b.agreement is not None
    }


def _line(block: QualityBlock | None, metric: str, series: Series, min_per_class: int) -> CorrectedLine:
    kind = KIND_OF_RATE[metric]
    rates, supports = series.values[metric], series.support[metric]
    # a bucket's flags: its rate times its denominator (both pooled from whole windows, so exact)
    flagged = [round(r * n) if r is not None else 0 for r, n in zip(rates, supports, strict=True)]
    overall, buckets = corrected_buckets(block, kind, flagged, supports, min_per_class=min_per_class)
    agreement = block.agreement if block is not None else None

    def column(pick: str) -> list[float | None]:
        return [getattr(b, pick) if b.total else None for b in buckets]

    def figure(name: str) -> float | None:
        return getattr(agreement, name).value if agreement is not None else None

    return CorrectedLine(
        kind=kind.value,
        status=overall.status.value,
        note=overall.note,
        labels_needed=overall.labels_needed,
        cases=agreement.cases if agreement is not None else 0,
        sensitivity=figure("sensitivity"),
        specificity=figure("specificity"),
        balanced_accuracy=figure("balanced_accuracy"),
        flagged_rate=overall.flagged_rate,
        corrected=overall.corrected,
        low=overall.low,
        high=overall.high,
        value=column("corrected"),
        lower=column("low"),
        upper=column("high"),
    )


async def corrected_lines(
    overview: Overview, labels: LabelStore, settings: Settings, app: str | None, models: list[str]
) -> Overview:
    """The overview with each series' ``CORRECTED_RATES`` corrected per bucket, with the sensitivity and
    specificity its labels over the overview's whole range give the judge (every judge identity of the
    range pooled, as ``read_quality``'s per-app blocks)."""
    if not overview.series:
        return overview
    rows = await labels.labeled_rows(
        overview.start, overview.end, app, models[0] if len(models) == 1 else None
    )
    blocks = {(b.app, b.model, b.kind): b for b in _blocks(rows, settings, per_identity=False)}
    series = [
        s.model_copy(
            update={
                "corrected": {
                    metric: _line(
                        blocks.get((s.app, s.model, KIND_OF_RATE[metric])),
                        metric,
                        s,
                        settings.labels.min_per_class,
                    )
                    for metric in CORRECTED_RATES
                }
            }
        )
        for s in overview.series
    ]
    return overview.model_copy(update={"series": series})
