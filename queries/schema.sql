/*
The wsperf store: what `wsperf.collectors.ncu.load_report` writes, one row per thing an
Nsight Compute report holds. Applied by `wsperf.collectors.store.open_store` on every
open; every statement is idempotent (CREATE ... IF NOT EXISTS).

Ids: `report_id` and `launch_id` are wsperf's own, allocated on load as max + 1, so a
persisted store keeps growing across sessions. A report is identified by the SHA-256 of
its bytes: loading the same content again (under any path) adds nothing.

Sources: every value comes from NVIDIA's `ncu_report` module (PyPI `ncu-report`), never
from ncu's text output. Metric names are Nsight Compute's (`launch__grid_dim_x`,
`smsp__pcsamp_warps_issue_stalled_long_scoreboard`, ...); a column that is NULL means the
report does not hold that metric (not collected by the sections used), never zero.

Only `reports` and `launches` carry keys; the large tables are plain (no index to
maintain on bulk load) and join on `launch_id`.
*/

CREATE TABLE IF NOT EXISTS wsperf_meta (
    key VARCHAR PRIMARY KEY,  -- setting name; 'schema_version' is the layout of these tables
    value VARCHAR NOT NULL    -- its value, as text
);

CREATE TABLE IF NOT EXISTS reports (
    report_id INTEGER PRIMARY KEY,   -- wsperf id of the report, 1, 2, ... in load order
    path VARCHAR NOT NULL,           -- absolute path the report was first loaded from
    sha256 VARCHAR NOT NULL UNIQUE,  -- hex SHA-256 of the file's bytes: its identity in the store
    size_bytes BIGINT NOT NULL,      -- file size (bytes)
    ncu_version VARCHAR,             -- version of the ncu that collected it; NULL: ncu_report does not expose it (see the fixture's provenance.json)
    reader_version VARCHAR,          -- version of the ncu_report module that read it, e.g. '2026.3.1'
    collected_at TIMESTAMP,          -- UTC start of the earliest profiled launch (GPU global timer, ns since the Unix epoch, in profiler__timestamp_workload_start_*); NULL when absent
    device_name VARCHAR,             -- device__attribute_display_name of the first launch, e.g. 'NVIDIA H200'
    compute_capability VARCHAR,      -- 'major.minor' from device__attribute_compute_capability_major/_minor, e.g. '9.0'
    arch VARCHAR,                    -- 'sm_' || major || minor, e.g. 'sm_90' (the device, not the cubin's sm_90a)
    num_launches INTEGER NOT NULL,   -- profiled results (ncu actions) in the report, over all ranges
    loaded_at TIMESTAMP NOT NULL,    -- UTC time wsperf loaded it
    kind VARCHAR DEFAULT 'ncu'       -- 'ncu': a profile; 'static': SASS from `wsperf inspect` (no device, no counters, reader_version is the cuobjdump's)
);
-- Stores written before `kind` existed gain it here (their reports are all profiles).
ALTER TABLE reports ADD COLUMN IF NOT EXISTS kind VARCHAR DEFAULT 'ncu';

CREATE TABLE IF NOT EXISTS launches (
    launch_id BIGINT PRIMARY KEY,        -- wsperf id of the profiled launch (one ncu action)
    report_id INTEGER NOT NULL,          -- reports.report_id
    range_idx INTEGER NOT NULL,          -- index of the ncu range (IContext.range_by_idx), 0-based
    action_idx INTEGER NOT NULL,         -- index of the action within its range (IRange.action_by_idx), 0-based
    kernel_mangled VARCHAR,              -- IAction.name(NameBase_MANGLED), e.g. '_Z5saxpyifPKfPf'
    kernel_demangled VARCHAR,            -- IAction.name(NameBase_DEMANGLED), e.g. 'saxpy(int, float, const float *, float *)'
    kernel_function VARCHAR,             -- IAction.name(NameBase_FUNCTION), e.g. 'saxpy'
    workload_type VARCHAR,               -- 'kernel', 'range', 'graph', 'cmdlist' or 'subgrid_schedule' (IAction.workload_type)
    device_id INTEGER,                   -- launch__device_id: CUDA device ordinal
    stream_id BIGINT,                    -- launch__stream_id
    grid_x BIGINT,                       -- launch__grid_dim_x (CTAs)
    grid_y BIGINT,                       -- launch__grid_dim_y (CTAs)
    grid_z BIGINT,                       -- launch__grid_dim_z (CTAs)
    block_x INTEGER,                     -- launch__block_dim_x (threads)
    block_y INTEGER,                     -- launch__block_dim_y (threads)
    block_z INTEGER,                     -- launch__block_dim_z (threads)
    cluster_x INTEGER,                   -- launch__cluster_dim_x (CTAs); 0 when the launch has no cluster (ncu reports 0, not 1)
    cluster_y INTEGER,                   -- launch__cluster_dim_y (CTAs); 0 without a cluster
    cluster_z INTEGER,                   -- launch__cluster_dim_z (CTAs); 0 without a cluster
    cluster_size INTEGER,                -- launch__cluster_size: CTAs per cluster; 0 without a cluster
    grid_size BIGINT,                    -- launch__grid_size: CTAs in the grid
    block_size INTEGER,                  -- launch__block_size: threads per CTA
    threads BIGINT,                      -- launch__thread_count: threads in the grid
    registers_per_thread INTEGER,        -- launch__registers_per_thread (registers)
    static_smem_bytes BIGINT,            -- launch__shared_mem_per_block_static (bytes per CTA)
    dynamic_smem_bytes BIGINT,           -- launch__shared_mem_per_block_dynamic (bytes per CTA)
    smem_config_bytes BIGINT,            -- launch__shared_mem_config_size: shared-memory carve-out per SM (bytes)
    sm_count INTEGER,                    -- device__attribute_multiprocessor_count (SMs)
    waves_per_sm DOUBLE,                 -- launch__waves_per_multiprocessor (waves)
    occupancy_limit_blocks INTEGER,      -- launch__occupancy_limit_blocks: CTAs per SM allowed by the CTA-slot limit
    occupancy_limit_registers INTEGER,   -- launch__occupancy_limit_registers: CTAs per SM allowed by registers
    occupancy_limit_shared_mem INTEGER,  -- launch__occupancy_limit_shared_mem: CTAs per SM allowed by shared memory
    occupancy_limit_warps INTEGER,       -- launch__occupancy_limit_warps: CTAs per SM allowed by warp slots
    occupancy_limit_barriers INTEGER,    -- launch__occupancy_limit_barriers: CTAs per SM allowed by named barriers
    theoretical_occupancy_pct DOUBLE,    -- sm__maximum_warps_per_active_cycle_pct (% of the SM's warp slots)
    achieved_occupancy_pct DOUBLE,       -- sm__warps_active.avg.pct_of_peak_sustained_active (% of the SM's warp slots)
    elapsed_cycles DOUBLE,               -- gpc__cycles_elapsed.max (cycles)
    duration_ns DOUBLE,                  -- gpu__time_duration.sum converted to nanoseconds (ns)
    num_metrics INTEGER NOT NULL         -- metrics the report holds for the launch (aggregate rows in `metrics`)
);

CREATE TABLE IF NOT EXISTS metrics (
    launch_id BIGINT NOT NULL,  -- launches.launch_id
    name VARCHAR NOT NULL,      -- Nsight Compute metric name, e.g. 'gpu__time_duration.sum'
    instance INTEGER,           -- NULL: the metric's aggregate value; 0..n-1: its n instance values, in ncu's order
    correlation_id UBIGINT,     -- numeric correlation id of the instance: for per-PC (source counter) metrics the PC (virtual address); NULL on aggregate rows and for text ids
    correlation_name VARCHAR,   -- text correlation id of the instance, e.g. the opcode 'HGMMA' of sass__inst_executed_per_opcode
    value_double DOUBLE,        -- numeric value (integers as DOUBLE); NULL for text values and for metrics the report holds without a value
    value_string VARCHAR,       -- text value (e.g. device__attribute_display_name); NULL for numeric values
    unit VARCHAR,               -- ncu's unit of the value, e.g. 'ns', 'byte', 'inst', '%'; '' when unitless; NULL
                                -- (but gpu__time_duration.sum's) in the in-memory store of `analyze` / `chart`
                                -- without --db, whose output never shows one (collectors/ncu_reader.py, _Reader)
    metric_type VARCHAR         -- 'counter', 'ratio', 'throughput' or 'other' (IMetric.metric_type)
);

CREATE TABLE IF NOT EXISTS sass (
    launch_id BIGINT NOT NULL,        -- launches.launch_id
    pc UBIGINT NOT NULL,              -- instruction address (virtual address, bytes): a correlation id of the per-PC metrics
    function_pc UBIGINT,              -- start address of the function holding the instruction (launch__function_pcs; else the lowest PC seen)
    func_offset BIGINT,               -- pc - function_pc (bytes); what ncu-ui's Source page shows as the address offset
    opcode VARCHAR,                   -- base mnemonic without guard and modifiers, e.g. 'HGMMA', 'SYNCS', 'LDG'
    opcode_full VARCHAR,              -- mnemonic with its dotted modifiers, e.g. 'SYNCS.PHASECHK.TRANS64.TRYWAIT'
    guard VARCHAR,                    -- guard predicate, e.g. '@!P0'; NULL when unguarded
    sass VARCHAR,                     -- the instruction as IAction.sass_by_pc returns it
    inst_executed BIGINT,             -- inst_executed at this PC (warp-level instructions); 0 when not executed, NULL when not collected
    thread_inst_executed BIGINT,      -- thread_inst_executed at this PC (thread-level instructions); NULL when not collected
    thread_inst_executed_true BIGINT, -- thread_inst_executed_true at this PC (thread-level, predicate true); NULL when not collected
    pcsamp_samples BIGINT,            -- smsp__pcsamp_sample_count at this PC (warp samples); NULL when not collected
    pcsamp_samples_not_issued BIGINT, -- sum over reasons of smsp__pcsamp_warps_issue_stalled_*_not_issued at this PC (samples in which no warp issued); NULL when not collected
    source_file VARCHAR,              -- IAction.source_info(pc).file_name(); NULL without line info (-lineinfo)
    source_line INTEGER               -- IAction.source_info(pc).line(); NULL without line info
);

CREATE TABLE IF NOT EXISTS stalls (
    launch_id BIGINT NOT NULL,         -- launches.launch_id
    pc UBIGINT NOT NULL,               -- sass.pc of the sampled instruction
    reason VARCHAR NOT NULL,           -- suffix of smsp__pcsamp_warps_issue_stalled_<reason>, e.g. 'long_scoreboard', 'barrier', 'selected'
    samples BIGINT NOT NULL,           -- smsp__pcsamp_warps_issue_stalled_<reason> at this PC (warp samples)
    samples_not_issued BIGINT NOT NULL -- smsp__pcsamp_warps_issue_stalled_<reason>_not_issued at this PC (samples in which no warp issued); rows where both counts are 0 are left out
);

CREATE TABLE IF NOT EXISTS opcodes (
    launch_id BIGINT NOT NULL,  -- launches.launch_id
    opcode VARCHAR NOT NULL,    -- base SASS mnemonic, e.g. 'HGMMA' (the correlation id of sass__inst_executed_per_opcode)
    executed BIGINT NOT NULL,   -- warp-level instructions executed with this opcode (inst)
    thread_executed BIGINT,     -- thread-level instructions executed with predicate true (sass__thread_inst_executed_true_per_opcode); NULL when absent
    source VARCHAR NOT NULL     -- 'ncu': from sass__inst_executed_per_opcode (InstructionStats); 'sass': summed from sass.inst_executed when ncu's metric is absent
);

CREATE TABLE IF NOT EXISTS ncu_rules (
    launch_id BIGINT NOT NULL,  -- launches.launch_id
    rule_idx INTEGER NOT NULL,  -- position of the result in IAction.rule_results(), 0-based
    rule_id VARCHAR NOT NULL,   -- rule identifier, e.g. 'CPIStall'
    section_id VARCHAR,         -- section the rule belongs to, e.g. 'WarpStateStats'
    name VARCHAR,               -- rule name, e.g. 'Warp Stall'
    title VARCHAR,              -- message title ('' when the rule gave none)
    message VARCHAR,            -- message text, with ncu's @section:/@url: link markup kept
    msg_type VARCHAR,           -- 'none', 'ok', 'optimization', 'warning' or 'error'
    speedup_type VARCHAR,       -- 'local' (hardware efficiency), 'global' (kernel runtime) or 'unknown'; NULL without an estimate
    estimated_speedup DOUBLE    -- ncu's estimated speedup (%); NULL without an estimate
);

-- ---------------------------------------------------------------------------------
-- Run history: each `wsperf analyze REPORTS --db FILE` records one run (a nightly job,
-- a CI build, an engineer's experiment) and links every report it loaded to it,
-- written in the same transaction as the reports (wsperf.analyses.history.record_run).
-- `wsperf history` reads a kernel's figures across runs; `wsperf export` writes them
-- out as Parquet.
-- ---------------------------------------------------------------------------------

CREATE TABLE IF NOT EXISTS runs (
    run_id INTEGER PRIMARY KEY,      -- 1, 2, ... in record order
    label VARCHAR NOT NULL UNIQUE,   -- --label, else '<branch>@<commit[:12]>:<UTC yyyymmddTHHMMSS>' (or 'run-<UTC time>' outside git); a default label taken within the same second gets '-2', '-3', ...
    git_commit VARCHAR,              -- full commit id: --commit, else `git rev-parse HEAD` in the working directory, else $GITHUB_SHA / $CI_COMMIT_SHA; NULL when none is known
    git_branch VARCHAR,              -- --branch, else `git rev-parse --abbrev-ref HEAD` (a detached HEAD, as CI checks out, falls back to $GITHUB_REF_NAME / $CI_COMMIT_REF_NAME); NULL when none is known
    started_at TIMESTAMP NOT NULL,   -- UTC time the command started
    machine VARCHAR,                 -- hostname of the machine that ran wsperf (not necessarily the one that profiled)
    gpu VARCHAR,                     -- reports.device_name of the run's reports, distinct ones joined by ', ', e.g. 'NVIDIA H200'; NULL when no report says
    driver VARCHAR,                  -- NVIDIA driver version from a `wsperf collect` bundle's environment.json (nvidia-smi); NULL for plain reports
    ncu_version VARCHAR,             -- ncu version: reports.ncu_version, else the bundle's environment.json (`ncu --version`); NULL when unknown
    tags VARCHAR[] NOT NULL,         -- --tag values in the order given, e.g. ['nightly']; [] without tags
    wsperf_version VARCHAR           -- version of the wsperf that recorded the run
);

CREATE TABLE IF NOT EXISTS run_reports (
    run_id INTEGER NOT NULL,    -- runs.run_id
    report_id INTEGER NOT NULL  -- reports.report_id; a report (identity: sha256) loaded again in a later run belongs to both runs
);

-- Instruction families per launch: which tensor, copy and synchronization paths the
-- generated SASS uses. One row per (launch, family) present, with how many SASS
-- instructions of the family the kernel holds (static, from `sass`) and how many warp-level
-- instructions of it executed (from `sass` per-PC counters, or from the per-opcode counts
-- in `opcodes` when the report has no source counters).
--
-- kind:   tensor | copy | sync | regs | memory | math
-- family: tcgen05 | wgmma | mma.sync | tma | cp.async | ld/st | mbarrier | cluster-barrier
--         elect | setmaxnreg | local-memory | ffma
--
-- The opcode patterns are SASS base mnemonics (what `opcodes.opcode` holds); each was
-- checked against disassembly of sm_90a (and, for tcgen05, sm_100a) code.
CREATE OR REPLACE VIEW instruction_families AS
WITH family(pattern, family, kind) AS (
    VALUES
        -- Blackwell tensor path (sm_100a, checked by tests/test_ptx_sass_map.py):
        -- tcgen05.mma kind::f16 -> UTCHMMA, kind::f8f6f4 -> UTCQMMA; commit -> UTCBAR;
        -- cp -> UTCCP; ld/st -> LDTM/STTM; alloc/dealloc -> UTCATOMSWS;
        -- relinquish_alloc_permit -> UVIRTCOUNT.DEALLOC.SMPOOL
        ('UTC[A-Z]*MMA', 'tcgen05', 'tensor'),
        ('UTC(BAR|CP|SHIFT|ATOMSWS)|UVIRTCOUNT', 'tcgen05', 'tensor'),
        ('(LD|ST)TM', 'tcgen05', 'tensor'),
        -- Hopper tensor path: wgmma.mma_async
        ('[HQIB]GMMA', 'wgmma', 'tensor'),
        -- Warp-level mma.sync (Volta..): the slow path on sm_90 and sm_100
        ('[HIDB]MMA', 'mma.sync', 'tensor'),
        -- Bulk and tensor copies through the TMA unit
        ('UTMA(LDG|STG|REDG|PF)|UBLK(CP|RED|PF)', 'tma', 'copy'),
        -- Ampere-style cp.async (global -> shared without registers)
        ('LDGSTS', 'cp.async', 'copy'),
        -- Plain loads and stores that stage data through registers
        ('LDG|STG|LDS|STS|LDSM', 'ld/st', 'copy'),
        ('SYNCS', 'mbarrier', 'sync'),
        ('UCGABAR_[A-Z]+', 'cluster-barrier', 'sync'),
        ('ELECT', 'elect', 'sync'),
        ('USETMAXREG', 'setmaxnreg', 'regs'),
        ('LDL|STL', 'local-memory', 'memory'),
        ('FFMA', 'ffma', 'math')
),
per_opcode AS (
    -- Static count and executed count per opcode; opcodes-table counts only where the
    -- report has no per-PC rows for that launch.
    SELECT launch_id, opcode, count(*) AS static_count, sum(inst_executed) AS executed
    FROM sass
    GROUP BY launch_id, opcode
    UNION ALL
    SELECT o.launch_id, o.opcode, NULL AS static_count, o.executed
    FROM opcodes AS o
    WHERE NOT EXISTS (SELECT 1 FROM sass AS s WHERE s.launch_id = o.launch_id)
)
SELECT
    p.launch_id,
    f.kind,
    f.family,
    sum(p.static_count)::BIGINT AS static_count,
    sum(p.executed)::BIGINT AS executed
FROM per_opcode AS p
JOIN family AS f ON regexp_full_match(p.opcode, f.pattern)
GROUP BY p.launch_id, f.kind, f.family;

-- ---------------------------------------------------------------------------------
-- Derived from `sass` by wsperf.analyses.roles (recomputed by wsperf, not loaded from
-- the report): the warp-specialization role of every instruction, and views over it.
-- ---------------------------------------------------------------------------------

CREATE TABLE IF NOT EXISTS role_pcs (
    launch_id BIGINT NOT NULL,  -- launches.launch_id
    pc UBIGINT NOT NULL,        -- sass.pc
    block_pc UBIGINT NOT NULL,  -- first PC of the basic block holding the instruction
    role VARCHAR NOT NULL,      -- 'producer' (path that issues copies into shared memory), 'consumer' (path that does the matrix/FMA work) or 'common' (reaches both, or neither: prologue, a non-specialized main loop)
    is_wait BOOLEAN NOT NULL,   -- an mbarrier wait site: SYNCS.PHASECHK*, the guarded branch consuming its predicate, or an out-of-line retry stub
    is_seed BOOLEAN NOT NULL,   -- the block itself issues copies or does matrix/FMA work (what decided its role)
    in_loop BOOLEAN NOT NULL,   -- inside the span of a backward branch (a loop body)
    -- The warp partition running the instruction (wsperf.analyses.partitions), read from the
    -- warp-index dispatch; NULL when every warp runs one code path or the dispatch is not read.
    warp_partition VARCHAR,     -- e.g. 'producer (warp 6)', 'epilogue (warps 0-3)', 'setup (all warps)', 'shared: ...'
    partition_job VARCHAR,      -- what the partition's own code issues, e.g. 'TMA load', 'MMA issue (tcgen05)'; NULL for setup/shared
    partition_registers INTEGER,  -- its first setmaxnreg (registers per thread); NULL without one
    partition_basis VARCHAR     -- 'evidence' (compares on the warp index) or 'assumption' (a warp table, a BRX jump table, an unknown warp count)
);

-- Per launch and role: how much code, work and PC-sampling time, and the share of that
-- time spent waiting on mbarriers.
CREATE OR REPLACE VIEW roles AS
SELECT
    p.launch_id,
    p.role,
    count(*) AS instructions,                            -- SASS instructions of the role
    sum(s.inst_executed) AS executed,                    -- warp-level instructions executed (inst)
    sum(s.pcsamp_samples) AS samples,                    -- PC samples of the role's warps (warp samples)
    coalesce(sum(s.pcsamp_samples) FILTER (WHERE p.is_wait), 0) AS wait_samples,  -- of those, at mbarrier wait sites
    coalesce(sum(s.pcsamp_samples) FILTER (WHERE p.is_wait), 0)
        / nullif(sum(s.pcsamp_samples), 0) AS wait_share  -- wait_samples / samples; NULL without samples
FROM role_pcs AS p
JOIN sass AS s USING (launch_id, pc)
GROUP BY p.launch_id, p.role;

-- Per launch and warp partition: its job, registers, and the same figures as `roles`.
CREATE OR REPLACE VIEW partitions AS
SELECT
    p.launch_id,
    p.warp_partition,
    any_value(p.partition_job) AS job,
    any_value(p.partition_registers) AS registers,
    any_value(p.partition_basis) AS basis,
    min(p.pc) AS first_pc,                               -- where its code starts (orders the rows)
    count(*) AS instructions,
    sum(s.inst_executed) AS executed,
    sum(s.pcsamp_samples) AS samples,
    coalesce(sum(s.pcsamp_samples) FILTER (WHERE p.is_wait), 0) AS wait_samples,
    coalesce(sum(s.pcsamp_samples) FILTER (WHERE p.is_wait), 0)
        / nullif(sum(s.pcsamp_samples), 0) AS wait_share
FROM role_pcs AS p
JOIN sass AS s USING (launch_id, pc)
WHERE p.warp_partition IS NOT NULL
GROUP BY p.launch_id, p.warp_partition;

-- Stall reasons per launch and role, split into samples at mbarrier wait sites and
-- elsewhere: the per-role stall breakdown.
CREATE OR REPLACE VIEW role_stalls AS
SELECT
    p.launch_id,
    p.role,
    st.reason,                              -- smsp__pcsamp_warps_issue_stalled_<reason>
    p.is_wait AS at_wait,                   -- samples at mbarrier wait sites
    sum(st.samples) AS samples,             -- warp samples
    sum(st.samples_not_issued) AS samples_not_issued
FROM role_pcs AS p
JOIN stalls AS st USING (launch_id, pc)
GROUP BY p.launch_id, p.role, st.reason, p.is_wait;

-- Per launch, the two roles side by side: how much each waits on mbarriers. The
-- figures behind producer-bound and serialized-roles.
CREATE OR REPLACE VIEW role_balance AS
SELECT
    launch_id,
    max(wait_share) FILTER (WHERE role = 'consumer') AS consumer_wait_share,  -- consumer samples at full-barrier waits / all consumer samples
    max(wait_share) FILTER (WHERE role = 'producer') AS producer_wait_share,  -- producer samples at empty-barrier waits / all producer samples
    max(samples) FILTER (WHERE role = 'consumer') AS consumer_samples,        -- PC samples of the consumer role (warp samples)
    max(samples) FILTER (WHERE role = 'producer') AS producer_samples         -- PC samples of the producer role (warp samples)
FROM roles
GROUP BY launch_id;

-- Whether each launch is warp-specialized. In a profile: both a producer and a consumer
-- path executed. In static SASS (`wsperf inspect`, nothing executed): the code holds both
-- paths, recovered from the warp-index branches. NULL when the launch has no SASS (no
-- source counters in the report).
CREATE OR REPLACE VIEW warp_specialization AS
WITH per_launch AS (
    SELECT l.launch_id,
           EXISTS (SELECT 1 FROM role_pcs AS p WHERE p.launch_id = l.launch_id) AS has_roles,
           EXISTS (SELECT 1 FROM sass AS s WHERE s.launch_id = l.launch_id AND s.inst_executed IS NOT NULL)
               AS has_counts
    FROM launches AS l
)
SELECT
    launch_id,
    CASE WHEN NOT has_roles THEN NULL
         WHEN NOT has_counts THEN
              EXISTS (SELECT 1 FROM role_pcs AS p WHERE p.launch_id = pl.launch_id AND p.role = 'producer')
          AND EXISTS (SELECT 1 FROM role_pcs AS p WHERE p.launch_id = pl.launch_id AND p.role = 'consumer')
         ELSE coalesce((SELECT sum(executed) FROM roles AS r WHERE r.launch_id = pl.launch_id AND r.role = 'producer'), 0) > 0
          AND coalesce((SELECT sum(executed) FROM roles AS r WHERE r.launch_id = pl.launch_id AND r.role = 'consumer'), 0) > 0
    END AS warp_specialized,
    -- what decided: 'executed' (a profile's counts), 'static' (code paths only), NULL
    CASE WHEN NOT has_roles THEN NULL WHEN has_counts THEN 'executed' ELSE 'static' END AS basis
FROM per_launch AS pl;
