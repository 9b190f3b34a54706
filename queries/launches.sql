/*
Launches with their report, in load order, optionally filtered by a regular expression
on the kernel name ($kernel, NULL for all; matched against demangled and mangled names)
and by launch id ($ids, a list; NULL for all: a store with history holds many runs, and
analyze asks about the reports it just loaded).
*/
SELECT
    l.*,
    r.path AS report_path,
    r.arch,
    r.device_name,
    -- Whether instruction-level data exists for the launch: per-PC SASS rows (source
    -- counters) or per-opcode counts (InstructionStats). Without either, instruction
    -- families are unknown, not absent.
    EXISTS (SELECT 1 FROM sass AS s WHERE s.launch_id = l.launch_id)
        OR EXISTS (SELECT 1 FROM opcodes AS o WHERE o.launch_id = l.launch_id) AS has_instruction_data
FROM launches AS l
JOIN reports AS r USING (report_id)
WHERE ($ids IS NULL OR list_contains($ids, l.launch_id))
  AND ($kernel IS NULL
       OR regexp_matches(l.kernel_demangled, $kernel)
       OR regexp_matches(l.kernel_mangled, $kernel))
ORDER BY l.report_id, l.range_idx, l.action_idx
