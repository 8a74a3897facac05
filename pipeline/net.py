"""The one way groundwatch picks a local TCP port (the local model server, the embedded broker, the
demo's dashboard, the tests' servers)."""

from __future__ import annotations

import socket


def free_port(preferred: int = 0) -> int:
    """``preferred`` when it is free on 127.0.0.1, else (or with 0) one the system picks."""
    for port in dict.fromkeys((preferred, 0)):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return int(sock.getsockname()[1])
    raise OSError("no free port on 127.0.0.1")
