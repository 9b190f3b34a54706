/*
Kernel durations of two sets of Nsight Systems exports ($base and $cand, lists of
export_id), one row per side and kernel launch configuration (demangled name, grid,
block, cluster) with every launch's duration: the samples `wsperf compare` tests with
Mann-Whitney. An export on both sides is on both (comparing a run with itself says
unchanged). $kernel: a regular expression on the demangled name, NULL for all.
*/
WITH k AS (
    SELECT 'base' AS side, * FROM nsys_kernels WHERE list_contains($base, export_id)
    UNION ALL
    SELECT 'cand' AS side, * FROM nsys_kernels WHERE list_contains($cand, export_id)
)
SELECT side, kernel_demangled, any_value(kernel_short) AS kernel_short,
       grid_x, grid_y, grid_z, block_x, block_y, block_z,
       -- no cluster: NULL (older exports) or 0 in nsys, a cluster of 1 either way
       coalesce(nullif(cluster_x, 0), 1) AS cluster_x, coalesce(nullif(cluster_y, 0), 1) AS cluster_y,
       coalesce(nullif(cluster_z, 0), 1) AS cluster_z,
       list(duration_ns ORDER BY start_ns) AS durations,
       list(record_id ORDER BY start_ns) AS record_ids,
       quantile_cont(duration_ns, 0.5) AS median_ns,
       sum(duration_ns)::BIGINT AS total_ns
FROM k
WHERE $kernel IS NULL OR regexp_matches(kernel_demangled, $kernel)
GROUP BY ALL
ORDER BY side, total_ns DESC, kernel_demangled
