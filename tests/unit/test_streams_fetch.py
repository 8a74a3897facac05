"""The worker's consumer waits at most ``kafka.fetch_max_wait_s`` per fetch (faust fixes it at 1.5 s)."""

from __future__ import annotations

from typing import Any

from schemas.settings import KafkaSettings
from streams.app import create_app
from tests.settings_factory import make_settings


def worker_consumer(app: Any) -> Any:
    """The aiokafka consumer the worker's consumer thread would start (built, not connected)."""
    return app.consumer._thread._create_worker_consumer(app.transport)


async def test_the_consumer_fetch_wait_is_the_setting(tmp_path) -> None:
    settings = make_settings(kafka=KafkaSettings(datadir=tmp_path, fetch_max_wait_s=0.25))
    app = create_app(settings).app
    consumer = worker_consumer(app)
    assert consumer._fetch_max_wait_ms == 250
    assert consumer._fetch_min_bytes == 1  # a broker with data answers at once


async def test_the_default_is_a_tenth_of_a_second(tmp_path) -> None:
    app = create_app(make_settings(kafka=KafkaSettings(datadir=tmp_path))).app
    consumer = worker_consumer(app)
    assert consumer._fetch_max_wait_ms == 100
