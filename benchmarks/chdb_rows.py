"""Print the evaluations rows of a stopped worker's embedded chDB as TSV (a child process of a benchmark).

    python benchmarks/chdb_rows.py CHDB_PATH [--database groundwatch]

chDB allows one engine path per process, so a benchmark that runs several workers (each its own path)
reads each path in a child like this one, after the worker has exited. Every copy of a row is printed
(no FINAL): duplicates from redelivery are what the scale-out benchmark counts. Columns:
interaction_id, timestamp, evaluated_at, inserted_at (ms since the epoch, UTC), judge_calls,
input_tokens, output_tokens, complete.
"""

from __future__ import annotations

import argparse
import sys

import clickhouse_connect


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("path")
    ap.add_argument("--database", default="groundwatch")
    args = ap.parse_args(argv)
    client = clickhouse_connect.get_client(dsn=f"chdb://{args.path}")
    db = args.database
    result = client.query(
        "SELECT interaction_id, toUnixTimestamp64Milli(timestamp), toUnixTimestamp64Milli(evaluated_at), "
        "toUnixTimestamp64Milli(inserted_at), judge_calls, input_tokens, output_tokens, complete "
        f"FROM {db}.evaluations"
    )
    out = sys.stdout
    for row in result.result_rows:
        out.write("\t".join(str(v) for v in row))
        out.write("\n")
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
