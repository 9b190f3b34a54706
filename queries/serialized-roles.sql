/*
id: serialized-roles
question: Do data movement and math take turns instead of overlapping?
evidence:
  - warp-specialized kernels: role_balance, the wait share of both roles (each waits on the other in turn)
  - figures.dram_throughput_pct: gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed (a saturated memory system explains waiting without serialization)
  - other kernels: share of PC samples stalled on long_scoreboard (waiting for loaded data) inside loops
  - mbarrier stages: how many phase-tracked barriers the prologue initializes (SYNCS.EXCH)
  - role timeline, where one is loaded for the launch: timeline_overlap.overlap, the share of producer copy intervals that run during consumer compute (pipeline-bubbles' overlap). It measures the question itself, so it decides the verdict; the PC-sample verdict is kept in the summary
  - partitions - a data partition (a load or store warp) that hardly waits while the roles do: then they wait for it, which partition-bound tests, not for each other
  - cut_warps - timeline_overlap.cut_warps, traced warps whose later events the trace buffer dropped. With any cut the overlap is unknown (NULL): the PC samples decide alone, and the summary says why the timeline could not
optional:
  # Created when a role timeline loads (queries/timeline_schema.sql); the stand-in's columns.
  timeline_overlap: launch_id BIGINT, overlap DOUBLE, copy_intervals BIGINT, cut_warps BIGINT, cut_reason VARCHAR,
    roles_named BOOLEAN
threshold:
  min_consumer_wait_share: 0.10   # consumers wait for each stage
  min_producer_wait_share: 0.30   # and the producer waits for each slot
  max_dram_pct: 70                # above this the waits are the memory system, not the handoff
  min_loop_load_wait_share: 0.50  # non-specialized: share of samples waiting on loads inside loops
  min_role_samples: 50
  max_overlap: 0.5                # timeline: at most half the copies run during consumer compute
  max_shallow_inits: 6            # at most this many mbarriers (3 stages of full + empty): a shallow ring
  min_deep_ring_wait_share: 0.25  # a deeper ring serializes only when its consumers wait at least this much
  max_busy_partition_wait_share: 0.10  # a data partition (no math) waiting at most this: the others wait for it instead
  min_partition_samples: 50
measured: |
  warp-specialized, confirmed: ws_stream_serialized (1 stage, 3 CTAs/SM) consumer 0.145 / producer 0.532, DRAM 31.8%;
            ws_stream_serialized1 (1 stage, 1 CTA/SM) 0.140 / 0.529, DRAM 12.6%.
  rejected: ws_stream_healthy1 (4 stages, 1 CTA/SM: serialized1's control) 0.007 / 0.520;
            ws_stream_healthy (4 stages) 0.016 / 0.537; ws_stream_consumer 0.001 / 0.552;
            ws_stream_spill 0.094 / 0.548; ws_stream_producer 0.874 / 0.001; gemm_wgmma_cpasync 0.389 / 0.047;
            torch_mm (cuBLAS) 0.010 / 0.004.
  ring depth on one kernel (gemm_wgmma_tma, fixtures/collect_gemm_stages.sh: GEMM_STAGES 2, 4, 6;
            fixtures/reports/gemm_stages.times.txt, 5 launches each): 2 stages 0.486 / 0.740, 331-333 us
            (confirmed); 4 stages 0.188 / 0.552, 221-223 us, and 6 stages 0.148 / 0.487, 217-221 us (both
            rejected: two more stages gained 2%, so waits under min_deep_ring_wait_share in a ring deeper
            than max_shallow_inits barriers are not its depth). Wait sites follow the phase check's
            predicate to its branch: a hoisted check (the branch 9 instructions later in this kernel) had
            its waiting samples missed, and the 2-stage build read 0.026, rejected.
  Triton 3.6's own warp specialization (triton_ws_matmul*, the ring depth alone changed):
            2 stages 0.46 / 0.78 (332 us) and 3 stages (Triton's default) 0.27 / 0.62 (262 us) confirmed;
            4 stages 0.22 / 0.59 (227 us) under the deep-ring share, rejected; its consumers release a
            stage only after their wgmma completes. No build decides 4 stages (5 and more give wrong
            answers): it is no case.
  not specialized: multi_launch reduce_sum (one load then one add per trip) 0.885 of samples wait on
            loads inside loops, DRAM 12.8% (confirmed); saxpy 0.0 (no loop), transpose_naive 0.0 (unrolled),
            gemm_ffma 0.322, triton_matmul 0.090 (rejected).
  role timeline (fixtures/timeline, H200, `wsperf timeline TRACE --report R`): ring1 (1 stage) overlap
            0.000 of 704 copies (confirmed; joined to ring_pcsamp.ncu-rep's ring_kernel<1, true, false>, whose
            PC samples alone say rejected: the role recovery finds no producer path in its ld/st-fed ring and
            calls it not warp-specialized); ring4 (4 stages) 0.969 (rejected; joined to ring_pm.ncu-rep's
            ring_kernel<4, true, false>, no PC samples there: no_data without the timeline).
experiment: >
  Deepen the ring from 1 stage to 4 (or prefetch the next tile before computing on this
  one): the consumer mbarrier-wait share should fall below 0.05 (ws_stream_serialized
  0.145 -> ws_stream_healthy 0.016) and the duration by about 10% (fixtures/compare:
  161-164 us -> 144-145 us). Check with `wsperf compare BEFORE AFTER`. On a role timeline
  the copy/compute overlap should rise above 0.5 (ring1 0.000 -> ring4 0.969).
remedy: >
  Overlap copy and compute: give the ring enough stages to cover a load's latency (at
  least two; more when a stage's math is short: Triton's num_stages, CUTLASS's stage
  count; Triton's warp-specialized matmul ran 332, 262, 227 us at 2, 3, 4), wait on
  the empty barrier of the slot you are about to fill (parity flips once per lap), and
  release a stage as soon as its last read is done (arrive on empty before the epilogue,
  not after). Without specialization: prefetch the next tile (cp.async / TMA or register
  double-buffering) before computing on the current one, and unroll loads ahead of use.
*/
WITH loads AS (
    SELECT
        p.launch_id,
        coalesce(sum(st.samples) FILTER (WHERE p.in_loop AND st.reason = 'long_scoreboard'), 0)
            / nullif(sum(st.samples), 0) AS loop_load_wait_share
    FROM role_pcs AS p
    JOIN stalls AS st USING (launch_id, pc)
    WHERE p.launch_id IN (SELECT launch_id FROM _wsperf_ids)
    GROUP BY p.launch_id
),
stages AS (
    -- mbarrier.init compiles to SYNCS.EXCH.64; full and empty barriers per stage.
    SELECT launch_id, count(*) AS mbarrier_inits
    FROM sass
    WHERE opcode_full LIKE 'SYNCS.EXCH%' AND launch_id IN (SELECT launch_id FROM _wsperf_ids)
    GROUP BY launch_id
),
m AS (
    SELECT launch_id, max(value) AS dram_pct
    FROM figures
    WHERE figure = 'dram_throughput_pct'
      AND launch_id IN (SELECT launch_id FROM _wsperf_ids)
    GROUP BY launch_id
),
-- A data partition (a load or store warp: no math in its job) that hardly waits: the others
-- wait for it (partition-bound), not for each other in turn.
busy AS (
    SELECT launch_id, arg_min(warp_partition, wait_share) AS busy_partition, min(wait_share) AS busy_wait_share
    FROM partitions
    WHERE launch_id IN (SELECT launch_id FROM _wsperf_ids)
      AND job IS NOT NULL AND job <> 'none' AND coalesce(samples, 0) >= $min_partition_samples
      AND NOT (job LIKE '%MMA issue%' OR job LIKE '%FMA math%' OR job LIKE '%softmax%' OR job LIKE '%correction%')
    GROUP BY launch_id
),
-- The role timeline's copy/compute overlap (an empty stand-in while no timeline is loaded).
tl AS (
    SELECT launch_id, overlap, copy_intervals, cut_warps, cut_reason, roles_named FROM timeline_overlap
    WHERE launch_id IN (SELECT launch_id FROM _wsperf_ids)
),
v AS (
    SELECT l.launch_id, w.warp_specialized, r.*, ld.loop_load_wait_share, m.dram_pct,
           coalesce(s.mbarrier_inits, 0) AS mbarrier_inits, tl.overlap, tl.copy_intervals, tl.cut_warps, tl.cut_reason,
           tl.roles_named,
           b.busy_partition, b.busy_wait_share
    FROM launches AS l
    LEFT JOIN warp_specialization AS w USING (launch_id)
    LEFT JOIN role_balance AS r USING (launch_id)
    LEFT JOIN loads AS ld USING (launch_id)
    LEFT JOIN m USING (launch_id)
    LEFT JOIN stages AS s USING (launch_id)
    LEFT JOIN tl USING (launch_id)
    LEFT JOIN busy AS b USING (launch_id)
    -- Only the launches asked about: analyses.hypotheses.evaluate fills _wsperf_ids.
    WHERE l.launch_id IN (SELECT launch_id FROM _wsperf_ids)
),
-- What the PC-sample aggregate says on its own.
pc AS (
    SELECT *,
    CASE
        WHEN warp_specialized IS NULL THEN 'no_data'
        WHEN warp_specialized AND (coalesce(consumer_samples, 0) < $min_role_samples
                                   OR coalesce(producer_samples, 0) < $min_role_samples) THEN 'no_data'
        WHEN warp_specialized AND (consumer_wait_share < $min_consumer_wait_share
                                   OR producer_wait_share < $min_producer_wait_share) THEN 'rejected'
        -- A ring of 4 stages or more whose consumers wait modestly: a deeper ring does not
        -- remove those waits (gemm_wgmma_tma, 4 -> 6 stages: 222 -> 218 us).
        WHEN warp_specialized AND mbarrier_inits > $max_shallow_inits
         AND consumer_wait_share < $min_deep_ring_wait_share THEN 'rejected'
        WHEN warp_specialized AND busy_wait_share <= $max_busy_partition_wait_share THEN 'rejected'
        WHEN NOT warp_specialized AND loop_load_wait_share IS NULL THEN 'no_data'
        WHEN NOT warp_specialized AND loop_load_wait_share < $min_loop_load_wait_share THEN 'rejected'
        -- The waits point at serialization; only a saturated memory system explains them
        -- otherwise, and without the DRAM figure that cannot be ruled out.
        WHEN dram_pct IS NULL THEN 'no_data'
        WHEN dram_pct < $max_dram_pct THEN 'confirmed'
        ELSE 'rejected'
    END AS pc_status,
    CASE
        WHEN warp_specialized IS NULL THEN
            'no SASS-level counters in the report: collect --section SourceCounters (or --set full) with PC sampling'
        WHEN warp_specialized AND (coalesce(consumer_samples, 0) < $min_role_samples
                                   OR coalesce(producer_samples, 0) < $min_role_samples) THEN
            'too few PC samples per role: profile a longer launch'
        WHEN NOT warp_specialized AND loop_load_wait_share IS NULL THEN
            'no PC-sampling stall data in the report: collect --section SourceCounters (or --set full)'
        ELSE concat(
            CASE WHEN warp_specialized
                 THEN printf('consumers wait for data %.0f%% and the producer for free slots %.0f%% of their samples, %d mbarriers initialized',
                             100 * consumer_wait_share, 100 * producer_wait_share, mbarrier_inits)
                      || CASE WHEN mbarrier_inits > $max_shallow_inits AND consumer_wait_share < $min_deep_ring_wait_share
                               AND consumer_wait_share >= $min_consumer_wait_share AND producer_wait_share >= $min_producer_wait_share
                              THEN printf(' (a ring deeper than %d barriers: waits under %.0f%% are not its depth)',
                                          $max_shallow_inits, 100 * $min_deep_ring_wait_share)
                              ELSE '' END
                      || CASE WHEN busy_wait_share <= $max_busy_partition_wait_share
                              THEN printf('; %s waits only %.1f%%: the others wait for it (partition-bound), not for each other',
                                          busy_partition, 100 * busy_wait_share)
                              ELSE '' END
                 ELSE printf('not warp-specialized; %.0f%% of samples wait on loaded data inside loops', 100 * loop_load_wait_share)
            END,
            CASE WHEN dram_pct IS NULL
                 THEN '; DRAM throughput unknown: collect --section SpeedOfLight (or --metrics gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed)'
                 ELSE printf(', DRAM at %.0f%% of peak', dram_pct)
            END)
    END AS pc_summary
    FROM v
)
SELECT
    launch_id,
    -- A role timeline sees the turns themselves: where one is loaded, its overlap decides.
    CASE WHEN overlap IS NULL THEN pc_status
         WHEN overlap <= $max_overlap THEN 'confirmed'
         ELSE 'rejected'
    END AS status,
    CASE WHEN overlap IS NULL AND cut_warps > 0
             THEN pc_summary || '; the role timeline cannot say (no overlap past a cut warp''s last record): ' || cut_reason
         WHEN overlap IS NULL AND roles_named = false
             THEN pc_summary || '; the role timeline cannot say: it names no producer or consumer (every event''s role '
                  || 'is ''other''), so its copies and computes are not two roles taking turns'
         WHEN overlap IS NULL THEN pc_summary
         ELSE printf('the role timeline shows copy and compute %s: %.0f%% of %d producer copies run during consumer compute',
                     CASE WHEN overlap <= $max_overlap THEN 'taking turns' ELSE 'overlapping' END,
                     100 * overlap, copy_intervals)
              || '; PC samples alone: ' || pc_status || ' - ' || pc_summary
    END AS summary,
    warp_specialized,
    round(consumer_wait_share, 4) AS consumer_wait_share,
    round(producer_wait_share, 4) AS producer_wait_share,
    round(loop_load_wait_share, 4) AS loop_load_wait_share,
    round(dram_pct, 2) AS dram_pct,
    mbarrier_inits,
    round(overlap, 4) AS overlap,
    copy_intervals,
    cut_warps
FROM pc
