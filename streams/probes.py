"""/metrics, /healthz and /readyz on the worker's web server (for Prometheus and Kubernetes probes).

- ``/healthz``: the process answers (liveness);
- ``/readyz``: the resources are open, the consumer holds partitions or is waiting for them, ClickHouse
  answers a query, and an HTTP judge answers ``GET /models`` (the lexical judge has nothing to reach);
  503 with the failing checks otherwise;
- ``/metrics``: ``streams.telemetry.WorkerMetrics`` in Prometheus' text format.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from streams.resources import Resources
from streams.telemetry import WorkerMetrics

#: how long one readiness check may take
CHECK_TIMEOUT_S = 3.0


async def _judge_reachable(resources: Resources) -> bool:
    client = getattr(resources.judge, "client", None)
    ping = getattr(client, "ping", None)
    if ping is None:  # lexical: nothing to reach; cascade/local wrap a client that has ping
        return True
    return bool(await ping())


async def readiness(app: Any, resources: Resources) -> dict[str, bool]:
    """Each readiness check and whether it passed."""
    checks: dict[str, bool] = {"resources": resources.ready}
    consumer = getattr(app, "consumer", None)
    checks["broker"] = consumer is not None and not getattr(app, "should_stop", False)
    if resources.ready:
        try:
            checks["clickhouse"] = await asyncio.wait_for(resources.store_open.ping(), CHECK_TIMEOUT_S)
        except TimeoutError:
            checks["clickhouse"] = False
        try:
            checks["judge"] = await asyncio.wait_for(_judge_reachable(resources), CHECK_TIMEOUT_S)
        except (TimeoutError, Exception):
            checks["judge"] = False
    return checks


def add_probe_routes(
    web_app: web.Application, app: Any, resources: Resources, metrics: WorkerMetrics
) -> None:
    async def healthz(request: web.Request) -> web.Response:
        return web.json_response({"status": "alive"})

    async def readyz(request: web.Request) -> web.Response:
        checks = await readiness(app, resources)
        ok = all(checks.values()) and len(checks) == 4
        return web.Response(
            text=json.dumps({"ready": ok, "checks": checks}),
            status=200 if ok else 503,
            content_type="application/json",
        )

    async def metrics_view(request: web.Request) -> web.Response:
        body = generate_latest(metrics.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    web_app.router.add_get("/healthz", healthz)
    web_app.router.add_get("/readyz", readyz)
    web_app.router.add_get("/metrics", metrics_view)
