/*
id: register-spills
question: Does the kernel move register spills through local memory (LDL/STL) in its hot loop?
evidence:
  - opcodes LDL and STL executed, against all warp instructions executed (InstructionStats or SourceCounters)
  - LDL/STL executed inside loop bodies, and PC samples at LDL/STL (SourceCounters)
  - launches.registers_per_thread
  - static SASS (wsperf inspect, no counters): LDL/STL instructions inside loop bodies
threshold:
  min_local_inst_share: 0.01   # (LDL + STL executed) / all executed warp instructions
measured: |
  ws_stream_spill 0.5012, 128385024 of 128487984 LDL/STL inside loops (704 B stack, 1240 B spill stores per ptxas; confirmed);
  all other fixtures 0.0 (ws_stream_healthy, gemm_wgmma_tma, torch_mm, ...; rejected).
  static (fixtures/cubins): tcgen05_spill has LDL/STL inside its loop (confirmed); tcgen05_gemm, gemm_ws
  and gemm_ffma hold no LDL/STL (rejected).
experiment: >
  Cut the live registers of the hot loop (a smaller tile per thread, __launch_bounds__,
  setmaxnreg for the math warps): `-Xptxas -v` must report 0 bytes of spill stores and the
  LDL/STL share fall to 0 (ws_stream_spill 0.501 -> ws_stream_healthy 0). Check with
  `wsperf inspect` and `wsperf compare`.
remedy: >
  Free registers in the role that spills: keep fewer values live across the loop (smaller
  per-thread tiles, recompute cheap values), give the math role more registers
  (setmaxnreg.inc in the consumer, setmaxnreg.dec in the producer; __launch_bounds__
  with min blocks 1), and index register arrays only with compile-time constants. Check
  ptxas -v for "bytes spill stores" after each change.
*/
WITH inst AS (
    SELECT
        launch_id,
        sum(executed) AS executed,
        coalesce(sum(executed) FILTER (WHERE opcode IN ('LDL', 'STL')), 0) AS local_executed
    FROM opcodes
    WHERE launch_id IN (SELECT launch_id FROM _wsperf_ids)
    GROUP BY launch_id
),
static AS (
    -- `wsperf inspect` rows: SASS without any count. What the code holds is the
    -- evidence: LDL/STL inside a loop body run on every trip.
    SELECT
        s.launch_id,
        count(*) FILTER (WHERE s.opcode IN ('LDL', 'STL')) AS local_sites,
        count(*) FILTER (WHERE s.opcode IN ('LDL', 'STL') AND p.in_loop) AS local_sites_in_loops
    FROM sass AS s
    LEFT JOIN role_pcs AS p USING (launch_id, pc)
    WHERE s.launch_id IN (SELECT launch_id FROM _wsperf_ids)
      AND s.launch_id NOT IN (SELECT launch_id FROM opcodes)
    GROUP BY s.launch_id
    HAVING bool_and(s.inst_executed IS NULL)
),
pcs AS (
    SELECT
        s.launch_id,
        sum(s.pcsamp_samples) AS samples,
        sum(s.pcsamp_samples) FILTER (WHERE s.opcode IN ('LDL', 'STL')) AS local_samples,
        coalesce(sum(s.inst_executed) FILTER (WHERE s.opcode IN ('LDL', 'STL') AND p.in_loop), 0) AS local_executed_in_loops
    FROM sass AS s
    LEFT JOIN role_pcs AS p USING (launch_id, pc)
    WHERE s.launch_id IN (SELECT launch_id FROM _wsperf_ids)
    GROUP BY s.launch_id
),
v AS (
    SELECT
        l.launch_id,
        l.registers_per_thread,
        i.executed,
        i.local_executed,
        i.local_executed / nullif(i.executed, 0) AS local_inst_share,
        p.local_executed_in_loops,
        p.local_samples,
        p.local_samples / nullif(p.samples, 0) AS local_sample_share,
        st.launch_id IS NOT NULL AS is_static,
        st.local_sites,
        st.local_sites_in_loops
    FROM launches AS l
    LEFT JOIN inst AS i USING (launch_id)
    LEFT JOIN pcs AS p USING (launch_id)
    LEFT JOIN static AS st USING (launch_id)
    -- Only the launches asked about: analyses.hypotheses.evaluate fills _wsperf_ids.
    WHERE l.launch_id IN (SELECT launch_id FROM _wsperf_ids)
)
SELECT
    launch_id,
    CASE
        WHEN is_static AND local_sites_in_loops > 0 THEN 'confirmed'
        WHEN is_static THEN 'rejected'
        WHEN executed IS NULL THEN 'no_data'
        WHEN local_inst_share >= $min_local_inst_share THEN 'confirmed'
        ELSE 'rejected'
    END AS status,
    CASE
        WHEN is_static THEN
            printf('static SASS: %d LDL/STL instructions, %d of them inside loop bodies, at %s registers/thread',
                   local_sites, local_sites_in_loops, coalesce(registers_per_thread::VARCHAR, 'unknown'))
        WHEN executed IS NULL THEN
            'no instruction counts in the report: collect --section InstructionStats (or --set full)'
        ELSE printf('%.2f%% of executed instructions are local-memory loads/stores (%d LDL/STL, %s in loops) at %d registers/thread',
                    100 * local_inst_share, local_executed,
                    coalesce(local_executed_in_loops::VARCHAR, 'unknown'), registers_per_thread)
    END AS summary,
    registers_per_thread,
    local_executed,
    round(local_inst_share, 4) AS local_inst_share,
    local_executed_in_loops,
    round(local_sample_share, 4) AS local_sample_share,
    local_sites,
    local_sites_in_loops
FROM v
