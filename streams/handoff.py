"""The Evaluations this worker made, handed to its own sink in memory.

The fused evaluate processor sends each Evaluation to the evaluations topic, as any producer does, and
once the broker has it (its partition and offset known) gives the object to the sink at once: the row is
batched for ClickHouse without waiting for the message to come back through the consumer, and without
decoding it again. When the message comes back to this worker's sink it is only acked: at once when its
row is written, else when the row is.

A message whose Evaluation is not held here (sent by another worker, by the staged topology's join,
forgotten after a rebalance, or pushed out when more than ``limit`` wait to come back) is decoded and
written as any other; the second write of a row already written is harmless (ReplacingMergeTree). A
crash before a row is written leaves its message unacked, so it is read and written again: at least once,
as before.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

#: a message's place: topic, partition, offset
Place = tuple[str, int, int]


@dataclass
class _Held:
    written: bool = False
    ack: Callable[[], object] | None = None  # the message came back: ack it once the row is written


class Handoff:
    def __init__(self, limit: int) -> None:
        """``limit``: Evaluations held while their messages have not come back; past it the oldest of
        those not yet claimed are dropped (their messages are then decoded and written again)."""
        self.limit = limit
        self._held: OrderedDict[Place, _Held] = OrderedDict()
        self.claimed = 0  # messages acked from here, without a decode

    def __len__(self) -> int:
        return len(self._held)

    def sent(self, place: Place) -> Callable[[], None]:
        """Hold the Evaluation sent to ``place``; returns what its row runs once written."""
        held = _Held()
        self._held[place] = held
        self._trim()

        def written() -> None:
            held.written = True
            if held.ack is not None:
                ack, held.ack = held.ack, None
                self._held.pop(place, None)
                ack()

        return written

    def claim(self, place: Place, ack: Callable[[], object]) -> bool:
        """The message at ``place`` came back to the sink: True when its Evaluation was made here (``ack``
        runs now if its row is written, else once it is); False when the sink must read it itself."""
        held = self._held.get(place)
        if held is None:
            return False
        self.claimed += 1
        if held.written:
            del self._held[place]
            ack()
        else:
            held.ack = ack
        return True

    def forget(self, tps: Iterable[Any]) -> int:
        """Drop what is held for partitions this worker lost (their messages go to the next owner, which
        reads and writes them itself); returns how many."""
        lost = {(str(getattr(tp, "topic", "")), int(getattr(tp, "partition", -1))) for tp in tps}
        gone = [place for place in self._held if (place[0], place[1]) in lost]
        for place in gone:
            self._held.pop(place).ack = None  # its row may still be written: that acks nothing now
        return len(gone)

    def _trim(self) -> None:
        """Past the limit, drop the oldest entries no message has claimed yet (a claimed entry holds an
        ack that must run)."""
        excess = len(self._held) - self.limit
        if excess <= 0:
            return
        for place in [p for p, h in self._held.items() if h.ack is None][:excess]:
            del self._held[place]
