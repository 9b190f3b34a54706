/*
Kernel durations per recorded run of Nsight Systems exports (`wsperf analyze EXPORT --db`,
linked in nsys_run_exports), oldest run first: one row per (run, kernel demangled name)
with the number of launches and the median, min and max duration (ns) over them. What
`wsperf history --source nsys` prints. $tags: runs carrying all of them; $last: the
newest N of those runs (NULL: all); $kernel: a regular expression (RE2) on the short or
demangled name, NULL for all.
*/
WITH tagged AS (
    SELECT r.run_id, r.label, r.git_commit, r.git_branch, r.started_at, r.tags,
           row_number() OVER (ORDER BY r.run_id DESC) AS newest
    FROM runs AS r
    WHERE list_has_all(r.tags, $tags::VARCHAR[])
      AND r.run_id IN (SELECT run_id FROM nsys_run_exports)
),
picked AS (
    SELECT * FROM tagged WHERE $last IS NULL OR newest <= $last
)
SELECT p.run_id, p.label, p.git_commit, p.git_branch, p.started_at, p.tags,
       coalesce(any_value(k.kernel_short), k.kernel_demangled) AS kernel, k.kernel_demangled AS demangled,
       count(*) AS n, median(k.duration_ns) AS median, min(k.duration_ns) AS low, max(k.duration_ns) AS high
FROM picked AS p
JOIN nsys_run_exports AS x USING (run_id)
JOIN nsys_kernels AS k USING (export_id)
WHERE $kernel IS NULL OR regexp_matches(k.kernel_demangled, $kernel)
   OR regexp_matches(coalesce(k.kernel_short, ''), $kernel)
GROUP BY p.run_id, p.label, p.git_commit, p.git_branch, p.started_at, p.tags, k.kernel_demangled
ORDER BY p.run_id, kernel, demangled
