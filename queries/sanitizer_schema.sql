/*
What `wsperf.collectors.sanitizer.load_sanitizer_xml` writes: one row per compute-sanitizer
run loaded (`sanitizer_runs`) and one per finding in it (`sanitizer_findings`). Applied by
the loader before it writes; every statement is idempotent (CREATE ... IF NOT EXISTS).

Source: the XML that `compute-sanitizer --tool T --xml --save FILE` writes (one <record>
per finding, at most --print-limit of them, 100 by default); never its text output.
The XML does not name the tool or the program: the loader takes the tool from the caller
or infers it from the record kinds, and a run is not de-duplicated by content (the empty
output of a clean run is the same bytes for every program and tool).

One finding is one <record>, except a racecheck analysis record ("race reported between
the access at A and the accesses at B1, B2, ..."), which gives one row per pair (A, Bi)
with that pair's hazard count. `record_idx` groups the rows of one record.

NULL means the record does not say (e.g. initcheck records carry no access direction),
never zero. PCs are offsets inside the kernel function, as `cuobjdump -sass` prints them.
*/

CREATE TABLE IF NOT EXISTS sanitizer_runs (
    run_id INTEGER PRIMARY KEY,  -- wsperf id of the loaded XML file, 1, 2, ... in load order
    path VARCHAR NOT NULL,       -- absolute path the XML was loaded from
    sha256 VARCHAR NOT NULL,     -- hex SHA-256 of the file's bytes (not unique: see above)
    size_bytes BIGINT NOT NULL,  -- file size (bytes)
    tool VARCHAR,                -- 'memcheck', 'racecheck', 'initcheck' or 'synccheck'; NULL: not given and no record tells
    command VARCHAR,             -- the command that wrote the file, when the caller gave it
    records INTEGER NOT NULL,    -- <record> elements in the file (0: the tool found nothing, or printed nothing)
    loaded_at TIMESTAMP NOT NULL -- UTC time wsperf loaded it
);

CREATE TABLE IF NOT EXISTS sanitizer_findings (
    run_id INTEGER NOT NULL,       -- sanitizer_runs.run_id
    record_idx INTEGER NOT NULL,   -- position of the <record> in the file, 0-based
    part_idx INTEGER NOT NULL,     -- 0; for a racecheck analysis record, which of its destination accesses (0-based)
    tool VARCHAR,                  -- the run's tool (sanitizer_runs.tool), repeated for filtering
    kind VARCHAR NOT NULL,         -- the record's <kind>: 'Precise' (memcheck access error), 'Api' (CUDA API error), 'Initcheck', 'Synccheck', 'Analysis' (racecheck race report) or 'Hazard' (one racecheck hazard); other kinds are kept as written
    severity VARCHAR,              -- the record's <level> lower-cased, e.g. 'error', 'warning'; NULL when the record has none (initcheck, synccheck and racecheck hazard records; the tools count these as errors)
    classification VARCHAR,        -- the handoff the finding breaks: 'out-of-bounds-or-misaligned' (memcheck access out of bounds or misaligned), 'race-between-roles' (racecheck: shared storage reused too early, a missing wait or fence), 'barrier-misuse' (synccheck), 'uninitialized-read' (initcheck); NULL for records about none of these (API errors, leaks, unknown kinds)
    message VARCHAR NOT NULL,      -- the record's <text>, e.g. 'Invalid __global__ write of size 4 bytes is out of bounds'
    error_type VARCHAR,            -- the finer class the record names: memcheck <error> ('out of bounds', 'misaligned ...'), synccheck <type> ('Divergent thread(s) in block'), hazard <type> ('RAW', 'WAR', 'WAW'), API <error> ('cudaErrorLaunchFailure'); NULL when none
    kernel VARCHAR,                -- <where>/<func>: the kernel's name as the tool prints it (no template arguments), e.g. 'ws_pipeline'
    source_file VARCHAR,           -- <where>/<path>: source file of the access (needs -lineinfo); NULL without line info
    source_line INTEGER,           -- <where>/<line>; NULL without line info
    pc_offset UBIGINT,             -- <where>/<pc>: offset of the instruction in the kernel function (bytes), the /*XXXX*/ of cuobjdump -sass
    block_x INTEGER,               -- blockIdx.x of the thread that made the access (CTA); NULL when the record names none (API errors, racecheck analysis)
    block_y INTEGER,               -- blockIdx.y (CTA)
    block_z INTEGER,               -- blockIdx.z (CTA)
    thread_x INTEGER,              -- threadIdx.x of the thread that made the access; for a hazard, the first of the two threads
    thread_y INTEGER,              -- threadIdx.y
    thread_z INTEGER,              -- threadIdx.z
    address UBIGINT,               -- accessed address (bytes; a shared-memory offset for __shared__ accesses); NULL when the record has none
    memory_space VARCHAR,          -- '__global__', '__shared__', '__local__', ... from the record; for racecheck always '__shared__' and for initcheck '__global__' (the only spaces those tools check); NULL otherwise
    access VARCHAR,                -- 'read' or 'write' (lower-cased <direction> / <access>); NULL when the record does not say (initcheck)
    access_size INTEGER,           -- size of the access (bytes); NULL when not given
    other_access VARCHAR,          -- races: 'read' or 'write' of the other access of the pair; NULL for other findings
    other_thread_x INTEGER,        -- racecheck hazards: threadIdx.x of the other thread; NULL otherwise (analysis records name no threads)
    other_thread_y INTEGER,        -- threadIdx.y of the other thread
    other_thread_z INTEGER,        -- threadIdx.z of the other thread
    other_source_file VARCHAR,     -- races: source file of the other access
    other_source_line INTEGER,     -- races: source line of the other access
    other_pc_offset UBIGINT,       -- races: function offset of the other access (bytes)
    hazard_count BIGINT,           -- races: hazards the tool counted for this pair of instructions (1 for a single hazard record); NULL for other findings
    grid_id BIGINT,                -- racecheck hazards: the grid (launch) id the tool gives; NULL otherwise
    api_call VARCHAR               -- API errors: the CUDA call that returned the error, e.g. 'cudaDeviceSynchronize'; NULL otherwise
);
