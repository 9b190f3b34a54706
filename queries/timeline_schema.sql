/*
What `wsperf.collectors.timeline.load_timeline` writes: one row per loaded trace file
(`timelines`) and one per recorded event (`timeline_events`), plus the views
`timeline_intervals` (each begin paired with its end) and `timeline_overlap` (copy/compute
overlap per launch). Applied by the loader before it
writes; every statement is idempotent (CREATE ... IF NOT EXISTS).

Sources: the wsperf trace format (collectors/include/wsperf_trace.cuh, documented in
collectors/trace_format.py: 32-byte records of %globaltimer, SM, CTA, warp, role, event,
phase, stage, seq), and Chrome-trace / Perfetto JSON with per-warp or per-role tracks
(Triton Proton's intra-kernel traces, `wsperf timeline --perfetto` output, a DSL's own
profiler). Times are nanoseconds from the trace's first event. NULL means the source does
not say (a Chrome trace names no SM unless its args or track names do), never zero.

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
    format VARCHAR NOT NULL,          -- 'wsperf-trace' (the binary record format) or 'chrome-trace' (Chrome-trace / Perfetto JSON)
    kernel VARCHAR,                   -- kernel name the trace gives (wsperf header "kernel"; Chrome trace: its metadata or the file name)
    launch_id BIGINT NOT NULL,        -- launches.launch_id the events belong to (see above)
    t0_ns UBIGINT,                    -- absolute time of the first event (wsperf: %globaltimer, ns since the Unix epoch on NVIDIA drivers; Chrome: its ts in ns)
    ctas INTEGER,                     -- CTAs in the grid (wsperf header); NULL for Chrome traces
    cta_stride INTEGER,               -- every cta_stride-th CTA recorded (wsperf header); NULL for Chrome traces
    warps_per_cta INTEGER,            -- warps per CTA the buffer had slots for (wsperf header); NULL for Chrome traces
    slots_per_warp INTEGER,           -- records per warp the buffer held (wsperf header); NULL for Chrome traces
    events BIGINT NOT NULL,           -- rows in timeline_events from this file
    full_warps INTEGER NOT NULL,      -- warps whose slots all filled: later events of those warps were dropped (0 for Chrome traces)
    loaded_at TIMESTAMP NOT NULL      -- UTC time wsperf loaded it
);

CREATE TABLE IF NOT EXISTS timeline_events (
    timeline_id INTEGER NOT NULL,  -- timelines.timeline_id
    launch_id BIGINT NOT NULL,     -- timelines.launch_id, repeated for joins
    t_ns BIGINT NOT NULL,          -- time of the event, ns from the timeline's first event (t0_ns)
    clk UBIGINT,                   -- wsperf: low 32 bits of %clock64 on the recording SM (cycles; orders events of one SM finer than the timer); NULL for Chrome traces
    sm INTEGER,                    -- SM the warp ran on (%smid); NULL when the source does not say
    cta INTEGER NOT NULL,          -- linear CTA index (Chrome: args.cta, else the number after 'CTA' in the process name, else pid)
    warp INTEGER NOT NULL,         -- warp index inside the CTA (Chrome: args.warp, else the number after 'warp' in the thread name, else tid)
    role VARCHAR NOT NULL,         -- 'producer', 'consumer', 'epilogue', 'other' or a user role name from the trace's roles map
    event VARCHAR NOT NULL,        -- 'kernel' (warp lifetime), 'wait' (on a barrier), 'copy' (producer moves a stage), 'compute' (consumer works on a stage), 'epilogue', 'release', or a user event name
    label VARCHAR,                 -- the name the source gave the event when it differs from `event` (a Proton scope such as 'load_x_issue')
    phase VARCHAR NOT NULL,        -- 'begin', 'end' or 'instant'
    stage INTEGER,                 -- ring stage index; NULL: none given
    seq BIGINT NOT NULL            -- iteration / tile counter (pairs a begin with its end; Chrome: ordinal of the event on its track)
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

-- Per launch: how much of the producers' copying runs while consumers compute. A copy
-- overlaps when its midpoint falls inside a compute interval of a consumer warp of the same
-- CTA (compute by any non-producer warp, copies by any non-consumer warp: a trace without
-- roles, all 'other', still counts). One ring stage gives about 0 (copy and compute take
-- turns), four about 1 (fixtures/timeline: ring1 0.000, ring4 0.969). The figure both
-- `pipeline-bubbles` and `serialized-roles` cite. No row for a launch without copies.
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
)
SELECT
    launch_id,                                         -- launches.launch_id
    avg(CASE WHEN hit THEN 1.0 ELSE 0.0 END) AS overlap,  -- share of copy intervals during consumer compute (0..1)
    count(*) AS copy_intervals,                        -- copy intervals measured
    count(DISTINCT (timeline_id, cta)) AS ctas         -- traced CTAs with copies
FROM hits
GROUP BY launch_id;

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
