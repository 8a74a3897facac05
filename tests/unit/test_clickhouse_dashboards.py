"""Every dashboard query in deploy/dashboards runs on the real schema (embedded chDB)."""

from __future__ import annotations

import re
from pathlib import Path

from schemas.evaluation import Evaluation
from streams.clickhouse.store import ClickHouseStore
from tests.fixtures.messages import EVALUATED_AT, T0
from tests.fixtures.store import store_settings

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "dashboards" / "groundwatch.sql"


def statements(sql: str) -> list[str]:
    body = "\n".join(line for line in sql.splitlines() if not line.lstrip().startswith("--"))
    return [s.strip() for s in body.split(";") if s.strip()]


def test_dashboard_queries_run() -> None:
    store = ClickHouseStore.open_sync(store_settings())
    try:
        now = T0  # the queries' time filters are taken out
        store.insert_evaluations_sync(
            [
                Evaluation(interaction_id="a", timestamp=now, app="x", model="m", judge="lexical",
                           evaluated_at=EVALUATED_AT,
                           context_entailment=0.2, hallucination=True, answer_refusal=False,
                           unsupported_claims=["The moon is cheese."], judge_latency_ms=3.0),
            ]
        )  # fmt: skip
        queries = statements(DASHBOARD.read_text())
        assert len(queries) >= 6
        for q in queries:
            q = re.sub(r"\$__timeFilter\(([^)]*)\)", "1", q).replace("groundwatch.", f"{store.db}.")
            store.query_sync(q)
        claims = store.query_sync(re.sub(r"\$__timeFilter\(([^)]*)\)", "1", queries[3]).replace(
            "groundwatch.", f"{store.db}."
        ))  # fmt: skip
        assert claims == [{"app": "x", "claim": "The moon is cheese.", "times": 1}]
    finally:
        store.close()
