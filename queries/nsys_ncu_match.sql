/*
Which kernel of the Nsight Systems exports $exports each Nsight Compute launch ($ids, a
list of launch_id) is, and its share of GPU time there. A launch matches the nsys
kernels of the same name and launch configuration (grid and block; cluster too when
both tools recorded one): by mangled name, else demangled name, else function name
(ncu's kernel_function = nsys's kernel_short), the first that finds any. share is that
configuration's part of all kernel time in the exports; name_share the part of every
configuration of the kernel. nsys_gpu names the GPU(s) the matched nsys kernels ran on
and ncu_gpu the profiled launch's: when they differ the two files are not one run.
*/
WITH k AS (
    SELECT nk.*, g.name AS gpu_name
    FROM nsys_kernels AS nk
    LEFT JOIN nsys_gpus AS g ON g.export_id = nk.export_id AND g.device_id = nk.device_id
    WHERE list_contains($exports, nk.export_id)
),
total AS (
    SELECT sum(duration_ns)::DOUBLE AS all_ns FROM k
),
cfg AS (
    SELECT kernel_mangled, kernel_demangled, kernel_short, grid_x, grid_y, grid_z, block_x, block_y, block_z,
           -- No cluster is 0 in ncu and 0 or NULL in nsys; both mean a cluster of 1.
           coalesce(nullif(cluster_x, 0), 1) AS cx, coalesce(nullif(cluster_y, 0), 1) AS cy,
           coalesce(nullif(cluster_z, 0), 1) AS cz, cluster_x IS NULL AS no_cluster_column,
           count(*) AS launches, sum(duration_ns)::BIGINT AS total_ns,
           quantile_cont(duration_ns, 0.5) AS median_ns,
           string_agg(DISTINCT gpu_name, ', ' ORDER BY gpu_name) AS nsys_gpu
    FROM k GROUP BY ALL
),
names AS (
    SELECT kernel_demangled, sum(total_ns) AS name_ns FROM cfg GROUP BY ALL
),
l AS (
    SELECT la.launch_id, la.kernel_mangled, la.kernel_demangled, la.kernel_function, la.grid_x, la.grid_y,
           la.grid_z, la.block_x, la.block_y, la.block_z,
           coalesce(nullif(la.cluster_x, 0), 1) AS cx, coalesce(nullif(la.cluster_y, 0), 1) AS cy,
           coalesce(nullif(la.cluster_z, 0), 1) AS cz, r.device_name AS ncu_gpu
    FROM launches AS la LEFT JOIN reports AS r USING (report_id)
    WHERE list_contains($ids, la.launch_id)
),
matched AS (
    SELECT l.launch_id, l.ncu_gpu, c.*,
           CASE WHEN l.kernel_mangled = c.kernel_mangled THEN 1
                WHEN l.kernel_demangled = c.kernel_demangled THEN 2
                ELSE 3 END AS rank
    FROM l JOIN cfg AS c
      ON (l.kernel_mangled = c.kernel_mangled OR l.kernel_demangled = c.kernel_demangled
          OR l.kernel_function = c.kernel_short)
     AND (l.grid_x, l.grid_y, l.grid_z, l.block_x, l.block_y, l.block_z)
         = (c.grid_x, c.grid_y, c.grid_z, c.block_x, c.block_y, c.block_z)
     AND (c.no_cluster_column OR (l.cx, l.cy, l.cz) = (c.cx, c.cy, c.cz))
)
SELECT m.launch_id, m.kernel_demangled AS nsys_kernel, m.launches, m.total_ns, m.median_ns, m.nsys_gpu, m.ncu_gpu,
       m.total_ns / nullif(t.all_ns, 0) AS share,
       n.name_ns / nullif(t.all_ns, 0) AS name_share,
       CASE min(m.rank) OVER (PARTITION BY m.launch_id) WHEN 1 THEN 'mangled' WHEN 2 THEN 'demangled'
            ELSE 'function' END AS matched_by
FROM matched AS m, total AS t, names AS n
WHERE n.kernel_demangled = m.kernel_demangled
QUALIFY m.rank = min(m.rank) OVER (PARTITION BY m.launch_id)
ORDER BY m.launch_id, share DESC
