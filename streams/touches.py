"""Rows written -> touches for the workers that own their windows and conversations (``schemas.touch``).

The sink sends them after each write, before its source events are acked (a send that fails leaves the
rows unacked: written again, touched again); the conversation closer sends them for the windows a rollup
counts in. One touch per series' windows and one per conversation for each write, not one per row.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from schemas.touch import Touch
from schemas.utc import utc
from streams.context import StreamContext
from streams.windows.closer import Located
from streams.windows.conversations import conversation_of
from streams.windows.tumbling import TumblingWindows


@dataclass
class _Series:
    watermark: datetime
    windows: dict[datetime, datetime]  # window start -> the latest event time written into it


def touches_of(rows: Sequence[Any], windows: TumblingWindows, conversations: bool = True) -> list[Touch]:
    """The touches of ``rows`` (written evaluations, stored rows, or anything ``Located``): one per
    series' windows, and, with ``conversations``, one per conversation (its latest turn, whether one
    marks the end, and its series' watermark in these rows)."""
    series: dict[tuple[str, str], _Series] = {}
    turns: dict[tuple[str, str, str], tuple[datetime, bool]] = {}
    for row in rows:
        at = utc(row.timestamp)
        s = series.get((row.app, row.model))
        if s is None:
            s = series[(row.app, row.model)] = _Series(at, {})
        s.watermark = max(s.watermark, at)
        start = windows.start_of(at)
        s.windows[start] = max(s.windows.get(start, at), at)
        found = conversation_of(row) if conversations else None
        if found is not None:
            key, last, ends = found
            before = turns.get(key)
            turns[key] = (last, ends) if before is None else (max(before[0], last), before[1] or ends)
    out = [
        Touch(app=app, model=model, at=sorted(s.windows.values()), watermark=s.watermark)
        for (app, model), s in series.items()
    ]
    for (app, model, cid), (last, ends) in turns.items():
        mark = series[(app, model)].watermark
        out.append(Touch(app=app, model=model, conversation_id=cid, at=[last], ends=ends, watermark=mark))
    return out


class TouchSender:
    """Sends touches to the ``touches`` topic, keyed to their owners; ``touch`` is the window closer's
    side of it (``streams.windows.conversations.WindowToucher``)."""

    def __init__(self, ctx: StreamContext) -> None:
        self.ctx = ctx
        self.windows = TumblingWindows(ctx.settings.window.size_seconds)
        self.sent = 0

    async def written(self, rows: Sequence[Any]) -> None:
        """Rows the sink wrote: their windows' and conversations' touches."""
        await self._send(touches_of(rows, self.windows, self.ctx.settings.conversations.enabled))

    async def touch(self, rows: Sequence[Located]) -> None:
        """Windows that must be closed again (a conversation written counts in them)."""
        await self._send(touches_of(rows, self.windows, conversations=False))

    async def _send(self, touches: list[Touch]) -> None:
        name = self.ctx.names.touches
        await asyncio.gather(*(self.ctx.send(name, t.key, t) for t in touches))
        self.sent += len(touches)
