/*
How kernels overlap across streams, per device of $exports: the time at least one
kernel ran (busy_ns), the time two or more ran at once (overlap_ns), and the idle time
between the first kernel's start and the last one's end. A sweep over kernel starts
(+1) and ends (-1), ends first at equal times so back-to-back kernels do not count as
overlapping.
*/
WITH k AS (
    SELECT export_id, device_id, global_pid, context_id, stream_id, start_ns, end_ns, duration_ns
    FROM nsys_kernels WHERE list_contains($exports, export_id)
),
ev AS (
    SELECT export_id, device_id, start_ns AS t, 1 AS d FROM k
    UNION ALL
    SELECT export_id, device_id, end_ns AS t, -1 AS d FROM k
),
run AS (
    SELECT export_id, device_id, t,
           sum(d) OVER w AS active,
           lead(t) OVER w - t AS until_next
    FROM ev
    WINDOW w AS (PARTITION BY export_id, device_id ORDER BY t, d ROWS UNBOUNDED PRECEDING)
),
swept AS (
    SELECT export_id, device_id,
           coalesce(sum(until_next) FILTER (WHERE active >= 1), 0)::BIGINT AS busy_ns,
           coalesce(sum(until_next) FILTER (WHERE active >= 2), 0)::BIGINT AS overlap_ns,
           max(active) AS max_concurrent
    FROM run GROUP BY ALL
),
per AS (
    SELECT export_id, device_id,
           count(*) AS kernels,
           count(DISTINCT (global_pid, context_id, stream_id)) AS streams,
           min(start_ns) AS first_start_ns,
           max(end_ns) AS last_end_ns,
           sum(duration_ns)::BIGINT AS kernel_ns
    FROM k GROUP BY ALL
)
SELECT p.*, last_end_ns - first_start_ns AS span_ns, s.busy_ns, s.overlap_ns, s.max_concurrent,
       (last_end_ns - first_start_ns) - s.busy_ns AS idle_ns,
       s.busy_ns / nullif(last_end_ns - first_start_ns, 0)::DOUBLE AS busy_share,
       s.overlap_ns / nullif(s.busy_ns, 0)::DOUBLE AS overlap_share
FROM per AS p JOIN swept AS s USING (export_id, device_id)
ORDER BY export_id, device_id
