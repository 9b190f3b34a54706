/*
id: too-few-active-ctas
question: Are too few CTAs (or clusters) resident to keep every SM busy?
evidence:
  - launches.grid_size, cluster_size, sm_count, occupancy_limit_* (LaunchStats, Occupancy)
  - figures.sm_active_cycles / sm_elapsed_cycles: sm__cycles_active.avg / sm__cycles_elapsed.avg (share of the kernel's time an SM had work)
  - launches.elapsed_cycles (gpc__cycles_elapsed.max) as the denominator where the report lacks sm__cycles_elapsed.avg
  - launches.waves_per_sm
threshold:
  min_sm_active: 0.5   # below this share of elapsed cycles with work, SMs sat idle
measured: |
  ws_stream_fewctas (16 CTAs on 132 SMs): sm_active 0.121 (confirmed, limiter grid);
  all others 0.82-0.99: ws_stream_healthy 0.957, gemm_wgmma_tma 0.949, torch_mm 0.951,
  multi_launch reduce_sum (264 CTAs, 0.25 waves) 0.873 (rejected).
  Over gpc__cycles_elapsed.max instead, the same launches read within 0.015 of these
  (ws_stream_fewctas 0.121, gemm_wgmma_tma 0.935, torch_mm 0.942, reduce_sum 0.874).
experiment: >
  Launch at least one CTA (or cluster) per SM, or fit more per SM (fewer registers or less
  shared memory): SM activity should rise above 0.8 (ws_stream_fewctas 0.121 ->
  ws_stream_healthy 0.82 or more). Check with `wsperf compare BEFORE AFTER`.
remedy: >
  Give every SM work: launch at least one CTA (or cluster) per SM, better a persistent grid
  of SMs x CTAs-per-SM that loops over tiles; split K or use smaller tiles when the problem
  has few output tiles; if a resource caps residency (the limiter named here), shrink it
  (shared-memory stages, registers via setmaxnreg or __launch_bounds__) or pick a cluster
  shape that fits the GPCs.
*/
WITH m AS (
    SELECT
        launch_id,
        max(value) FILTER (WHERE figure = 'sm_active_cycles') AS sm_cycles_active,
        max(value) FILTER (WHERE figure = 'sm_elapsed_cycles') AS sm_cycles_elapsed
    FROM figures
    WHERE figure IN ('sm_active_cycles', 'sm_elapsed_cycles')
      AND launch_id IN (SELECT launch_id FROM _wsperf_ids)
    GROUP BY launch_id
),
v AS (
    SELECT
        l.launch_id,
        l.grid_size,
        greatest(l.cluster_size, 1) AS cluster_size,
        l.grid_size // greatest(l.cluster_size, 1) AS clusters,
        l.sm_count,
        least(l.occupancy_limit_blocks, l.occupancy_limit_registers, l.occupancy_limit_shared_mem,
              l.occupancy_limit_warps, l.occupancy_limit_barriers) AS ctas_per_sm,
        l.waves_per_sm,
        -- Reports collected by other people often hold sm__cycles_active.avg but not
        -- sm__cycles_elapsed.avg (ncu's SpeedOfLight section shows "Elapsed Cycles" as
        -- gpc__cycles_elapsed.max; A10G, A40, RTX 2080 Ti and H800 reports seen so).
        -- SMs and GPCs share one clock, so that count stands in for it.
        m.sm_cycles_active / nullif(coalesce(m.sm_cycles_elapsed, l.elapsed_cycles), 0) AS sm_active,
        -- The resource that allows the fewest CTAs per SM (ties: first listed). The SM's CTA
        -- slots come first: a kernel without shared memory reports its shared-memory limit
        -- equal to the slot limit (RTX 2080 Ti, 0 B: 16 and 16), and on a tie with the slots
        -- shrinking the other resource would not fit one more CTA.
        CASE least(l.occupancy_limit_blocks, l.occupancy_limit_registers, l.occupancy_limit_shared_mem,
                   l.occupancy_limit_warps, l.occupancy_limit_barriers)
            WHEN l.occupancy_limit_blocks THEN 'CTA slots'
            WHEN l.occupancy_limit_shared_mem THEN 'shared memory'
            WHEN l.occupancy_limit_registers THEN 'registers'
            WHEN l.occupancy_limit_warps THEN 'warps'
            WHEN l.occupancy_limit_barriers THEN 'barriers'
            -- none known (no Occupancy section): no limiter to name
        END AS occupancy_limiter
    FROM launches AS l
    LEFT JOIN m USING (launch_id)
    -- Only the launches asked about: analyses.hypotheses.evaluate fills _wsperf_ids.
    WHERE l.launch_id IN (SELECT launch_id FROM _wsperf_ids)
)
SELECT
    launch_id,
    CASE
        WHEN grid_size IS NULL OR sm_count IS NULL THEN 'no_data'
        WHEN grid_size < sm_count OR sm_active < $min_sm_active THEN 'confirmed'
        WHEN sm_active IS NULL THEN 'no_data'
        ELSE 'rejected'
    END AS status,
    CASE
        WHEN grid_size IS NULL OR sm_count IS NULL THEN
            'no launch statistics in the report: collect --section LaunchStats --section Occupancy'
        WHEN grid_size < sm_count THEN
            printf('%d CTA%s%s for %d SMs: %d SMs get no work (limiter: grid)',
                   grid_size, CASE WHEN grid_size = 1 THEN '' ELSE 's' END,
                   CASE WHEN cluster_size > 1 THEN printf(' (%d clusters of %d)', clusters, cluster_size) ELSE '' END,
                   sm_count, sm_count - grid_size)
        WHEN sm_active < $min_sm_active THEN
            printf('SMs had work %.0f%% of the time with %d CTAs, %s', 100 * sm_active, grid_size, waves)
        WHEN sm_active IS NULL THEN
            'no SM activity counters in the report: collect --section SpeedOfLight (or --set full)'
        ELSE printf('SMs had work %.0f%% of the time: %d CTAs over %d SMs, %s',
                    100 * sm_active, grid_size, sm_count, waves_at)
    END AS summary,
    grid_size,
    cluster_size,
    clusters,
    sm_count,
    ctas_per_sm,
    occupancy_limiter,
    round(waves_per_sm, 3) AS waves_per_sm,
    round(sm_active, 4) AS sm_active,
    CASE WHEN grid_size < sm_count THEN 'grid' ELSE occupancy_limiter END AS limiter
FROM (
    -- The waves and the limiter where the report has the occupancy figures; said missing
    -- where it does not (a summary is never NULL).
    SELECT *,
           CASE WHEN ctas_per_sm IS NULL OR waves_per_sm IS NULL THEN no_occupancy
                ELSE printf('%.2f waves (limiter: %s, %d CTA%s/SM)', waves_per_sm, coalesce(occupancy_limiter, 'unknown'),
                            ctas_per_sm, CASE WHEN ctas_per_sm = 1 THEN '' ELSE 's' END) END AS waves,
           CASE WHEN ctas_per_sm IS NULL OR waves_per_sm IS NULL THEN no_occupancy
                ELSE printf('%.2f waves at %d CTA%s/SM (%s)', waves_per_sm, ctas_per_sm,
                            CASE WHEN ctas_per_sm = 1 THEN '' ELSE 's' END, coalesce(occupancy_limiter, 'unknown')) END AS waves_at
    FROM v, (SELECT 'no occupancy figures for waves and limiter (collect --section Occupancy)' AS no_occupancy)
) AS v
