-- groundwatch ad-hoc queries for clickhouse-client / chDB (or a Grafana panel of your own).
-- The Grafana dashboard itself (trends per app and model, Wilson intervals, dead letters, judge latency,
-- alert annotations) is provisioned from deploy/grafana: see deploy/grafana/README.md.
-- Tables are ReplacingMergeTrees: read them with FINAL so redeliveries and replays never count twice.
-- Replace `groundwatch.` with your database; $__timeFilter(...) is the Grafana ClickHouse plugin's
-- time-range macro (drop it, or write `window_start >= now() - INTERVAL 6 HOUR`, outside Grafana).

-- 1. Hallucination and refusal rate per app/model over time (one point per closed window)
SELECT
    window_start AS t,
    concat(app, ' / ', model) AS series,
    hallucination_rate,
    answer_refusal_rate
FROM groundwatch.window_aggregates FINAL
WHERE $__timeFilter(window_start)
ORDER BY t;

-- 2. Pooled figures per app/model for the selected range (weighted by interactions, not by window)
SELECT
    app,
    model,
    sum(count) AS interactions,
    sum(hallucinations) / nullIf(sum(answered), 0) AS hallucination_rate,
    sumIf(mean_context_entailment * count, mean_context_entailment IS NOT NULL)
        / nullIf(sumIf(count, mean_context_entailment IS NOT NULL), 0) AS mean_context_entailment_approx,
    sum(input_tokens + output_tokens) AS tokens,
    sum(cost_usd) AS cost_usd,
    max(judge_latency_p95_ms) AS worst_window_p95_ms,
    sum(incomplete) AS incomplete
FROM groundwatch.window_aggregates FINAL
WHERE $__timeFilter(window_start)
GROUP BY app, model
ORDER BY hallucination_rate DESC;

-- 3. Exact figures straight from the per-interaction rows (one row per interaction_id)
SELECT
    app,
    model,
    count() AS interactions,
    avg(context_entailment) AS mean_context_entailment,
    avg(ground_truth_entails_answer) AS mean_ground_truth_entails_answer,
    avg(answer_entails_ground_truth) AS mean_answer_entails_ground_truth,
    avgIf(hallucination, hallucination IS NOT NULL) AS hallucination_rate,
    avgIf(answer_refusal, answer_refusal IS NOT NULL) AS answer_refusal_rate,
    -- over individual judge calls (uncached, not lexical), not per-interaction sums (migration 002)
    quantileExactInclusiveArray(0.95)(call_latencies_ms) AS judge_latency_p95_ms
FROM groundwatch.evaluations FINAL
WHERE $__timeFilter(timestamp)
GROUP BY app, model
ORDER BY interactions DESC;

-- 4. The claims most often unsupported by the retrieved context
SELECT
    app,
    claim,
    count() AS times
FROM groundwatch.evaluations FINAL
ARRAY JOIN unsupported_claims AS claim
WHERE $__timeFilter(timestamp)
GROUP BY app, claim
ORDER BY times DESC
LIMIT 50;

-- 5. Verdict mix per pair (statement level; the view keeps only each interaction's current statements,
--    so a re-evaluation with fewer statements leaves none behind)
SELECT
    pair,
    verdict,
    count() AS statements
FROM groundwatch.evaluation_statements_current
WHERE $__timeFilter(timestamp)
GROUP BY pair, verdict
ORDER BY pair, statements DESC;

-- 6. Alerts that fired
SELECT fired_at, rule, app, model, metric, op, threshold, round(value, 3) AS value, interactions, message
FROM groundwatch.alerts FINAL
WHERE $__timeFilter(fired_at)
ORDER BY fired_at DESC;
