/*
NVTX range totals of $exports, as `nsys stats --report nvtx_sum` gives them, plus the
GPU time each range caused: kernels whose launch call was made on the range's thread
while the range was open (kernel_ns, kernels). Marks and ranges never closed are left
out. One row per (domain, text), most time first.
*/
WITH r AS (
    SELECT row_number() OVER () AS rid, *
    FROM nsys_nvtx
    WHERE list_contains($exports, export_id) AND kind <> 'mark' AND end_ns IS NOT NULL
),
calls AS (
    -- One launch per (thread, correlation id): nsys 2022.2 records two API rows per launch
    -- ('cudaLaunchKernel' and 'cudaLaunchKernel_v7000') with the same correlation id.
    SELECT export_id, global_tid, global_pid, correlation_id, min(start_ns) AS start_ns
    FROM nsys_runtime
    WHERE list_contains($exports, export_id) AND kernels > 0
    GROUP BY ALL
),
launched AS (
    SELECT r.rid, count(k.record_id) AS kernels, coalesce(sum(k.duration_ns), 0) AS kernel_ns
    FROM r
    JOIN calls AS c
      ON c.export_id = r.export_id AND c.global_tid = r.global_tid
     AND c.start_ns >= r.start_ns AND c.start_ns < r.end_ns
    JOIN nsys_kernels AS k
      ON k.export_id = c.export_id AND k.global_pid = c.global_pid AND k.correlation_id = c.correlation_id
    GROUP BY r.rid
)
SELECT r.domain, r.text, any_value(r.kind) AS kind,
       count(*) AS ranges,
       sum(r.duration_ns)::BIGINT AS total_ns,
       quantile_cont(r.duration_ns, 0.5) AS median_ns,
       min(r.duration_ns) AS min_ns,
       max(r.duration_ns) AS max_ns,
       coalesce(sum(l.kernels), 0)::BIGINT AS kernels,
       coalesce(sum(l.kernel_ns), 0)::BIGINT AS kernel_ns
FROM r LEFT JOIN launched AS l USING (rid)
GROUP BY r.domain, r.text
ORDER BY total_ns DESC, r.domain NULLS FIRST, r.text
