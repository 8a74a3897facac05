"""groundwatch.client's close against a broker that takes connections and never answers (a TCP server on
127.0.0.1): close keeps one deadline on the client's clock, drops and counts what it could not send, and
lets go of the broker. (The client against a real broker: tests/integration/test_client.py.)"""

from __future__ import annotations

import socket
import threading
from typing import Any

from groundwatch.client import GroundwatchClient
from pipeline.clock import ManualClock
from schemas.settings import settings_from_env


class Mute:
    """A server on 127.0.0.1 that accepts every connection, reads what comes and never answers;
    ``connected`` is set once a client connected, ``released`` once every connection was closed by its
    client."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self._listener.getsockname()[1]}"
        self.connected = threading.Event()
        self.released = threading.Event()
        self._open = 0
        self._lock = threading.Lock()
        self._held: list[socket.socket] = []

    def __enter__(self) -> Mute:
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        for conn in self._held:
            conn.close()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:  # the server closed
                return
            with self._lock:
                self._open += 1
                self._held.append(conn)
            self.connected.set()
            threading.Thread(target=self._read, args=(conn,), daemon=True).start()

    def _read(self, conn: socket.socket) -> None:
        try:
            while conn.recv(65536):
                pass
        except OSError:
            pass
        with self._lock:
            self._open -= 1
            if not self._open:
                self.released.set()


class WatchedClock(ManualClock):
    """A ManualClock that says when it is first read (``close`` takes its deadline then)."""

    def __init__(self) -> None:
        super().__init__()
        self.read = threading.Event()

    def monotonic(self) -> float:
        self.read.set()
        return super().monotonic()


def interaction(n: int) -> dict[str, Any]:
    return {"interaction_id": f"i-{n}", "question": f"Where is order {n}?", "answer": "It has shipped."}


def test_close_keeps_one_deadline_on_its_clock_against_a_broker_that_never_answers() -> None:
    """The sender waits on a broker that never answers (aiokafka's own timeout is 40 s); close(30)
    returns once 30 s have passed on the client's clock, not after a flush's 30 s and a join's 30 s
    more: what was buffered is dropped and counted, and the sender is cancelled and lets go of the
    broker."""
    with Mute() as broker:
        kafka = settings_from_env({"GROUNDWATCH_KAFKA__BROKER": broker.address}).kafka
        clock = WatchedClock()
        client = GroundwatchClient(kafka, clock=clock)
        assert all(client.send(interaction(n)) for n in range(3))
        assert broker.connected.wait(30)  # the sender is waiting on the broker
        outcome: list[bool] = []
        closer = threading.Thread(target=lambda: outcome.append(client.close(timeout_s=30)))
        closer.start()
        assert clock.read.wait(30)  # close took its deadline
        clock.advance(30)  # and the deadline passes, on the client's clock
        closer.join(20)  # a guard against a hang, not a measure of time
        assert not closer.is_alive(), "close waited past its deadline"
        assert outcome == [False]
        assert (client.stats.taken, client.stats.sent, client.stats.dropped) == (3, 0, 3)
        assert not client.send(interaction(9))  # closed
        assert broker.released.wait(20), "the cancelled sender kept its connection to the broker"
