/*
id: pipeline-bubbles
question: Where in the kernel do the consumers sit idle - filling the ring, between stages, or draining after the loop?
evidence:
  - timeline_events / timeline_intervals (wsperf_trace.cuh records, or a Chrome / Proton trace) per CTA
  - prologue_share - CTA start to the first consumer compute, as a share of the CTA's time (mean over CTAs)
  - steady_idle_share - per consumer warp, the gaps between consecutive compute intervals over the span from its first compute to its last (mean over warps)
  - epilogue_share - last consumer compute to CTA exit (the CTA's last event), as a share of the CTA's time
  - overlap - timeline_overlap: share of producer copy intervals whose midpoint falls inside a consumer compute interval of the same CTA (a steady-state bubble needs idle consumers and copies that do not overlap compute)
  - cut_warps, slots_per_warp, slots_needed - timeline_truncation: traced warps that filled their slots before their kernel end. Every share above runs to the CTA's end, which lies past a cut warp's last record, so with any warp cut the verdict is no_data (its reason names the warps and the slots per warp that would have sufficed) and the shares are left out
  - roles_named - some interval's role is producer or consumer. A trace whose every event is 'other' (Proton's trace of fixtures/timeline/proton_staged.chrome_trace, whose warps each copy and then compute) cannot tell idle consumers or producer copies: no_data
requires: [timeline_events, timeline_overlap, timeline_truncation]
missing: >
  no role timeline in the store: collect one with the wsperf_trace.cuh macros (build with
  `wsperf trace-include`) or a Proton / Chrome trace, then `wsperf timeline TRACE --report R`
threshold:
  min_prologue_share: 0.25     # a quarter of the CTA before the first tile is computed
  min_steady_idle_share: 0.10  # consumers idle 10% of the loop between tiles
  max_overlap: 0.5             # ... while at most half the copies run during compute (they take turns)
  min_epilogue_share: 0.25     # a quarter of the CTA after the last tile
measured: |
  H200 fixtures (fixtures/timeline, fixtures/src/timeline/ring.cu; 132 CTAs, every 6th traced, 32 tiles of 8 KB,
  256 FMAs per value per tile); measured figures: `wsperf timeline TRACE -f json` on each trace in fixtures/timeline.
  confirmed: ring1 (1 stage: copy and compute take turns) steady idle 0.131, overlap 0.000 (22 CTAs);
             epilogue (ring4 + a 40000-FMA serial chain per consumer warp) epilogue share 0.451.
  rejected:  ring4 (4 stages: the producer runs ahead) steady idle 0.060, overlap 0.969; prologue shares
             0.004-0.008 everywhere. Idle alone separates ring1 from ring4 by 2.2x; the overlap (0.00 vs 0.97)
             is what says the idle is the handoff's, so both must hold.
  Cost: the plain builds take 101.8 us (ring1) and 103.0 us (ring4) (bench.jsonl, median of 200): with
  several CTAs per SM, other CTAs fill ring1's bubbles, so a confirmed steady-state bubble costs duration
  only where the SM has nothing else to run. Tracing cost: begin/end around every copy, wait and compute
  adds 13.8% to ring1 and 4.7% to ring4; one instant event per stage per role adds +2.3% (ring1) and
  -0.2% (ring4).
experiment: >
  Deepen the ring (1 -> 4 stages) for a steady-state bubble, issue the first stages'
  copies before any other setup for a prologue bubble, overlap or shorten the drain for an
  epilogue bubble (persistent CTAs start the next tile's loads during the epilogue): the
  share named by `bubble` should fall below its threshold (ring1 -> ring4 on the fixtures).
remedy: >
  Steady-state bubbles: more ring stages, release each stage as soon as its last read is
  done, and make the producer wait only on the slot it fills next. Prologue: issue the first
  STAGES copies right after barrier init (hoist address math and descriptor prefetch).
  Epilogue: overlap the drain with the next tile's mainloop (persistent kernel, a separate
  epilogue warpgroup, TMA stores) or shorten its serial chain.
*/
WITH ev AS (
    SELECT * FROM timeline_events WHERE launch_id IN (SELECT launch_id FROM _wsperf_ids)
),
iv AS (
    SELECT * FROM timeline_intervals WHERE launch_id IN (SELECT launch_id FROM _wsperf_ids)
),
-- Compute by any non-producer warp; a trace that names no role at all is no_data (below).
comp AS (SELECT * FROM iv WHERE event = 'compute' AND role <> 'producer'),
-- The copy/compute overlap: the view serialized-roles cites too (queries/timeline_schema.sql).
overlap AS (
    SELECT launch_id, overlap, copy_intervals FROM timeline_overlap
    WHERE launch_id IN (SELECT launch_id FROM _wsperf_ids)
),
-- Warps whose later events were dropped (queries/timeline_schema.sql).
cut AS (
    SELECT launch_id, CAST(sum(cut_warps) AS BIGINT) AS cut_warps, max(slots_per_warp) AS slots_per_warp,
           max(slots_needed) AS slots_needed, string_agg(reason, '; ' ORDER BY timeline_id) AS reason
    FROM timeline_truncation WHERE launch_id IN (SELECT launch_id FROM _wsperf_ids)
    GROUP BY launch_id
),
cta AS (
    SELECT launch_id, timeline_id, cta, min(t_ns) AS t_start, max(t_ns) AS t_end
    FROM ev GROUP BY ALL
),
cta_comp AS (
    SELECT launch_id, timeline_id, cta, min(start_ns) AS first_compute, max(end_ns) AS last_compute,
           count(DISTINCT stage) AS stages
    FROM comp GROUP BY ALL
),
per_cta AS (
    SELECT c.launch_id,
           (k.first_compute - c.t_start) / nullif(c.t_end - c.t_start, 0) AS prologue_share,
           (c.t_end - k.last_compute) / nullif(c.t_end - c.t_start, 0) AS epilogue_share,
           c.t_end - c.t_start AS cta_ns,
           k.stages
    FROM cta AS c JOIN cta_comp AS k USING (launch_id, timeline_id, cta)
),
gaps AS (
    SELECT launch_id, timeline_id, cta, warp, start_ns, end_ns,
           start_ns - lag(end_ns) OVER (PARTITION BY timeline_id, cta, warp ORDER BY start_ns) AS gap_ns
    FROM comp
),
per_warp AS (
    SELECT launch_id, sum(greatest(coalesce(gap_ns, 0), 0)) / nullif(max(end_ns) - min(start_ns), 0) AS idle_share
    FROM gaps GROUP BY launch_id, timeline_id, cta, warp
),
m AS (
    SELECT launch_id, avg(prologue_share) AS prologue_share, avg(epilogue_share) AS epilogue_share,
           count(*) AS ctas, median(cta_ns) AS cta_ns, max(stages) AS stages
    FROM per_cta GROUP BY launch_id
),
v AS (
    SELECT l.launch_id,
           (SELECT count(*) FROM ev WHERE ev.launch_id = l.launch_id) AS events,
           m.prologue_share, m.epilogue_share, m.ctas, m.cta_ns, m.stages,
           (SELECT avg(idle_share) FROM per_warp AS w WHERE w.launch_id = l.launch_id) AS steady_idle_share,
           o.overlap, coalesce(o.copy_intervals, 0) AS copy_intervals,
           coalesce(k.cut_warps, 0) AS cut_warps, k.slots_per_warp, k.slots_needed, k.reason AS cut_reason,
           coalesce((SELECT bool_or(role IN ('producer', 'consumer')) FROM iv WHERE iv.launch_id = l.launch_id), false)
               AS roles_named
    FROM launches AS l
    LEFT JOIN m USING (launch_id)
    LEFT JOIN overlap AS o USING (launch_id)
    LEFT JOIN cut AS k USING (launch_id)
    WHERE l.launch_id IN (SELECT launch_id FROM _wsperf_ids)
),
r AS (
    SELECT *,
           -- The bubble furthest past (or closest to) its threshold.
           CASE greatest(prologue_share / $min_prologue_share, coalesce(steady_idle_share, 0) / $min_steady_idle_share,
                         epilogue_share / $min_epilogue_share)
               WHEN prologue_share / $min_prologue_share THEN 'prologue'
               WHEN epilogue_share / $min_epilogue_share THEN 'epilogue'
               ELSE 'steady-state'
           END AS bubble
    FROM v
)
SELECT
    launch_id,
    CASE
        WHEN events = 0 OR prologue_share IS NULL OR cut_warps > 0 OR NOT roles_named THEN 'no_data'
        WHEN prologue_share >= $min_prologue_share OR epilogue_share >= $min_epilogue_share
             OR (steady_idle_share >= $min_steady_idle_share AND coalesce(overlap, 0) <= $max_overlap)
            THEN 'confirmed'
        ELSE 'rejected'
    END AS status,
    CASE
        WHEN events = 0 THEN
            'no role timeline for this launch: collect one with the wsperf_trace.cuh macros (`wsperf trace-include`) '
            || 'and load it with `wsperf timeline TRACE --report R`'
        WHEN cut_warps > 0 THEN
            'no shares past a cut warp''s last record: ' || cut_reason
            || '; trace again with that many (wsperf_trace_alloc''s slots_per_warp)'
        WHEN NOT roles_named THEN
            'the timeline names no roles (every event''s role is ''other''): consumers idle and producer copies need '
            || 'warps marked as producer or consumer (WSPERF_ROLE_* in wsperf_trace.cuh, or a role word in a Chrome '
            || 'trace''s track or event names)'
        WHEN prologue_share IS NULL THEN
            'the timeline has no consumer compute intervals: collect WSPERF_BEGIN/WSPERF_END around WSPERF_EV_COMPUTE in the consumer warps'
        ELSE printf('prologue %.0f%%, consumers idle %.0f%% between stages, epilogue %.0f%% of the CTA; '
                    || '%.0f%% of producer copies run during consumer compute (%d CTAs traced, median %.1f us)',
                    100 * prologue_share, 100 * coalesce(steady_idle_share, 0), 100 * epilogue_share,
                    100 * coalesce(overlap, 0), ctas, cta_ns / 1000.0)
    END AS summary,
    -- A cut warp leaves every share unknown: none is shown (the CTA's end is past the cut).
    CASE WHEN prologue_share IS NULL OR cut_warps > 0 OR NOT roles_named THEN NULL ELSE bubble END AS bubble,
    CASE WHEN cut_warps = 0 AND roles_named THEN round(prologue_share, 4) END AS prologue_share,
    CASE WHEN cut_warps = 0 AND roles_named THEN round(steady_idle_share, 4) END AS steady_idle_share,
    CASE WHEN cut_warps = 0 AND roles_named THEN round(epilogue_share, 4) END AS epilogue_share,
    round(overlap, 4) AS overlap,
    copy_intervals,
    ctas,
    stages,
    cut_warps,
    slots_per_warp,
    slots_needed
FROM r
