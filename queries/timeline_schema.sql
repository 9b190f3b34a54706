/*
What `wsperf.collectors.timeline.load_timeline` writes: one row per loaded trace file
(`timelines`) and one per recorded event (`timeline_events`), plus the views
`timeline_intervals` (each begin paired with its end), `timeline_cut_warps` and
`timeline_truncation` (warps whose later events the buffer dropped, and what that costs)
and `timeline_overlap` (copy/compute overlap per launch). Applied by the loader before it
writes; every statement is idempotent (CREATE ... IF NOT EXISTS).

Sources: the wsperf trace format (collectors/include/wsperf_trace.cuh, documented in
collectors/trace_format.py: 32-byte records of %globaltimer, SM, CTA, warp, role, event,
phase, stage, seq), Chrome-trace / Perfetto JSON and Perfetto protobuf traces with per-warp
or per-role tracks (Triton Proton's intra-kernel traces, `wsperf timeline --perfetto`
output, FlashInfer's profiler through tg4perfetto, a DSL's own profiler; the track rules:
collectors/trace_tracks.py). Times are nanoseconds from the trace's first event. NULL means
the source does not say (a Chrome trace names no SM unless its args or track names do),
never zero.

A timeline belongs to one launch: `launch_id` is the Nsight Compute launch of the same
kernel when `wsperf timeline --report R` matched one, else a launch of the timeline's own
`reports` row (kind 'timeline', launch columns NULL but for the kernel's names, grid and
block size), so the hypotheses run on a timeline alone.
*/

CREATE TABLE IF NOT EXISTS timelines (
    timeline_id INTEGER PRIMARY KEY,  -- wsperf id of the loaded trace file, 1, 2, ... in load order
    path VARCHAR NOT NULL,            -- absolute path the trace was loaded from
    sha256 VARCHAR NOT NULL,          -- hex SHA-256 of the file's bytes
    size_bytes BIGINT NOT NULL,       -- file size (bytes)
    format VARCHAR NOT NULL,          -- 'wsperf-trace' (the binary record format), 'chrome-trace' (Chrome-trace / Perfetto JSON) or 'perfetto-trace' (Perfetto protobuf)
    kernel VARCHAR,                   -- kernel name the trace gives (wsperf header "kernel"; Chrome trace: its metadata or the file name)
    launch_id BIGINT NOT NULL,        -- launches.launch_id the events belong to (see above)
    t0_ns UBIGINT,                    -- absolute time of the first event (wsperf: %globaltimer, ns since the Unix epoch on NVIDIA drivers; Chrome: its ts in ns; Perfetto: its timestamp on the trace's clock)
    ctas INTEGER,                     -- CTAs in the grid (wsperf header); NULL for Chrome and Perfetto traces
    cta_stride INTEGER,               -- every cta_stride-th CTA recorded (wsperf header); NULL for Chrome and Perfetto traces
    warps_per_cta INTEGER,            -- warps per CTA the buffer had slots for (wsperf header); NULL for Chrome and Perfetto traces
    slots_per_warp INTEGER,           -- records per warp the buffer held (wsperf header); NULL for Chrome and Perfetto traces
    events BIGINT NOT NULL,           -- rows in timeline_events from this file
    full_warps INTEGER NOT NULL,      -- warps whose slots all filled before their kernel end: their later events were dropped (timeline_cut_warps; 0 for Chrome traces)
    loaded_at TIMESTAMP NOT NULL      -- UTC time wsperf loaded it
);

CREATE TABLE IF NOT EXISTS timeline_events (
    timeline_id INTEGER NOT NULL,  -- timelines.timeline_id
    launch_id BIGINT NOT NULL,     -- timelines.launch_id, repeated for joins
    t_ns BIGINT NOT NULL,          -- time of the event, ns from the timeline's first event (t0_ns)
    clk UBIGINT,                   -- wsperf: low 32 bits of %clock64 on the recording SM (cycles; orders events of one SM finer than the timer); NULL for Chrome and Perfetto traces
    sm INTEGER,                    -- SM the warp ran on (%smid); NULL when the source does not say
    cta INTEGER NOT NULL,          -- linear CTA index (Chrome, Perfetto: args.cta, else the number after 'CTA' (or 'blk') in the process / parent track names, then the track's own, else block coordinates 'CTA(x, y, z)' numbered in (z, y, x) order, else pid)
    warp INTEGER NOT NULL,         -- warp index inside the CTA (Chrome, Perfetto: args.warp, else the number after 'warp' in the thread or track name (Perfetto: else in the nearest parent track's), else tid)
    role VARCHAR NOT NULL,         -- 'producer', 'consumer', 'epilogue', 'other' or a user role name from the trace's roles map
    event VARCHAR NOT NULL,        -- 'kernel' (warp lifetime), 'wait' (on a barrier), 'copy' (producer moves a stage), 'compute' (consumer works on a stage), 'epilogue', 'release', or a user event name
    label VARCHAR,                 -- the name the source gave the event when it differs from `event` (a Proton scope such as 'load_x_issue')
    phase VARCHAR NOT NULL,        -- 'begin', 'end' or 'instant'
    stage INTEGER,                 -- ring stage index; NULL: none given
    seq BIGINT NOT NULL            -- iteration / tile counter (pairs a begin with its end; Chrome, Perfetto: args.seq, else the ordinal of the event on its track)
);

-- Each begin with its end: the same timeline, CTA, warp, event and seq.
CREATE OR REPLACE VIEW timeline_intervals AS
SELECT
    b.timeline_id,
    b.launch_id,
    b.sm,
    b.cta,
    b.warp,
    b.role,
    b.event,
    b.label,
    b.stage,
    b.seq,
    b.t_ns AS start_ns,          -- begin, ns from the timeline's first event
    e.t_ns AS end_ns,            -- end, ns from the timeline's first event
    e.t_ns - b.t_ns AS dur_ns    -- duration (ns)
FROM timeline_events AS b
JOIN timeline_events AS e
  ON e.timeline_id = b.timeline_id AND e.cta = b.cta AND e.warp = b.warp AND e.event = b.event
 AND e.seq = b.seq AND b.phase = 'begin' AND e.phase = 'end';

-- Warps whose later events were dropped: they filled all slots_per_warp records of their
-- slice of the buffer (wsperf_trace.cuh writes nothing past it) and their last record is not
-- their own `kernel` end. A warp whose last record is its kernel end filled its slots exactly
-- and lost nothing. Nothing after a cut warp's last record is known: not when it waited or
-- worked, not when it exited, so neither the CTA's end. Chrome traces name no buffer: no rows.
-- slots_needed: the records the warp would have written, an estimate, its event rate over
-- the recorded window carried to the kernel's end (the timeline's last recorded event, or
-- the joined Nsight Compute launch's duration where that is later).
CREATE OR REPLACE VIEW timeline_cut_warps AS
WITH w AS (
    SELECT timeline_id, cta, warp, any_value(launch_id) AS launch_id, any_value(role) AS role,
           count(*) AS records, min(t_ns) AS first_ns, max(t_ns) AS last_ns,
           max(t_ns) FILTER (WHERE event = 'kernel' AND phase = 'end') AS exit_ns
    FROM timeline_events GROUP BY timeline_id, cta, warp
),
span AS (SELECT timeline_id, max(t_ns) AS end_ns FROM timeline_events GROUP BY timeline_id)
SELECT
    w.timeline_id,                     -- timelines.timeline_id
    w.launch_id,                       -- timelines.launch_id
    w.cta,                             -- linear CTA index
    w.warp,                            -- warp index inside the CTA
    w.role,                            -- the warp's role
    w.records,                         -- records the warp wrote (= slots_per_warp)
    t.slots_per_warp,                  -- records per warp the buffer held
    w.first_ns,                        -- its first record, ns from the timeline's first event
    w.last_ns,                         -- its last record (ns): the cut, nothing of this warp is known after it
    CAST(ceil(w.records * (greatest(s.end_ns, coalesce(l.duration_ns, 0)) - w.first_ns)
              / nullif(w.last_ns - w.first_ns, 0)) AS BIGINT) AS slots_needed  -- records it would have written (estimate; NULL: one instant)
FROM w
JOIN timelines AS t USING (timeline_id)
JOIN span AS s USING (timeline_id)
LEFT JOIN launches AS l ON l.launch_id = w.launch_id
WHERE w.records >= t.slots_per_warp AND (w.exit_ns IS NULL OR w.exit_ns < w.last_ns);

-- Per timeline with cut warps: how many, where, and the slots per warp that would have
-- sufficed (the largest slots_needed, at least one more than the buffer held, rounded up to
-- a power of two). Without a joined launch's duration, the kernel's end is itself only as
-- late as the last record, so the count is a lower bound ("at least"). `reason` is the
-- sentence every figure left no_data by the cut carries. No row for a complete timeline.
CREATE OR REPLACE VIEW timeline_truncation AS
WITH per_role AS (
    SELECT timeline_id, role,
           role || CASE WHEN count(DISTINCT warp) = 1 THEN ' warp ' ELSE ' warps ' END
                || array_to_string(list_sort(list(DISTINCT warp)), ', ') AS warps_text
    FROM timeline_cut_warps GROUP BY timeline_id, role
),
cut AS (
    SELECT c.timeline_id, any_value(c.launch_id) AS launch_id, count(*) AS cut_warps,
           count(DISTINCT c.cta) AS cut_ctas, any_value(c.slots_per_warp) AS slots_per_warp,
           CAST(2 ** ceil(log2(greatest(coalesce(max(c.slots_needed), 2 * any_value(c.slots_per_warp)),
                                        any_value(c.slots_per_warp) + 1))) AS BIGINT) AS slots_needed,
           bool_and(l.duration_ns IS NULL) AS lower_bound
    FROM timeline_cut_warps AS c LEFT JOIN launches AS l USING (launch_id)
    GROUP BY c.timeline_id
),
traced AS (
    SELECT timeline_id, count(DISTINCT (cta, warp)) AS warps, count(DISTINCT cta) AS ctas
    FROM timeline_events WHERE timeline_id IN (SELECT timeline_id FROM cut) GROUP BY timeline_id
)
SELECT
    c.timeline_id,        -- timelines.timeline_id
    c.launch_id,          -- timelines.launch_id
    c.cut_warps,          -- warps whose later events were dropped
    t.warps,              -- warps traced
    c.cut_ctas,           -- CTAs holding a cut warp
    t.ctas,               -- CTAs traced
    c.slots_per_warp,     -- records per warp the buffer held
    c.slots_needed,       -- records per warp that would have sufficed (estimate, a power of two)
    c.lower_bound,        -- true: no launch duration to carry the rates to, slots_needed is a lower bound
    printf('%d of %d traced warps (%s, in %d of %d CTAs) filled their %d slots before their kernel end, so '
           || 'their later events were dropped and the time after each one''s last record is unknown; '
           || '%s %d slots per warp would have sufficed (estimated from each such warp''s event rate over its '
           || 'recorded window, carried to %s; rounded up to a power of two)',
           c.cut_warps, t.warps, (SELECT string_agg(warps_text, '; ' ORDER BY role) FROM per_role AS r
                                  WHERE r.timeline_id = c.timeline_id),
           c.cut_ctas, t.ctas, c.slots_per_warp, CASE WHEN c.lower_bound THEN 'at least' ELSE 'about' END,
           c.slots_needed,
           CASE WHEN c.lower_bound THEN 'the last recorded event, which the kernel''s end may be past'
                ELSE 'the Nsight Compute launch''s duration' END) AS reason  -- the no_data reason (text)
FROM cut AS c JOIN traced AS t USING (timeline_id);

-- Per launch: how much of the producers' copying runs while consumers compute. A copy
-- overlaps when its midpoint falls inside a compute interval of a consumer warp of the same
-- CTA (compute by any non-producer warp, copies by any non-consumer warp: a trace without
-- roles, all 'other', still counts). One ring stage gives about 0 (copy and compute take
-- turns), four about 1 (fixtures/timeline: ring1 0.000, ring4 0.969). The figure both
-- `pipeline-bubbles` and `serialized-roles` cite. No row for a launch without copies. Where a
-- warp of the launch's timelines was cut (timeline_truncation), the copies and computes after
-- its cut are missing and the overlap is NULL (no_data), with the reason. A launch whose
-- intervals name neither a producer nor a consumer (every role 'other': a Proton trace of a
-- kernel whose warps each copy and then compute) has no roles whose turns it could measure:
-- its overlap is NULL too, and roles_named false.
CREATE OR REPLACE VIEW timeline_overlap AS
WITH copies AS (SELECT * FROM timeline_intervals WHERE event = 'copy' AND role <> 'consumer'),
comp AS (SELECT * FROM timeline_intervals WHERE event = 'compute' AND role <> 'producer'),
hits AS (
    SELECT c.launch_id, c.timeline_id, c.cta, c.warp, c.seq, bool_or(k.cta IS NOT NULL) AS hit
    FROM copies AS c
    LEFT JOIN comp AS k
      ON k.timeline_id = c.timeline_id AND k.cta = c.cta
     AND k.start_ns <= (c.start_ns + c.end_ns) / 2 AND k.end_ns > (c.start_ns + c.end_ns) / 2
    GROUP BY ALL
),
cut AS (
    SELECT launch_id, CAST(sum(cut_warps) AS BIGINT) AS cut_warps, string_agg(reason, '; ' ORDER BY timeline_id) AS reason
    FROM timeline_truncation GROUP BY launch_id
),
named AS (
    SELECT launch_id, bool_or(role IN ('producer', 'consumer')) AS roles_named
    FROM timeline_intervals GROUP BY launch_id
),
o AS (
    SELECT launch_id, avg(CASE WHEN hit THEN 1.0 ELSE 0.0 END) AS overlap, count(*) AS copy_intervals,
           count(DISTINCT (timeline_id, cta)) AS ctas
    FROM hits GROUP BY launch_id
)
SELECT
    o.launch_id,                                            -- launches.launch_id
    CASE WHEN cut.cut_warps IS NULL AND named.roles_named THEN o.overlap END AS overlap,  -- share of copy intervals during consumer compute (0..1); NULL where warps were cut or no role is named
    o.copy_intervals,                                       -- copy intervals measured (recorded ones, where warps were cut)
    o.ctas,                                                 -- traced CTAs with copies
    coalesce(cut.cut_warps, 0) AS cut_warps,                -- warps of the launch's timelines whose later events were dropped
    cut.reason AS cut_reason,                               -- timeline_truncation.reason; NULL: none cut
    coalesce(named.roles_named, false) AS roles_named       -- some interval's role is producer or consumer (else every role is 'other')
FROM o LEFT JOIN cut USING (launch_id) LEFT JOIN named USING (launch_id);

-- Nsight Compute's own time series: each PM-sampled metric holds one instance per sample, and
-- the instance's correlation id is the sample's GPU timestamp. Two namings, both measured on
-- the H200 with ncu 2025.3.1 (fixtures/timeline/pm_probe2.txt):
--   `pmsampling:<metric>`: --section PmSampling_WarpStates (`collect --timeline`), 15 stall
--     reasons with ~300 samples each;
--   `<unit>.TriageCompute.<metric>`: --section PmSampling on a GH100 with a driver >= 560 (the
--     section's CC_90 item), 32 throughput metrics with ~270 samples each. The first sample of
--     each holds correlation id 0 (no timestamp): it has no place in time and is left out.
-- ncu replays the launch once per pass group (5 for WarpStates, 4 for PmSampling there), and
-- each pass samples its own metrics over its own replay, ~130 ms apart in GPU time; so a
-- sample's time is counted from the first sample of its own metric (the metrics of one pass
-- share timestamps), not from the launch's first sample of any pass. The sampler runs a
-- little before and after the kernel: a pass spans 400-480 us for a 125-160 us launch.
-- One row per sample.
CREATE OR REPLACE VIEW pm_samples AS
WITH s AS (
    SELECT launch_id, name, instance, correlation_id, value_double
    FROM metrics
    WHERE (name LIKE 'pmsampling:%' OR regexp_matches(name, '^[A-Z][A-Z0-9_]*\.[A-Za-z]+\.[a-z]'))
      AND instance IS NOT NULL AND correlation_id > 0
)
SELECT
    launch_id,                -- launches.launch_id
    name AS metric,           -- e.g. 'pmsampling:smsp__warps_issue_stalled_long_scoreboard.avg', 'TPC.TriageCompute.sm__cycles_active.avg'
    instance AS sample,       -- the sample's index in ncu's order
    CAST(correlation_id - min(correlation_id) OVER (PARTITION BY launch_id, name) AS BIGINT) AS t_ns,  -- time of the sample from its pass's first sample (ns: the correlation ids are GPU timestamps)
    value_double AS value     -- the metric's value over that sample interval (its unit: metrics.unit)
FROM s;
