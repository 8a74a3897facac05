"""One revoke handler: when the consumer loses partitions, every holder of per-partition state forgets
them (their unacked events are redelivered to the worker that gets the partitions)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any, cast

import faust

log = logging.getLogger(__name__)

Forget = Callable[[Iterable[Any]], int]


def forget_on_revoke(app: faust.App, name: str, *forgets: Forget) -> None:
    """Connect one handler to ``app``'s partitions-revoked signal that calls each ``forget`` with the
    revoked partitions; ``name`` labels the log line."""

    async def on_revoked(sender: Any, *args: Any, signal: Any = None, **kwargs: Any) -> None:
        revoked = set(args[0]) if args else set()
        dropped = sum(forget(revoked) for forget in forgets)
        if dropped:
            log.info("%s: forgot %d pending events of revoked partitions %s", name, dropped, revoked)

    app.on_partitions_revoked.connect(cast(Any, on_revoked))
