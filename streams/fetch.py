"""The consumer's fetch wait (``kafka.fetch_max_wait_s``), which faust does not expose.

faust-streaming 0.15.3 builds its aiokafka consumer with ``fetch_max_wait_ms=1500`` fixed. A broker
that answers a waiting fetch only when the wait is over (the embedded Tansu does not wake it when
messages arrive) then adds up to 1.5 s to every topic hop, ~0.5 s on average: at 30 interactions/s the
staged topology's three hops to the join took ~1.1 s more than the fused one's single hop. Kafka answers
a fetch as soon as it has data, so a short wait only makes an idle consumer ask more often (10 small
requests a second at 0.1 s). The transport installed here is faust's aiokafka transport with that one
number changed before the consumer starts.
"""

from __future__ import annotations

from typing import Any

import faust
from faust.transport.drivers import aiokafka as faust_aiokafka


def use_fetch_wait(app: faust.App, wait_s: float) -> None:
    """Give ``app`` faust's aiokafka transport whose consumer waits at most ``wait_s`` per fetch."""
    wait_ms = max(1, round(wait_s * 1000))

    class ConsumerThread(faust_aiokafka.AIOKafkaConsumerThread):
        def _create_worker_consumer(self, transport: Any) -> Any:
            consumer = super()._create_worker_consumer(transport)
            consumer._fetch_max_wait_ms = wait_ms  # read by aiokafka when the consumer starts
            return consumer

    class Consumer(faust_aiokafka.Consumer):
        def _new_consumer_thread(self) -> Any:
            return ConsumerThread(self, loop=self.loop, beacon=self.beacon)

    class Transport(faust_aiokafka.Transport):
        pass

    Transport.Consumer = Consumer
    app.transport = Transport(app.conf.broker_consumer, app)
