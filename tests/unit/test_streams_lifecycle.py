"""The worker's stop rules (streams.lifecycle) and the outage/bad-row split of ClickHouse errors
(streams.clickhouse.client.is_unavailable). The whole behaviour against a real broker and chDB is in
tests/fault/test_fault_broker_restart.py and tests/fault/test_fault_clickhouse_outage.py."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Mapping

import pytest
from clickhouse_connect.driver.exceptions import DatabaseError, DataError, OperationalError

from schemas.errors import BrokerUnavailable
from schemas.settings import KafkaSettings
from streams.clickhouse.client import error_code, is_unavailable
from streams.lifecycle import STRIKES, BrokerWatch, describe_loss, lost_topics
from streams.topics import topic_names

KAFKA = KafkaSettings(topic_prefix="gw.", partitions=2, broker="kafka://user:secret@127.0.0.1:9092")
OURS = {name: 2 for name in topic_names(KAFKA).all()}


def test_lost_topics_names_the_gone_and_the_repartitioned() -> None:
    seen = {**OURS, "other": 1}
    assert lost_topics(OURS, seen) == []
    del seen["gw.judged"]
    seen["gw.alerts"] = 1
    assert lost_topics(OURS, seen) == ["gw.alerts (2 -> 1 partitions)", "gw.judged (gone)"]
    assert describe_loss(lost_topics(OURS, {})).startswith("gw.alerts, gw.converted, ")
    assert (
        describe_loss(["a (gone)", "b (gone)", "c (2 -> 1 partitions)"])
        == "a, b (gone); c (2 -> 1 partitions)"
    )


class Listings:
    """What the broker answers at each check, in order (an exception: it could not be reached)."""

    def __init__(self, *answers: Mapping[str, int] | Exception) -> None:
        self.answers = list(answers)

    async def __call__(self) -> Mapping[str, int]:
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


async def test_the_watch_fires_once_after_strikes_in_a_row_and_never_for_an_unreachable_broker() -> None:
    fired: list[BrokerUnavailable] = []

    async def on_lost(error: BrokerUnavailable) -> None:
        fired.append(error)

    partial = {k: v for k, v in OURS.items() if k != "gw.otlp"}
    answers = Listings(
        partial,  # topics not all there yet: no baseline, nothing lost
        OURS,  # the baseline
        {},  # strike 1
        OURS,  # back: the strikes start again
        {},  # strike 1
        ConnectionError("unreachable"),  # not a loss, not a reset
        {},  # strike 2: fires
        {},  # fires once only
    )
    watch = BrokerWatch(KAFKA, on_lost, list_topics=answers)
    results = [await watch.check() for _ in range(8)]
    assert STRIKES == 2
    assert [bool(r) for r in results] == [False, False, True, False, True, False, True, True]
    assert len(fired) == 1
    message = str(fired[0])
    assert "gw.alerts, gw.converted, " in message and "(gone)" in message
    assert "secret" not in message and "user:***@127.0.0.1:9092" in message


@pytest.mark.parametrize(
    ("error", "outage"),
    [
        (
            DatabaseError(
                "Code: 1001. DB::Exception: filesystem error: in create_directories: Operation not "
                'permitted ["/x/tmp_insert_all_2_2_1"]. (STD_EXCEPTION)'
            ),
            True,
        ),
        (DatabaseError("Code: 243. DB::Exception: Cannot reserve 1.00 MiB, not enough space"), True),
        (DatabaseError("Code: 242. DB::Exception: Table is in readonly mode"), True),
        (DatabaseError("Code: 252. DB::Exception: Too many parts (300)"), True),
        (OperationalError("Error HTTPConnectionPool: connection refused"), True),
        (ConnectionRefusedError(111, "Connection refused"), True),
        (DataError("Code: 53. DB::Exception: Type mismatch in IN or VALUES section"), False),
        (DatabaseError("Code: 27. DB::Exception: Cannot parse input"), False),
        (ValueError("bad value for column"), False),
        (TypeError("'NoneType' object is not iterable"), False),
    ],
)
def test_an_outage_is_told_from_a_row_clickhouse_refuses(error: Exception, outage: bool) -> None:
    assert is_unavailable(error) is outage


def test_error_code_reads_the_attribute_or_the_message() -> None:
    assert error_code(DatabaseError("x", code=243)) == 243
    assert error_code(DatabaseError("Code: 1001. DB::Exception")) == 1001
    assert error_code(ValueError("no code")) is None


def test_the_shutdown_deadline_ends_a_stuck_process_with_one_line_and_code_2() -> None:
    script = textwrap.dedent(
        """
        import time
        from streams.lifecycle import ShutdownDeadline
        ShutdownDeadline(0.2).arm()
        time.sleep(60)  # a stop that never ends
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=50)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "groundwatch worker: ShutdownTimeout: the worker did not stop within kafka.shutdown_timeout_s=0.2s; "
        "ending it now (events not acked yet are read again at the next start)"
    ]
