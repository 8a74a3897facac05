"""Prometheus gauges of the judge's agreement with people's labels, per app, model and judge identity,
and each app/model's corrected rate: what the Judge quality page shows, for a scrape.

The figures are read from ClickHouse (``streams.judge_quality.read_quality``, over the last
``labels.gauge_period_days``) at most every ``labels.gauge_refresh_seconds`` on the injected clock, and
served from the last read at scrape time (a scrape never queries ClickHouse). Before the first read, and
for a figure that is undefined (a class without labels), no sample is given.

    groundwatch_judge_balanced_accuracy{app,model,judge,judge_model,prompt_version,kind}
    groundwatch_judge_sensitivity / _specificity / _kappa   (same labels)
    groundwatch_judge_labeled_cases                         (same labels; labeled interactions counted)
    groundwatch_judge_corrected_rate{app,model,kind}        (and _low, _high: its 95 % interval)
    groundwatch_judge_agreement_refreshed_seconds           (Unix time of the last read)
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import timedelta

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from pipeline.clock import Clock
from schemas.settings import Settings
from streams.clickhouse.labels import LabelStore
from streams.judge_quality import QualityReport, read_quality

log = logging.getLogger(__name__)

IDENTITY = ["app", "model", "judge", "judge_model", "prompt_version", "kind"]
AGREEMENT = {
    "balanced_accuracy": "the judge's balanced accuracy on people's labels",
    "sensitivity": "the judge's sensitivity on people's labels (flags among the condition's cases)",
    "specificity": "the judge's specificity on people's labels (no flag among the other cases)",
    "kappa": "Cohen's kappa of the judge against people's labels",
}


class AgreementGauges(Collector):
    """The gauges above; ``refresh`` reads them when due."""

    def __init__(self, settings: Settings, clock: Clock) -> None:
        self.settings = settings
        self.clock = clock
        self.report: QualityReport | None = None
        self._due: float | None = None  # monotonic time of the next read
        self._read_at = 0.0

    async def refresh(self, labels: LabelStore) -> bool:
        """Read the figures when ``labels.gauge_refresh_seconds`` have passed since the last read (or
        none was made); True when read. A failed read is logged and tried again at the next due time."""
        now = self.clock.monotonic()
        if self._due is not None and now < self._due:
            return False
        ls = self.settings.labels
        self._due = now + ls.gauge_refresh_seconds
        end = self.clock.now()
        try:
            self.report = await read_quality(
                labels, self.settings, end - timedelta(days=ls.gauge_period_days), end
            )
        except Exception:
            log.exception("judge agreement gauges: reading the labels failed; keeping the last figures")
            return False
        self._read_at = end.timestamp()
        return True

    def collect(self) -> Iterator[GaugeMetricFamily]:
        report = self.report
        families = {
            name: GaugeMetricFamily(f"groundwatch_judge_{name}", text, labels=IDENTITY)
            for name, text in AGREEMENT.items()
        }
        cases = GaugeMetricFamily(
            "groundwatch_judge_labeled_cases",
            "labeled interactions the agreement is measured on",
            labels=IDENTITY,
        )
        corrected = {
            suffix: GaugeMetricFamily(
                f"groundwatch_judge_corrected_rate{suffix}",
                f"the flag rate corrected for the judge's measured errors{text}",
                labels=["app", "model", "kind"],
            )
            for suffix, text in (("", ""), ("_low", ": 95 % lower bound"), ("_high", ": 95 % upper bound"))
        }
        refreshed = GaugeMetricFamily(
            "groundwatch_judge_agreement_refreshed_seconds",
            "when the agreement gauges were last read (Unix s)",
        )
        if report is not None:
            refreshed.add_metric([], self._read_at)
            for block in report.judges:
                labels = [
                    block.app,
                    block.model,
                    block.judge,
                    block.judge_model,
                    block.prompt_version,
                    str(block.kind),
                ]
                agreement = block.agreement
                cases.add_metric(labels, float(agreement.cases if agreement is not None else 0))
                if agreement is None:
                    continue
                for name, family in families.items():
                    value = getattr(agreement, name).value
                    if value is not None:
                        family.add_metric(labels, value)
            for block in report.apps:
                c = block.corrected
                if c is None or c.corrected is None:
                    continue
                key = [block.app, block.model, str(block.kind)]
                for suffix, value in (("", c.corrected), ("_low", c.low), ("_high", c.high)):
                    if value is not None:
                        corrected[suffix].add_metric(key, value)
        yield from families.values()
        yield cases
        yield from corrected.values()
        yield refreshed
