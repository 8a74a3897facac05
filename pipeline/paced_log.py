"""The one pace for repeated log lines: the first of a kind at once, then at most one every ``every_s``
(on the worker's clock) saying how many were held back since. A flood of the same failure (an outage,
a scanner's bad requests, an evaluator that always fails) costs a line a minute, not a line an event."""

from __future__ import annotations

from collections.abc import Hashable

from pipeline.clock import SYSTEM_CLOCK, Clock


class PacedLog:
    """Whether a line of each kind (``key``) is due now: ``due`` says how many lines of that kind were
    held back since the last one, or None to hold this one back too (it is counted)."""

    def __init__(self, every_s: float, clock: Clock = SYSTEM_CLOCK) -> None:
        self.every_s = every_s
        self.clock = clock
        self._last: dict[Hashable, tuple[float, int]] = {}  # key -> (monotonic time of its line, held since)

    def due(self, key: Hashable = None) -> int | None:
        now = self.clock.monotonic()
        last = self._last.get(key)
        if last is not None and now - last[0] < self.every_s:
            self._last[key] = (last[0], last[1] + 1)
            return None
        self._last[key] = (now, 0)
        return 0 if last is None else last[1]

    def held(self, key: Hashable = None) -> int:
        """Lines of ``key`` held back since its last line."""
        last = self._last.get(key)
        return 0 if last is None else last[1]

    def reset(self, key: Hashable = None) -> None:
        """The condition ended: the next line of ``key`` is due at once."""
        self._last.pop(key, None)
