"""The one pace for repeated log lines: the first at once, then one an interval with the count held."""

from __future__ import annotations

from pipeline.clock import ManualClock
from pipeline.paced_log import PacedLog


def test_the_first_line_is_due_then_one_an_interval_with_what_was_held_back() -> None:
    clock = ManualClock()
    paced = PacedLog(60.0, clock)
    assert paced.due("a") == 0
    assert [paced.due("a") for _ in range(3)] == [None, None, None] and paced.held("a") == 3
    assert paced.due("b") == 0  # each kind on its own
    clock.advance(59.9)
    assert paced.due("a") is None
    clock.advance(0.1)
    assert paced.due("a") == 4 and paced.held("a") == 0
    paced.reset("a")  # the condition ended: the next one is due at once
    assert paced.due("a") == 0
