/*
Per-kernel statistics of the loaded Nsight Systems exports ($exports: a list of
export_id), one row per kernel (demangled name, as `nsys stats --report
cuda_gpu_kern_sum` groups them), most GPU time first.

share is the kernel's part of all kernel time in those exports: the sum of every
kernel's duration. Kernels that overlap on several streams each count their own
duration, so the shares add up to 1 while their total may exceed the GPU's busy time
(nsys_overlap.sql gives that). configs counts the distinct launch configurations
(grid and block) the kernel ran with.
*/
WITH k AS (
    SELECT * FROM nsys_kernels WHERE list_contains($exports, export_id)
),
total AS (
    SELECT sum(duration_ns)::DOUBLE AS all_ns FROM k
)
SELECT
    k.kernel_demangled,
    any_value(k.kernel_short) AS kernel_short,
    count(*) AS launches,
    sum(k.duration_ns)::BIGINT AS total_ns,
    avg(k.duration_ns) AS mean_ns,
    quantile_cont(k.duration_ns, 0.5) AS median_ns,
    quantile_cont(k.duration_ns, 0.1) AS p10_ns,
    quantile_cont(k.duration_ns, 0.9) AS p90_ns,
    min(k.duration_ns) AS min_ns,
    max(k.duration_ns) AS max_ns,
    stddev_samp(k.duration_ns) AS stddev_ns,
    sum(k.duration_ns) / nullif(any_value(total.all_ns), 0) AS share,
    count(DISTINCT (k.grid_x, k.grid_y, k.grid_z, k.block_x, k.block_y, k.block_z)) AS configs,
    count(DISTINCT (k.export_id, k.global_pid, k.device_id, k.context_id, k.stream_id)) AS streams
FROM k, total
GROUP BY k.kernel_demangled
ORDER BY total_ns DESC, k.kernel_demangled
