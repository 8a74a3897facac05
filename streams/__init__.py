"""The streaming evaluator: faust processors over Kafka, ClickHouse sink, windows and alerts.

- ``app.create_app(settings)``: the faust app and its resources (judge, ClickHouse) from Settings.
- ``topics``: topic names under the prefix, creation with one partition count (co-partitioned).
- ``processors/``: convert, nli, refusal (concurrent, bounded: ``runner.run_bounded``), sink.
- ``join``: one Evaluation per interaction from converted + nli + refusals (design notes there).
- ``acks``: in-order acks per partition, so faust never commits past unfinished work.
- ``clickhouse/``: client from one URL, versioned DDL (deploy/clickhouse), store, batched sink.
- ``windows/``: tumbling windows computed from deduplicated rows; ``alerts/``: rules, engine, webhook.
- ``replay``, ``report``, ``status``: CLI helpers; ``broker.tansu``, ``supervise``, ``localstack``:
  a local broker, a worker subprocess, and both together (demo, tests).
"""
