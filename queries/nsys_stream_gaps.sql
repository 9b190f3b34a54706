/*
finding: gpu-waits-on-host
question: Does a stream sit idle between its operations because the CPU has not issued the next one yet?
evidence: [nsys_kernels, nsys_memcpy, nsys_runtime start/end by correlation id]
threshold: {min_host_wait_share: 0.2, min_gaps: 10}
remedy: >
  launch-bound (each kernel is shorter than the call that launches it): capture the
  sequence in a CUDA graph, fuse kernels, or make the kernel persistent. host-bound (the
  CPU does other work between launches): drop per-iteration synchronization
  (cudaDeviceSynchronize, cudaMemcpy to the host, cudaStreamSynchronize), move host work
  off the launch thread, use async copies.

One row per stream (export, process, device, context, stream) of $exports, over its GPU
operations in time order (kernels, memory copies and sets). A gap is the idle time
between one operation's end and the next one's start. A gap is the host's when the API
call that issued the next operation started only after the previous operation had
ended: the GPU was waiting for the CPU, not for its own work or a dependency.
host_wait_share = host-side idle time / the stream's span (first start to last end).

status: confirmed when host_wait_share >= $min_host_wait_share, over at least $min_gaps
gaps; no_data with fewer gaps (too few launches to say). kind: launch-bound when the
median kernel runs no longer than the median launch call takes on the CPU (the CPU
cannot issue work as fast as the GPU retires it), else host-bound.
*/
WITH calls AS (
    -- One call per (process, correlation id): a kernel's or copy's issuing API call.
    SELECT export_id, global_pid, correlation_id, min(start_ns) AS api_start_ns, min(duration_ns) AS api_ns
    FROM nsys_runtime
    WHERE list_contains($exports, export_id) AND correlation_id IS NOT NULL
    GROUP BY ALL
),
ops AS (
    SELECT export_id, global_pid, device_id, context_id, stream_id, correlation_id, start_ns, end_ns, duration_ns,
           'kernel' AS op, record_id AS ord
    FROM nsys_kernels WHERE list_contains($exports, export_id)
    UNION ALL
    SELECT export_id, global_pid, device_id, context_id, stream_id, correlation_id, start_ns, end_ns, duration_ns,
           operation AS op, NULL AS ord
    FROM nsys_memcpy WHERE list_contains($exports, export_id)
),
seq AS (
    SELECT o.*, c.api_start_ns, c.api_ns,
           max(o.end_ns) OVER (PARTITION BY o.export_id, o.global_pid, o.device_id, o.context_id, o.stream_id
                               ORDER BY o.start_ns, o.ord ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end_ns
    FROM ops AS o
    LEFT JOIN calls AS c USING (export_id, global_pid, correlation_id)
),
gaps AS (
    SELECT *, greatest(start_ns - prev_end_ns, 0) AS gap_ns,
           coalesce(api_start_ns >= prev_end_ns, false) AS host_late
    FROM seq
),
streams AS (
    SELECT export_id, global_pid, any_value(device_id) AS device_id, context_id, stream_id,
           count(*) FILTER (WHERE op = 'kernel') AS kernels,
           count(*) FILTER (WHERE op <> 'kernel') AS copies,
           min(start_ns) AS first_start_ns,
           max(end_ns) AS last_end_ns,
           max(end_ns) - min(start_ns) AS span_ns,
           sum(duration_ns) AS busy_ns,
           count(prev_end_ns) AS gaps,
           coalesce(sum(gap_ns), 0)::BIGINT AS idle_ns,
           coalesce(sum(gap_ns) FILTER (WHERE host_late), 0)::BIGINT AS host_wait_ns,
           count(*) FILTER (WHERE host_late) AS host_late_gaps,
           quantile_cont(gap_ns, 0.5) AS median_gap_ns,
           quantile_cont(duration_ns, 0.5) FILTER (WHERE op = 'kernel') AS median_kernel_ns,
           quantile_cont(api_ns, 0.5) FILTER (WHERE op = 'kernel') AS median_launch_call_ns
    FROM gaps
    GROUP BY export_id, global_pid, context_id, stream_id
)
SELECT *,
       host_wait_ns / nullif(span_ns, 0)::DOUBLE AS host_wait_share,
       CASE WHEN gaps < $min_gaps THEN 'no_data'
            WHEN host_wait_ns / nullif(span_ns, 0)::DOUBLE >= $min_host_wait_share THEN 'confirmed'
            ELSE 'rejected' END AS status,
       CASE WHEN median_kernel_ns <= median_launch_call_ns THEN 'launch-bound' ELSE 'host-bound' END AS kind
FROM streams
ORDER BY export_id, host_wait_ns DESC, global_pid, context_id, stream_id
