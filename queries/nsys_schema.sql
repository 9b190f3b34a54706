/*
What `wsperf.collectors.nsys.load_nsys_export` writes: one row per Nsight Systems export
loaded (`nsys_exports`), its GPUs (`nsys_gpus`), and one row per record of the CUDA
trace: kernels, memory copies and sets, CUDA API calls, NVTX ranges and marks. Applied by
the loader before it writes; every statement is idempotent (CREATE ... IF NOT EXISTS).

Source: the SQLite file `nsys export --type sqlite` writes (tables
CUPTI_ACTIVITY_KIND_KERNEL, _MEMCPY, _MEMSET, _RUNTIME, NVTX_EVENTS, TARGET_INFO_GPU,
StringIds, META_DATA_EXPORT), read-only, never `nsys stats` text. Names are resolved
through StringIds. Columns appeared over nsys versions (greenContextId in 2024.x; cluster
dimensions, graphId in 2025.x): a column that the export lacks is NULL here, never zero,
and `nsys_exports.absent_columns` lists which.

Times are the export's own: nanoseconds on the session's clock (nsys_exports.
session_start_utc is its zero unless the capture was exported with a time shift). One
export is identified by the SHA-256 of its SQLite bytes: loading the same content again
adds nothing.
*/

CREATE TABLE IF NOT EXISTS nsys_exports (
    export_id INTEGER PRIMARY KEY,    -- wsperf id of the loaded export, 1, 2, ... in load order
    path VARCHAR NOT NULL,            -- absolute path it was loaded from (.sqlite, .sqlite.gz or the .nsys-rep converted)
    sha256 VARCHAR NOT NULL UNIQUE,   -- hex SHA-256 of the SQLite file's bytes (after gunzip / nsys export): its identity
    size_bytes BIGINT NOT NULL,       -- size of the SQLite file (bytes)
    nsys_version VARCHAR,             -- EXPORT_PRODUCT_VERSION of the nsys that exported it, e.g. '2024.5.1.113'; NULL: not recorded
    export_schema VARCHAR,            -- EXPORT_SCHEMA_VERSION, e.g. '3.13.2' (major.minor.micro of the SQLite layout)
    session_start_utc TIMESTAMP,      -- TARGET_INFO_SESSION_START_TIME.utcEpochNs: UTC wall time of the capture's start
    command VARCHAR,                  -- META_DATA_CAPTURE 'PROCESS_0:COMMAND': the program profiled; NULL in older exports
    cuda_trace BOOLEAN,               -- META_DATA_CAPTURE 'PROCESS_0:COLLECT_CUDA_TRACE'; NULL: not recorded
    kernels BIGINT NOT NULL,          -- rows written to nsys_kernels
    absent_columns VARCHAR[],         -- 'table.column' names this export lacks that wsperf reads (those columns are NULL)
    loaded_at TIMESTAMP NOT NULL      -- UTC time wsperf loaded it
);

CREATE TABLE IF NOT EXISTS nsys_gpus (
    export_id INTEGER NOT NULL,       -- nsys_exports.export_id
    device_id INTEGER NOT NULL,       -- TARGET_INFO_GPU.id: what nsys_kernels.device_id refers to
    cuda_device INTEGER,              -- TARGET_INFO_GPU.cuDevice: the CUDA ordinal in the profiled process
    name VARCHAR,                     -- e.g. 'NVIDIA A100-SXM4-80GB'
    chip VARCHAR,                     -- chipName, e.g. 'GA100', 'GH100'
    bus_location VARCHAR,             -- PCI bus id, e.g. '0000:c1:00.0'
    compute_capability VARCHAR,       -- computeMajor || '.' || computeMinor, e.g. '8.0'
    sm_count INTEGER,                 -- smCount (SMs)
    clock_hz BIGINT,                  -- clockRate (Hz)
    memory_bytes BIGINT,              -- totalMemory (bytes)
    memory_bandwidth BIGINT,          -- memoryBandwidth (bytes/s)
    l2_cache_bytes BIGINT,            -- l2CacheSize (bytes)
    uuid VARCHAR                      -- GPU UUID
);

CREATE TABLE IF NOT EXISTS nsys_kernels (
    export_id INTEGER NOT NULL,       -- nsys_exports.export_id
    record_id BIGINT NOT NULL,        -- the record's rowid in CUPTI_ACTIVITY_KIND_KERNEL (unique per export)
    start_ns BIGINT NOT NULL,         -- GPU start (ns, session clock)
    end_ns BIGINT NOT NULL,           -- GPU end (ns)
    duration_ns BIGINT NOT NULL,      -- end_ns - start_ns (ns)
    device_id INTEGER,                -- deviceId: nsys_gpus.device_id
    context_id BIGINT,                -- contextId: the CUDA context
    green_context_id BIGINT,          -- greenContextId (nsys 2024.x on); NULL: absent or no green context
    stream_id BIGINT,                 -- streamId: the CUDA stream, unique within its context
    correlation_id BIGINT,            -- correlationId: the launching API call's (nsys_runtime.correlation_id, same global_pid)
    global_pid BIGINT,                -- globalPid: nsys's serialized process id (pid = (global_pid >> 24) & 0xFFFFFF)
    pid INTEGER,                      -- operating-system process id
    kernel_demangled VARCHAR,         -- demangledName via StringIds: name with template arguments and parameter list
    kernel_short VARCHAR,             -- shortName via StringIds: the base function name, e.g. 'par_ranged2d_kernel'
    kernel_mangled VARCHAR,           -- mangledName via StringIds; NULL when absent
    launch_type INTEGER,              -- launchType: 0 unknown, 1 regular, 2 cooperative single device, 3 cooperative multi device
    grid_x BIGINT,                    -- gridX (CTAs)
    grid_y BIGINT,                    -- gridY (CTAs)
    grid_z BIGINT,                    -- gridZ (CTAs)
    block_x INTEGER,                  -- blockX (threads)
    block_y INTEGER,                  -- blockY (threads)
    block_z INTEGER,                  -- blockZ (threads)
    cluster_x INTEGER,                -- clusterX (CTAs; nsys 2025.x on); NULL: the export has no cluster columns
    cluster_y INTEGER,                -- clusterY (CTAs)
    cluster_z INTEGER,                -- clusterZ (CTAs)
    cluster_scheduling_policy INTEGER,-- clusterSchedulingPolicy (CUclusterSchedulingPolicy)
    max_potential_cluster_size INTEGER, -- maxPotentialClusterSize (CTAs)
    max_active_clusters INTEGER,      -- maxActiveClusters: clusters that fit on the GPU at once
    registers_per_thread INTEGER,     -- registersPerThread (registers)
    static_smem_bytes BIGINT,         -- staticSharedMemory (bytes per CTA)
    dynamic_smem_bytes BIGINT,        -- dynamicSharedMemory (bytes per CTA)
    smem_executed_bytes BIGINT,       -- sharedMemoryExecuted: shared-memory carve-out the driver set (bytes per SM)
    local_memory_per_thread BIGINT,   -- localMemoryPerThread (bytes)
    local_memory_total BIGINT,        -- localMemoryTotal (bytes)
    grid_id BIGINT,                   -- gridId: unique id the runtime gave the grid
    graph_id BIGINT,                  -- graphId: the CUDA graph launched (nsys 2025.x on); NULL: absent or not a graph launch
    graph_node_id BIGINT              -- graphNodeId: the graph node; NULL: not launched from a graph
);

CREATE TABLE IF NOT EXISTS nsys_memcpy (
    export_id INTEGER NOT NULL,       -- nsys_exports.export_id
    operation VARCHAR NOT NULL,       -- 'memcpy' (CUPTI_ACTIVITY_KIND_MEMCPY) or 'memset' (CUPTI_ACTIVITY_KIND_MEMSET)
    start_ns BIGINT NOT NULL,         -- GPU start (ns, session clock)
    end_ns BIGINT NOT NULL,           -- GPU end (ns)
    duration_ns BIGINT NOT NULL,      -- end_ns - start_ns (ns)
    device_id INTEGER,                -- deviceId
    context_id BIGINT,                -- contextId
    stream_id BIGINT,                 -- streamId
    correlation_id BIGINT,            -- correlationId of the API call
    global_pid BIGINT,                -- globalPid
    bytes BIGINT,                     -- bytes copied or set
    copy_kind VARCHAR,                -- memcpy: 'HtoD', 'DtoH', 'DtoD', 'HtoH', 'PtoP', ... (copyKind); NULL for memset
    src_kind INTEGER,                 -- srcKind (memory kind: 0 pageable, 1 pinned, 2 device, ...); NULL for memset
    dst_kind INTEGER,                 -- dstKind, or memKind for a memset
    graph_node_id BIGINT              -- graphNodeId; NULL: not from a graph
);

CREATE TABLE IF NOT EXISTS nsys_runtime (
    export_id INTEGER NOT NULL,       -- nsys_exports.export_id
    start_ns BIGINT NOT NULL,         -- CPU start of the API call (ns, session clock)
    end_ns BIGINT NOT NULL,           -- CPU end (ns)
    duration_ns BIGINT NOT NULL,      -- end_ns - start_ns (ns)
    global_tid BIGINT,                -- globalTid: serialized thread id
    global_pid BIGINT,                -- global_tid with the thread bits cleared: joins nsys_kernels.global_pid
    pid INTEGER,                      -- operating-system process id
    tid INTEGER,                      -- operating-system thread id
    correlation_id BIGINT,            -- correlationId: joins the GPU work this call created
    api VARCHAR,                      -- function name via StringIds, e.g. 'cudaLaunchKernel_v7000'
    return_value BIGINT,              -- returnValue (0: success)
    kernels INTEGER NOT NULL,         -- kernels with this correlation id (several for a graph launch; 0 for non-launch calls; nsys 2022.2 writes two rows per launch, 'cudaLaunchKernel' and 'cudaLaunchKernel_v7000', both count it)
    first_kernel_start_ns BIGINT,     -- GPU start of the first of them (ns); NULL without kernels
    launch_latency_ns BIGINT,         -- first_kernel_start_ns - start_ns: from the call to the GPU starting the work (ns)
    queue_ns BIGINT                   -- max(0, first_kernel_start_ns - end_ns): time the work waited after the call returned (ns)
);

CREATE TABLE IF NOT EXISTS nsys_nvtx (
    export_id INTEGER NOT NULL,       -- nsys_exports.export_id
    kind VARCHAR NOT NULL,            -- 'push-pop' (nvtxRangePush/Pop), 'start-end' (nvtxRangeStart/End) or 'mark'
    start_ns BIGINT NOT NULL,         -- CPU start (ns, session clock)
    end_ns BIGINT,                    -- CPU end (ns); NULL for a mark or a range never closed
    duration_ns BIGINT,               -- end_ns - start_ns (ns); NULL for a mark
    text VARCHAR,                     -- the range's message (text, or textId via StringIds)
    domain VARCHAR,                   -- the NVTX domain's name; NULL: the default domain
    global_tid BIGINT,                -- globalTid of the thread that opened it
    pid INTEGER,                      -- operating-system process id
    tid INTEGER                       -- operating-system thread id
);

-- The runs `wsperf analyze EXPORT --db FILE` recorded (runs, queries/schema.sql): which
-- exports each loaded. `wsperf history --source nsys` and `wsperf compare --db` read a
-- run's kernel durations through it.
CREATE TABLE IF NOT EXISTS nsys_run_exports (
    run_id INTEGER NOT NULL,          -- runs.run_id
    export_id INTEGER NOT NULL        -- nsys_exports.export_id; an export loaded again in a later run belongs to both
);
