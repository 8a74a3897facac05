"""``interactions(n, tag)``: ``n`` input lines from the sample interactions (groundwatch/data), cycled,
each with an id of its own (its sample id, ``tag`` and its index)."""

from __future__ import annotations

import json
from pathlib import Path

SAMPLE = Path(__file__).resolve().parents[2] / "groundwatch" / "data" / "sample_interactions.jsonl"


def interactions(n: int, tag: str) -> list[str]:
    base = [json.loads(x) for x in SAMPLE.read_text().splitlines() if x.strip()]
    out = []
    for i in range(n):
        record = dict(base[i % len(base)])
        record["id"] = f"{record.get('id') or record.get('interaction_id')}-{tag}{i}"
        record.pop("interaction_id", None)
        out.append(json.dumps(record))
    return out
