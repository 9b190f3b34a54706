/*
id: producer-bound
question: Are the consumer warps starved at their full barriers while the producer is busy issuing rather than waiting?
evidence:
  - role_balance.consumer_wait_share (PC samples at the consumer's mbarrier waits / all its samples)
  - role_balance.producer_wait_share (low = the producer is busy, not waiting for free slots)
  - role_stalls: the producer's top stall reason away from waits
threshold:
  min_consumer_wait_share: 0.15   # consumers spend at least this share of samples waiting for data
  max_producer_wait_share: 0.20   # while the producer spends at most this share waiting for free slots
  min_role_samples: 50            # fewer PC samples than this in a role is too little evidence
measured: |
  confirmed: ws_stream_producer (copies by hand) consumer 0.874 / producer 0.001;
             gemm_wgmma_cpasync (cp.async, no TMA) consumer 0.389 / producer 0.047.
  rejected:  ws_stream_healthy 0.016 / 0.537; ws_stream_serialized 0.145 / 0.532 (producer waits);
             ws_stream_consumer 0.001 / 0.552; gemm_wgmma_tma 0.188 / 0.552; torch_mm (cuBLAS) 0.010 / 0.004.
experiment: >
  Fill each stage with one bulk/TMA copy issued by one elected lane, or move the address
  math off the producer: the consumers' mbarrier-wait share should fall below 0.15
  (ws_stream_producer 0.874 -> ws_stream_healthy 0.016). Check with `wsperf compare BEFORE
  AFTER`.
remedy: >
  Make the producer cheaper per byte: issue TMA (cp.async.bulk.tensor) from one elected
  lane instead of copying with loads and stores, move address math out of the loop
  (precomputed tensor maps or descriptors), copy larger tiles per barrier, and deepen the
  ring so that copies are in flight ahead of the consumers.
*/
WITH busy AS (
    -- What the producer does when it is not waiting on a barrier: its top stall reason.
    SELECT launch_id, arg_max(reason, samples) AS producer_top_stall
    FROM (SELECT launch_id, reason, sum(samples) AS samples FROM role_stalls
          WHERE role = 'producer' AND NOT at_wait AND launch_id IN (SELECT launch_id FROM _wsperf_ids)
          GROUP BY launch_id, reason)
    GROUP BY launch_id
),
v AS (
    SELECT l.launch_id, w.warp_specialized, r.*, b.producer_top_stall
    FROM launches AS l
    LEFT JOIN warp_specialization AS w USING (launch_id)
    LEFT JOIN role_balance AS r USING (launch_id)
    LEFT JOIN busy AS b USING (launch_id)
    -- Only the launches asked about: analyses.hypotheses.evaluate fills _wsperf_ids.
    WHERE l.launch_id IN (SELECT launch_id FROM _wsperf_ids)
)
SELECT
    launch_id,
    CASE
        WHEN warp_specialized IS NULL THEN 'no_data'
        WHEN NOT warp_specialized THEN 'rejected'
        WHEN consumer_samples IS NULL OR producer_samples IS NULL
          OR consumer_samples < $min_role_samples OR producer_samples < $min_role_samples THEN 'no_data'
        WHEN consumer_wait_share >= $min_consumer_wait_share
         AND producer_wait_share <= $max_producer_wait_share THEN 'confirmed'
        ELSE 'rejected'
    END AS status,
    CASE
        WHEN warp_specialized IS NULL THEN
            'no SASS-level counters in the report: collect --section SourceCounters (or --set full) with PC sampling'
        WHEN NOT warp_specialized THEN 'not warp-specialized: no separate producer and consumer code paths'
        WHEN consumer_samples IS NULL OR producer_samples IS NULL
          OR consumer_samples < $min_role_samples OR producer_samples < $min_role_samples THEN
            printf('too few PC samples per role (consumer %s, producer %s): profile a longer launch',
                   coalesce(consumer_samples::BIGINT::VARCHAR, '0'), coalesce(producer_samples::BIGINT::VARCHAR, '0'))
        ELSE printf('consumers wait for data %.0f%% of their samples; the producer waits for free slots %.0f%% (otherwise %s)',
                    100 * consumer_wait_share, 100 * producer_wait_share, coalesce(producer_top_stall, 'issuing'))
    END AS summary,
    warp_specialized,
    round(consumer_wait_share, 4) AS consumer_wait_share,
    round(producer_wait_share, 4) AS producer_wait_share,
    consumer_samples::BIGINT AS consumer_samples,
    producer_samples::BIGINT AS producer_samples,
    producer_top_stall
FROM v
