"""touches -> the window and conversation closers of the partition's owner (``schemas.touch``,
``streams.ownership``).

Every worker reads the partitions of ``touches`` the group assigned it, so each series' windows and each
conversation are marked in one worker's closers: the one that closes them and evaluates their alert
rules. A touch is acked once marked: what a touch marks is in ClickHouse already (the sink sends it
after writing its rows), so a worker that dies before closing loses nothing, the next owner finds those
windows and conversations there (``Resources.reconcile_owned``). A touch read from a partition this
worker no longer owns (read before a rebalance took it) is dropped: its new owner reads it too, or finds
its work in ClickHouse.
"""

from __future__ import annotations

from typing import Any

from schemas.topics import TOPIC_MESSAGES
from schemas.touch import Touch
from streams.processors.base import Processor


class TouchesProcessor(Processor[Touch]):
    name = "groundwatch.touches"
    stage = "touches"
    input_model = TOPIC_MESSAGES.touches
    between_stages = True

    @property
    def source_topic(self) -> str:
        return self.ctx.names.touches

    async def handle(self, event: Any) -> None:
        partition = getattr(getattr(event, "message", None), "partition", None)
        if partition is not None and self.resources.ownership.lost(partition):
            return  # read before a rebalance moved the partition: its owner has it
        await super().handle(event)

    async def process(self, message: Touch) -> None:
        await self.resources.touched(message)

    def register(self) -> Any:
        self.resources.follow_assignment()
        return super().register()
