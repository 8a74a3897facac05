"""groundwatch.client against the real embedded broker (Tansu): interactions (dicts and models) reach the
interactions topic, keyed by id; past its bound the buffer drops and counts, never raising or blocking;
with the broker unreachable ``send`` still returns at once and ``close`` gives up within its timeout."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime

import pytest

from groundwatch.client import GroundwatchClient
from groundwatch.local.tansu import TansuBroker, free_port
from schemas.interaction import Interaction
from schemas.settings import KafkaSettings, settings_from_env
from streams.topics import ensure_topics
from tests.integration.helpers import read_topic


def kafka_settings(broker_url: str, prefix: str) -> KafkaSettings:
    env = {"GROUNDWATCH_KAFKA__BROKER": broker_url, "GROUNDWATCH_KAFKA__TOPIC_PREFIX": prefix}
    return settings_from_env(env).kafka


def interaction(n: int) -> dict:
    return {"interaction_id": f"i-{n}", "question": f"Where is order {n}?", "answer": "It has shipped.",
            "steps": [{"name": "get_order", "call_id": f"c{n}", "arguments": {"order": n},
                       "result": '{"status": "shipped"}'}]}  # fmt: skip


def test_interactions_reach_the_topic_in_the_background(broker: TansuBroker) -> None:
    prefix = f"c{uuid.uuid4().hex[:6]}."
    kafka = kafka_settings(broker.url, prefix)
    asyncio.run(ensure_topics(kafka))
    model = Interaction.model_validate({**interaction(0), "timestamp": datetime(2026, 11, 26, tzinfo=UTC)})
    with GroundwatchClient(kafka, batch_size=7) as client:
        assert client.send(model)
        assert all(client.send(interaction(n)) for n in range(1, 20))
        assert client.flush(30)
    assert (client.stats.taken, client.stats.sent, client.stats.dropped, client.stats.failed) == (
        20,
        20,
        0,
        0,
    )
    got = asyncio.run(read_topic(broker.url, prefix + "interactions", expect=20, idle_s=2))
    assert sorted(m["interaction_id"] for m in got) == sorted(f"i-{n}" for n in range(20))
    for message in got:
        parsed = Interaction.model_validate(message)  # what the worker reads: the steps typed
        assert parsed.steps[0].name == "get_order" and parsed.timestamp is not None
    assert not client.send(interaction(99)) and client.stats.dropped == 1  # closed: dropped, counted


def test_an_unreachable_broker_never_blocks_send_and_the_bound_drops_and_counts() -> None:
    kafka = kafka_settings(f"127.0.0.1:{free_port()}", "x.")  # nothing listens there
    client = GroundwatchClient(kafka, max_buffered=5)
    taken = [client.send(interaction(n)) for n in range(8)]
    assert taken == [True] * 5 + [False] * 3 and client.stats.dropped == 3
    assert not client.send({"question": object()})  # not serialisable: dropped, not raised
    assert client.close(timeout_s=2) is False  # given up in time: what was buffered is dropped, counted
    assert client.stats.dropped == 4 + 5 and client.stats.sent == 0


def test_an_interaction_over_the_message_size_is_dropped_before_it_is_parsed_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    kafka = kafka_settings(f"127.0.0.1:{free_port()}", "x.").model_copy(update={"max_message_bytes": 100_000})
    client = GroundwatchClient(kafka)
    try:
        assert client.send(interaction(1)) is True
        assert client.send({**interaction(2), "answer": "x" * 200_000}) is False
        assert client.stats.dropped == 1 and client.stats.taken == 1
        assert any("over kafka.max_message_bytes (100,000)" in r.getMessage() for r in caplog.records)
    finally:
        client.close(timeout_s=1)
