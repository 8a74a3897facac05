"""The dimensions written with each evaluation: extracted from the interaction (pipeline/dimensions.py)
and passed through the cardinality guard, whose memory of a day is read back from ``evaluations``.

Where the guard's state lives: in the stored rows. The first time a store writes a row of a UTC day it
reads the values already stored that day (one query per day, at most ``CardinalityGuard.days`` days
held), so a restarted worker admits exactly what it admitted before, and a redelivered interaction
keeps its value. Rows a worker held unwritten when it died are not in storage: they come back
(unacked) and are guarded again like any new row. Workers sharing one ClickHouse each keep their own
guard, read from the same rows: between two reads of a day they may admit different values, so with W
workers a dimension keeps at most W x ``dimensions.max_values_per_day`` values on a day (the limit
itself when one worker writes, or once the day is read again after a restart).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import date
from typing import Any

from pipeline.dimensions import CardinalityGuard, evaluator_versions, extract, topic_dimension
from schemas.evaluation import Evaluation
from schemas.settings import DimensionSettings
from schemas.utc import utc

Query = Callable[[str, dict[str, Any]], list[dict[str, Any]]]


def seed_sql(db: str) -> str:
    """The distinct values stored per dimension on one UTC day (by event time), at most ``limit`` each."""
    return (
        "SELECT name, groupUniqArray({limit:UInt32})(value) AS admitted "
        f"FROM {db}.evaluations ARRAY JOIN mapKeys(dimensions) AS name, mapValues(dimensions) AS value "
        "WHERE toDate(timestamp) = {day:Date} AND value != '(other)' GROUP BY name"
    )


class DimensionWriter:
    """Turns evaluations into their guarded dimension maps (thread-safe: the store inserts from threads)."""

    def __init__(self, settings: DimensionSettings, db: str, query: Query) -> None:
        self.settings = settings
        self._sql = seed_sql(db)
        self._query = query
        self._lock = threading.Lock()
        self.guard = CardinalityGuard(settings.max_values_per_day, self._seed)

    def _seed(self, day: date) -> Mapping[str, list[str]]:
        rows = self._query(self._sql, {"day": day, "limit": self.settings.max_values_per_day})
        return {str(r["name"]): list(r["admitted"]) for r in rows}

    def rows(self, evaluations: Sequence[Evaluation]) -> list[dict[str, str]]:
        with self._lock:
            return [
                self.guard.admit(
                    utc(e.timestamp).date(),
                    {
                        **extract(e.interaction, self.settings),
                        **topic_dimension(e.topic, e.topic_label, e.topic_model),
                        **evaluator_versions(e.custom),
                    },
                )
                for e in evaluations
            ]
