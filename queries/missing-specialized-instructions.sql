/*
id: missing-specialized-instructions
question: Does the kernel run its matrix or copy work on a slower path than the architecture offers?
evidence:
  - instruction_families (executed): tcgen05 / wgmma / mma.sync; tma / cp.async / ld/st; setmaxnreg
  - static SASS (wsperf inspect, no counters): the same families, present in the code instead of executed
  - reports.arch: sm_90 offers wgmma and TMA; sm_100/101/103/110 offer tcgen05 and TMA; older and sm_120 offer mma.sync
  - mbarrier phase waits executed (SYNCS.PHASECHK): a pipeline built for asynchronous copies
  - --expect from the user: tma, tensor-core (the arch's best MMA), wgmma, tcgen05, setmaxnreg, warp-specialized
  - opcodes (executed): FFMA share of all instructions, shared-memory reads (LDS/LDSM) per output store
      (STG/UTMASTG/RED)
  - SASS dataflow (analyses/ffma.py, _wsperf_ffma): the share of executed FFMA that multiplies two loaded
      values, one of them reused across accumulators; with the FFMA share, the shape of a matrix product
      on FP32 FMA, an inference (basis assumption). Without SASS, shared-memory reads per store stand in.
threshold:
  expect: []   # filled from --expect / the config file; listed here so the catalogue names it
  # Without --expect, FP32 FMA reads as matrix work when FFMA is at least this share of the
  # executed instructions...
  min_ffma_share: 0.25
  # ...and at least this share of the FFMA executed multiplies two loaded values, one of
  # them reused across accumulators (a[i] * b[j] into acc[i][j]): gemm_ffma and ffma_outer
  # 1.0; a row sum of squares (ffma_rowsq, CuTe's ring) or a streaming chain 0.
  min_matrix_ffma_share: 0.5
  # Without the kernel's SASS: each output store fed by at least this many shared-memory
  # reads stands in (a tile reused along K; a streaming kernel reads each staged element
  # once or twice per store, but a reduction reads many: only the SASS tells them apart).
  min_smem_reads_per_store: 16
measured: |
  confirmed by the kernel itself: gemm_wgmma_cpasync (mbarrier pipeline fed by cp.async on sm_90, no TMA),
  ws_stream_producer (mbarrier pipeline fed by LDG+STS, no TMA).
  confirmed by --expect tensor-core: gemm_ffma (FFMA only). confirmed without --expect (matrix-product
  shape, an assumption): gemm_ffma, FFMA 76% of instructions, all of it two loaded values reused across
  accumulators; ffma_outer (an outer-product GEMM reading global memory: no LDS at all, which the
  shared-memory rule missed), FFMA 46%, all of it matrix work. A reduction stays rejected: ffma_rowsq (sum
  of squares of rows staged by bulk copies: 128 LDS per STG, FFMA 24%; with min_ffma_share 0.2 the
  instruction mix alone confirmed it) has no FFMA of two loaded values reused. Streaming FMA chains stay
  rejected: ws_stream_consumer (FFMA ~100%, 1 LDS per STG), ws_stream_producer and ws_stream_healthy
  (1 LDS per STG), multi_launch (FFMA <= 33%, no LDS in the FFMA kernels). rejected: gemm_wgmma_tma, triton_matmul,
  torch_mm (wgmma + TMA on sm_90), ws_stream_healthy (bulk copies), multi_launch kernels (no MMA, no mbarrier).
  static (fixtures/cubins, tests/test_inspect.py): confirmed by --expect tensor-core for tcgen05_fallback
  (mma.sync on sm_100a) and gemm_ffma (sm_90a); rejected for tcgen05_gemm (UTCHMMA + UTMALDG) and gemm_ws;
  no_data for gemm_ffma without --expect (FFMA in the code, no counts to tell matrix work from streaming).
experiment: >
  Build for the architecture's own target (-gencode arch=compute_90a,code=sm_90a, or
  sm_100a) and use wgmma/TMA (tcgen05 on Blackwell): `wsperf inspect` of the new build
  must list the family (HGMMA / UTMALDG / UTC*MMA) and `wsperf compare` the duration drop
  (gemm_ffma -> gemm_wgmma_tma: about 21x).
remedy: >
  Use the architecture's asynchronous paths: on sm_90 wgmma (compile for sm_90a:
  -gencode=arch=compute_90a,code=sm_90a) and TMA (cp.async.bulk.tensor with a
  __grid_constant__ CUtensorMap) completing on an mbarrier; on sm_100 tcgen05.mma with
  tensor memory and TMA. In CUTLASS pick an SM90/SM100 TMA warp-specialized mainloop; in
  Triton use tensor descriptors. Read the SASS (HGMMA/UTCHMMA, UTMALDG) to confirm.
*/
WITH static AS (
    -- Launches with SASS but no count of any kind: `wsperf inspect` rows.
    SELECT launch_id,
           bool_or(p.role = 'producer') AND bool_or(p.role = 'consumer') AS has_both_roles
    FROM sass AS s LEFT JOIN role_pcs AS p USING (launch_id, pc)
    WHERE s.launch_id IN (SELECT launch_id FROM _wsperf_ids)
      AND launch_id NOT IN (SELECT launch_id FROM opcodes)
    GROUP BY launch_id
    HAVING bool_and(s.inst_executed IS NULL)
),
fam0 AS (
    -- In a profile a family is used when it executed; in static SASS when the code
    -- holds it.
    SELECT f.*, CASE WHEN st.launch_id IS NULL THEN f.executed > 0 ELSE f.static_count > 0 END AS used
    FROM instruction_families AS f LEFT JOIN static AS st USING (launch_id)
    WHERE f.launch_id IN (SELECT launch_id FROM _wsperf_ids)
),
fam AS (
    SELECT
        launch_id,
        bool_or(family = 'tcgen05' AND used) AS uses_tcgen05,
        bool_or(family = 'wgmma' AND used) AS uses_wgmma,
        bool_or(family = 'mma.sync' AND used) AS uses_mma_sync,
        bool_or(family = 'tma' AND used) AS uses_tma,
        bool_or(family = 'cp.async' AND used) AS uses_cp_async,
        bool_or(family = 'ld/st' AND used) AS uses_ld_st,
        bool_or(family = 'setmaxnreg' AND used) AS uses_setmaxnreg,
        bool_or(family = 'ffma' AND used) AS uses_ffma
    FROM fam0
    GROUP BY launch_id
),
waits AS (
    -- Static SASS: phase-check sites in the code stand in for waits executed.
    SELECT launch_id, CASE WHEN launch_id IN (SELECT launch_id FROM static) THEN count(*)
                           ELSE sum(inst_executed) END AS mbarrier_waits
    FROM sass
    WHERE opcode_full LIKE 'SYNCS.PHASECHK%' AND launch_id IN (SELECT launch_id FROM _wsperf_ids)
    GROUP BY launch_id
),
shape AS (
    SELECT launch_id, round(matrix_ffma_executed / nullif(ffma_executed, 0), 3) AS matrix_ffma_share
    FROM _wsperf_ffma
),
mix AS (
    -- Executed instructions by opcode (InstructionStats): how much of the work is FP32
    -- FMA, and how often shared memory is read per result written out.
    SELECT launch_id,
           sum(executed) AS instructions,
           coalesce(sum(executed) FILTER (WHERE opcode = 'FFMA'), 0) AS ffma,
           coalesce(sum(executed) FILTER (WHERE opcode IN ('LDS', 'LDSM')), 0) AS smem_reads,
           coalesce(sum(executed) FILTER (WHERE opcode IN ('STG', 'UTMASTG', 'RED', 'REDG')), 0) AS out_stores
    FROM opcodes
    WHERE launch_id IN (SELECT launch_id FROM _wsperf_ids)
    GROUP BY launch_id
),
data AS (
    SELECT DISTINCT launch_id FROM opcodes WHERE launch_id IN (SELECT launch_id FROM _wsperf_ids)
),
v AS (
    SELECT
        l.launch_id,
        r.arch,
        CASE
            WHEN r.arch = 'sm_90' THEN 'wgmma'
            WHEN r.arch IN ('sm_100', 'sm_101', 'sm_103', 'sm_110') THEN 'tcgen05'
            ELSE 'mma.sync'
        END AS best_tensor,
        -- TMA exists from compute capability 9.0 on.
        coalesce(TRY_CAST(split_part(r.compute_capability, '.', 1) AS INTEGER) >= 9, false) AS has_tma,
        d.launch_id IS NOT NULL OR st.launch_id IS NOT NULL AS has_data,
        st.launch_id IS NOT NULL AS is_static,
        CASE WHEN st.launch_id IS NOT NULL THEN ' in the SASS' ELSE ' executed' END AS seen,
        CASE WHEN f.uses_tcgen05 THEN 'tcgen05' WHEN f.uses_wgmma THEN 'wgmma'
             WHEN f.uses_mma_sync THEN 'mma.sync' ELSE 'none' END AS tensor_path,
        list_filter([CASE WHEN f.uses_tma THEN 'tma' END, CASE WHEN f.uses_cp_async THEN 'cp.async' END,
                     CASE WHEN f.uses_ld_st THEN 'ld/st' END], lambda x: x IS NOT NULL) AS copy_paths,
        coalesce(f.uses_tma, false) AS uses_tma,
        coalesce(f.uses_cp_async, false) OR coalesce(f.uses_ld_st, false) AS uses_staged_copies,
        coalesce(f.uses_setmaxnreg, false) AS uses_setmaxnreg,
        coalesce(f.uses_ffma, false) AS uses_ffma,
        coalesce(wt.mbarrier_waits, 0) AS mbarrier_waits,
        round(m.ffma / nullif(m.instructions, 0), 3) AS ffma_share,
        round(m.smem_reads / nullif(m.out_stores, 0), 1) AS smem_reads_per_store,
        sh.matrix_ffma_share,
        -- The matrix-product shape on FP32 FMA: FFMA a large share, and that FFMA multiplying
        -- loaded values reused across accumulators (read from the SASS; without it, many
        -- shared-memory reads per store stand in). An inference, so an assumption (a GEMV
        -- with several rows per thread has it too); --expect tensor-core asserts it.
        st.launch_id IS NULL AND f.uses_ffma AND coalesce(m.ffma / nullif(m.instructions, 0), 0) >= $min_ffma_share
            AND CASE WHEN sh.matrix_ffma_share IS NOT NULL THEN sh.matrix_ffma_share >= $min_matrix_ffma_share
                     ELSE coalesce(m.smem_reads / nullif(m.out_stores, 0), 0) >= $min_smem_reads_per_store END
            AS ffma_matrix_shape,
        -- Static SASS: separate producer and consumer code paths exist.
        CASE WHEN st.launch_id IS NOT NULL THEN coalesce(st.has_both_roles, false) ELSE w.warp_specialized END
            AS warp_specialized
    FROM launches AS l
    JOIN reports AS r USING (report_id)
    LEFT JOIN fam AS f USING (launch_id)
    LEFT JOIN waits AS wt USING (launch_id)
    LEFT JOIN mix AS m USING (launch_id)
    LEFT JOIN shape AS sh USING (launch_id)
    LEFT JOIN data AS d USING (launch_id)
    LEFT JOIN static AS st USING (launch_id)
    LEFT JOIN warp_specialization AS w USING (launch_id)
    -- Only the launches asked about: analyses.hypotheses.evaluate fills _wsperf_ids.
    WHERE l.launch_id IN (SELECT launch_id FROM _wsperf_ids)
),
g AS (
    SELECT *,
        list_filter([
            CASE WHEN tensor_path = 'mma.sync' AND best_tensor <> 'mma.sync'
                 THEN printf('matrix work on mma.sync (HMMA) where %s offers %s', arch, best_tensor) END,
            CASE WHEN ffma_matrix_shape AND tensor_path = 'none'
                      AND NOT list_has_any($expect, ['tensor-core', 'wgmma', 'tcgen05'])
                 THEN printf('matrix work on FP32 FFMA where %s offers %s (assumption: FFMA is %.0f%% of instructions, '
                             '%s: the shape of a matrix product; --expect tensor-core asserts it)', arch, best_tensor,
                             100 * ffma_share,
                             CASE WHEN matrix_ffma_share IS NOT NULL
                                  THEN printf('%.0f%% of it multiplies two loaded values reused across accumulators',
                                              100 * matrix_ffma_share)
                                  ELSE printf('%.0f shared-memory reads per output store', smem_reads_per_store) END)
                 END,
            CASE WHEN list_contains($expect, 'tensor-core') AND tensor_path <> best_tensor
                 THEN printf('expected tensor cores (%s on %s), found %s', best_tensor, arch, tensor_path) END,
            CASE WHEN list_contains($expect, 'wgmma') AND tensor_path <> 'wgmma'
                 THEN printf('expected wgmma, found %s', tensor_path) END,
            CASE WHEN list_contains($expect, 'tcgen05') AND tensor_path <> 'tcgen05'
                 THEN printf('expected tcgen05, found %s', tensor_path) END,
            CASE WHEN has_tma AND mbarrier_waits > 0 AND NOT uses_tma AND uses_staged_copies
                 THEN printf('mbarrier pipeline fed by %s, no TMA on %s', array_to_string(list_filter(copy_paths, lambda x: x <> 'tma'), ' and '), arch) END,
            CASE WHEN list_contains($expect, 'tma') AND NOT uses_tma
                 THEN 'expected TMA copies, none' || seen END,
            CASE WHEN list_contains($expect, 'setmaxnreg') AND NOT uses_setmaxnreg
                 THEN 'expected setmaxnreg, none' || seen END,
            CASE WHEN list_contains($expect, 'warp-specialized') AND NOT coalesce(warp_specialized, false)
                 THEN 'expected a warp-specialized kernel, found no separate producer and consumer paths' END
        ], lambda x: x IS NOT NULL) AS gaps,
        -- the user's expectations this launch does not meet: the CLI's exit code 6
        list_filter([
            CASE WHEN list_contains($expect, 'tensor-core') AND tensor_path <> best_tensor THEN 'tensor-core' END,
            CASE WHEN list_contains($expect, 'wgmma') AND tensor_path <> 'wgmma' THEN 'wgmma' END,
            CASE WHEN list_contains($expect, 'tcgen05') AND tensor_path <> 'tcgen05' THEN 'tcgen05' END,
            CASE WHEN list_contains($expect, 'tma') AND NOT uses_tma THEN 'tma' END,
            CASE WHEN list_contains($expect, 'setmaxnreg') AND NOT uses_setmaxnreg THEN 'setmaxnreg' END,
            CASE WHEN list_contains($expect, 'warp-specialized') AND NOT coalesce(warp_specialized, false)
                 THEN 'warp-specialized' END
        ], lambda x: x IS NOT NULL) AS unmet_expect
    FROM v
)
SELECT
    launch_id,
    CASE WHEN NOT has_data THEN 'no_data' WHEN len(gaps) > 0 THEN 'confirmed'
         -- static SASS with FP32 FFMA and no tensor path: whether the FFMA is matrix work
         -- is read from executed counts, which static SASS does not have
         WHEN is_static AND uses_ffma AND tensor_path = 'none' THEN 'no_data'
         ELSE 'rejected' END AS status,
    CASE
        WHEN NOT has_data THEN
            'no instruction counts in the report: collect --section InstructionStats --section SourceCounters (or --set full)'
        WHEN len(gaps) > 0 THEN array_to_string(gaps, '; ')
        WHEN is_static AND uses_ffma AND tensor_path = 'none' THEN
            printf('FP32 FFMA%s and no tensor-core path on %s: whether it is matrix work is read from executed '
                   'instruction counts, which static SASS lacks (collect a profile with --section InstructionStats), '
                   'or --expect tensor-core asserts it', seen, arch)
        ELSE printf('tensor path %s, copies %s on %s', tensor_path,
                    CASE WHEN len(copy_paths) = 0 THEN 'none' ELSE array_to_string(copy_paths, ', ') END, arch)
    END AS summary,
    arch,
    tensor_path,
    best_tensor,
    copy_paths,
    mbarrier_waits,
    uses_setmaxnreg,
    ffma_share,
    smem_reads_per_store,
    matrix_ffma_share,
    -- 'assumption' when the verdict rests on the inferred matrix-product shape
    CASE WHEN ffma_matrix_shape AND tensor_path = 'none' AND NOT list_has_any($expect, ['tensor-core', 'wgmma', 'tcgen05'])
         THEN 'assumption' WHEN has_data THEN 'evidence' END AS basis,
    is_static AS static_sass,
    gaps,
    -- empty without data: an expectation that could not be checked is not said unmet
    CASE WHEN has_data THEN unmet_expect ELSE [] END AS unmet_expect
FROM g
