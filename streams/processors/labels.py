"""labels -> ClickHouse ``labels``: people's labels sent to ``<prefix>labels`` (``schemas.label.Label``
JSON, keyed by interaction_id).

A message that does not validate is dead-lettered like any other (stage ``labels``). A label is acked
once its row is written; a ClickHouse outage holds it unacked and retries with backoff. The table keeps
the latest label per interaction, kind and reviewer, so a redelivery replaces its own row.
"""

from __future__ import annotations

import functools

from pipeline.retry import retry
from schemas.label import Label
from streams.clickhouse.labels import LabelStore
from streams.processors.base import Processor


class LabelsProcessor(Processor[Label]):
    name = "groundwatch.labels"
    stage = "labels"
    input_model = Label

    @property
    def source_topic(self) -> str:
        return self.ctx.names.labels

    async def process(self, message: Label) -> None:
        store = LabelStore(self.resources.store_open)
        await retry(functools.partial(store.insert, [message]), what="labels: insert")
