"""ClickHouse through clickhouse-connect: one client from one URL, versioned DDL, idempotent writes."""
