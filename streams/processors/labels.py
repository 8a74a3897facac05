"""labels -> ClickHouse ``labels``: people's labels sent to ``<prefix>labels`` (``schemas.label.Label``
JSON, keyed by interaction_id).

A message that does not validate is dead-lettered like any other (stage ``labels``). A label is acked
once its row is written; a ClickHouse outage holds it unacked and retries with backoff. The table keeps
the latest label per interaction, kind and reviewer, so a redelivery replaces its own row.

The processor also keeps the Prometheus gauges of the judge's agreement (``streams.agreement_gauges``)
on the worker's registry, read again when due on the resources' clock (a timer looks every few seconds).
"""

from __future__ import annotations

import functools
from typing import Any

from pipeline.retry import retry
from schemas.label import Label
from schemas.topics import TOPIC_MESSAGES
from streams.agreement_gauges import AgreementGauges
from streams.clickhouse.labels import LabelStore
from streams.processors.base import Processor

#: seconds between the timer's looks at whether the gauges are due
GAUGE_POLL_SECONDS = 5.0


class LabelsProcessor(Processor[Label]):
    name = "groundwatch.labels"
    stage = "labels"
    input_model = TOPIC_MESSAGES.labels

    @property
    def source_topic(self) -> str:
        return self.ctx.names.labels

    async def process(self, message: Label) -> None:
        store = LabelStore(self.resources.store_open)
        label = self.resources.privacy.label_for_storage(message)  # privacy.mode all: the note masked
        # backoff waited on the worker's clock (a test's ManualClock advances instead of sleeping)
        await retry(
            functools.partial(store.insert, [label]), what="labels: insert", sleep=self.resources.clock.sleep
        )

    def register(self) -> Any:
        self.gauges = AgreementGauges(self.ctx.settings, self.resources.clock)
        self.ctx.metrics.registry.register(self.gauges)
        self.ctx.app.timer(GAUGE_POLL_SECONDS, name="groundwatch.labels.gauges")(self.refresh_gauges)
        return super().register()

    async def refresh_gauges(self) -> None:
        if self.resources.ready:
            await self.gauges.refresh(LabelStore(self.resources.store_open))
