"""What a deployed worker runs: faust processors over Kafka, ClickHouse, windows, alerts, the dashboard.

- ``app.create_app(settings)``: the faust app, its ``StreamContext`` (``context``: topics, sending, dead
  letters) and its ``Resources`` (``resources``: judge, ClickHouse, windows, alerts, the clock).
- ``topics``: topic names under the prefix and their creation (co-partitioned); ``schemas.topics`` says
  what each carries.
- ``processors/``: convert, judge (NLI and refusal), join, evaluate (fused), sink, labels, dead letters,
  OTLP; run concurrently by ``runner.run_bounded`` and acked in offset order (``acks``).
- ``join``: one Evaluation per interaction from its Converted and its JudgeResult (design notes there).
- ``codec``: bytes <-> models at every boundary, and the one dead-letter builder.
- ``clickhouse/``: client from one URL, versioned DDL (deploy/clickhouse), store, batched sink, labels.
- ``windows/``: tumbling windows and conversations closed from the stored rows; ``alerts/``: rules,
  engine, receivers.
- ``dashboard/``: the JSON API and page on the worker's web server; ``telemetry``, ``probes``: metrics
  and health.
- ``testing``: a harness for processors without a broker (topic, event, stream, ``ManualClock``).
"""
