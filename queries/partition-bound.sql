/*
id: partition-bound
question: Is a partition that moves data (a TMA load or store warp, a copy or epilogue partition) the one the math partitions wait for?
evidence:
  - partitions (wsperf.analyses.partitions, from the warp-index dispatch in the SASS), per partition with a job and enough PC samples - its wait share at mbarrier wait sites
  - the data partition that waits least (no MMA issue, FMA math, softmax or correction in its job) against the math partitions
  - role_pcs joined to stalls - the busy partition's top stall reason away from waits
threshold:
  max_busy_wait_share: 0.10      # the data partition waits at most this share of its samples: it is busy
  min_math_wait_share: 0.30      # while every math partition waits at least this share: they wait for it
  min_partition_samples: 50      # a partition with fewer PC samples is left out (too little evidence)
measured: |
  confirmed: gluon_3part_slow (fixtures/src/gluon_ws_3part.py --slow-store: every TMA store issued 8
             times) - the store warp epilogue (warp 7) waits 0.005, the compute warps 0.815 (195.5 us);
             ws_stream_producer (its producer warp copies by hand) 0.001 against 0.874;
             gemm_wgmma_cpasync (cp.async producer warpgroup) 0.047 against 0.389.
  rejected:  gluon_3part (the same kernel, one store a tile: 92.7 us) - the store warp waits 0.471, the
             loader 0.788; ws_stream_healthy, ws_stream_serialized, ws_stream_consumer, gemm_wgmma_tma,
             gemm_wgmma_tma_s2 and triton_ws_matmul - their load partitions wait 0.53-0.89 (they run ahead).
  no_data:   torch_mm (cuBLAS: no warp dispatch read from its SASS), gemm_wgmma_tma_basic (no source counters).
experiment: >
  Make the busy partition's work cheaper and watch its wait share rise and the math
  partitions' fall: gluon_3part_slow -> gluon_3part (one TMA store a tile instead of eight)
  took the store warp from 0.005 to 0.471 and the compute warps from 0.815 to 0.369, and the
  kernel from 195.5 to 92.7 us. Check with `wsperf compare BEFORE AFTER`.
remedy: >
  Speed up the partition the others wait for, or give it more in flight. A TMA store warp:
  do not wait for each store to finish reading its stage before the next (store_wait with
  pendings above 0, or cp.async.bulk.wait_group.read N), give the output ring more stages,
  store larger boxes. A load warp: issue TMA from one elected lane instead of copying by
  hand, move address math out of its loop, deepen the ring. An epilogue that converts and
  stores: more warps for it, or double-buffered accumulators so the next tile's math
  overlaps it.
*/
WITH p AS (
    SELECT launch_id, warp_partition, job, samples, wait_share,
           (job LIKE '%MMA issue%' OR job LIKE '%FMA math%' OR job LIKE '%softmax%' OR job LIKE '%correction%') AS math
    FROM partitions
    WHERE launch_id IN (SELECT launch_id FROM _wsperf_ids)
      AND job IS NOT NULL AND job <> 'none' AND coalesce(samples, 0) >= $min_partition_samples
),
busy AS (
    -- the data partition that waits least
    SELECT launch_id, arg_min(warp_partition, wait_share) AS busy_partition, arg_min(job, wait_share) AS busy_job,
           min(wait_share) AS busy_wait_share
    FROM p WHERE NOT math GROUP BY launch_id
),
maths AS (
    SELECT launch_id, min(wait_share) AS math_wait_share, count(*) AS math_partitions,
           string_agg(printf('%s %.0f%%', warp_partition, 100 * wait_share), ', ' ORDER BY warp_partition) AS math_waits
    FROM p WHERE math GROUP BY launch_id
),
read AS (
    SELECT launch_id, count(DISTINCT warp_partition) AS partitions FROM role_pcs
    WHERE warp_partition IS NOT NULL AND launch_id IN (SELECT launch_id FROM _wsperf_ids)
    GROUP BY launch_id
),
top AS (
    -- what the busy partition does when it is not waiting on a barrier: its top stall reason
    SELECT launch_id, warp_partition, arg_max(reason, samples) AS busy_top_stall
    FROM (SELECT r.launch_id, r.warp_partition, st.reason, sum(st.samples) AS samples
          FROM role_pcs AS r JOIN stalls AS st USING (launch_id, pc)
          WHERE NOT r.is_wait AND r.warp_partition IS NOT NULL AND r.launch_id IN (SELECT launch_id FROM _wsperf_ids)
          GROUP BY r.launch_id, r.warp_partition, st.reason)
    GROUP BY launch_id, warp_partition
),
v AS (
    SELECT l.launch_id, w.warp_specialized, coalesce(rd.partitions, 0) AS partitions, b.busy_partition, b.busy_job,
           b.busy_wait_share, m.math_wait_share, m.math_partitions, m.math_waits, t.busy_top_stall
    FROM launches AS l
    LEFT JOIN warp_specialization AS w USING (launch_id)
    LEFT JOIN read AS rd USING (launch_id)
    LEFT JOIN busy AS b USING (launch_id)
    LEFT JOIN maths AS m USING (launch_id)
    LEFT JOIN top AS t ON t.launch_id = l.launch_id AND t.warp_partition = b.busy_partition
    -- Only the launches asked about: analyses.hypotheses.evaluate fills _wsperf_ids.
    WHERE l.launch_id IN (SELECT launch_id FROM _wsperf_ids)
)
SELECT
    launch_id,
    CASE
        WHEN warp_specialized IS NULL THEN 'no_data'
        WHEN NOT warp_specialized THEN 'rejected'
        WHEN partitions = 0 OR busy_partition IS NULL OR math_partitions IS NULL THEN 'no_data'
        WHEN busy_wait_share <= $max_busy_wait_share AND math_wait_share >= $min_math_wait_share THEN 'confirmed'
        ELSE 'rejected'
    END AS status,
    CASE
        WHEN warp_specialized IS NULL THEN
            'no SASS-level counters in the report: collect --section SourceCounters (or --set full) with PC sampling'
        WHEN NOT warp_specialized THEN 'not warp-specialized: no separate partitions'
        WHEN partitions = 0 THEN 'the warp-index dispatch is not read from the SASS, so there are no partitions to '
            || 'compare (producer-bound still reads the roles by code): collect a role timeline (wsperf timeline) to see '
            || 'which role waits'
        WHEN busy_partition IS NULL OR math_partitions IS NULL THEN
            printf('too few PC samples in a data partition or a math partition (under %d each): profile a longer launch',
                   $min_partition_samples)
        ELSE printf('%s (%s) waits %.1f%% of its samples (otherwise %s); %s %s',
                    busy_partition, busy_job, 100 * busy_wait_share, coalesce(busy_top_stall, 'issuing'),
                    CASE WHEN math_partitions = 1 THEN 'the math partition waits:' ELSE 'the math partitions wait:' END,
                    math_waits)
             || CASE WHEN busy_wait_share <= $max_busy_wait_share AND math_wait_share >= $min_math_wait_share
                     THEN ' - they wait for it' ELSE '' END
    END AS summary,
    busy_partition,
    busy_job,
    round(busy_wait_share, 4) AS busy_wait_share,
    round(math_wait_share, 4) AS math_wait_share,
    math_waits,
    busy_top_stall
FROM v
