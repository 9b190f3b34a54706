/*
Instruction families per launch: which tensor, copy and synchronization paths the
generated SASS uses. One row per (launch, family) present, with how many SASS
instructions of the family the kernel holds (static, from `sass`) and how many warp-level
instructions of it executed (from `sass` per-PC counters, or from the per-opcode counts
in `opcodes` when the report has no source counters).

kind:   tensor | copy | sync | regs | memory | math
family: tcgen05 | wgmma | mma.sync | tma | cp.async | ld/st | mbarrier | cluster-barrier
        | elect | setmaxnreg | local-memory | ffma

The opcode patterns are SASS base mnemonics (what `opcodes.opcode` holds); each was
checked against disassembly of sm_90a (and, for tcgen05, sm_100a) code.
*/
WITH family(pattern, family, kind) AS (
    VALUES
        -- Blackwell tensor path: tcgen05.mma (UTC*MMA), tensor-memory copies/loads/stores
        ('UTC[A-Z]*MMA', 'tcgen05', 'tensor'),
        ('UTC(BAR|CP|SHIFT)', 'tcgen05', 'tensor'),
        ('(LD|ST)TM', 'tcgen05', 'tensor'),
        -- Hopper tensor path: wgmma.mma_async
        ('[HQIB]GMMA', 'wgmma', 'tensor'),
        -- Warp-level mma.sync (Volta..): the slow path on sm_90 and sm_100
        ('[HIDB]MMA', 'mma.sync', 'tensor'),
        -- Bulk and tensor copies through the TMA unit
        ('UTMA(LDG|STG|REDG|PF)|UBLK(CP|RED|PF)', 'tma', 'copy'),
        -- Ampere-style cp.async (global -> shared without registers)
        ('LDGSTS', 'cp.async', 'copy'),
        -- Plain loads and stores that stage data through registers
        ('LDG|STG|LDS|STS|LDSM', 'ld/st', 'copy'),
        ('SYNCS', 'mbarrier', 'sync'),
        ('UCGABAR_[A-Z]+', 'cluster-barrier', 'sync'),
        ('ELECT', 'elect', 'sync'),
        ('USETMAXREG', 'setmaxnreg', 'regs'),
        ('LDL|STL', 'local-memory', 'memory'),
        ('FFMA', 'ffma', 'math')
),
per_opcode AS (
    -- Static count and executed count per opcode; opcodes-table counts only where the
    -- report has no per-PC rows for that launch.
    SELECT launch_id, opcode, count(*) AS static_count, sum(inst_executed) AS executed
    FROM sass
    GROUP BY launch_id, opcode
    UNION ALL
    SELECT o.launch_id, o.opcode, NULL AS static_count, o.executed
    FROM opcodes AS o
    WHERE NOT EXISTS (SELECT 1 FROM sass AS s WHERE s.launch_id = o.launch_id)
)
SELECT
    p.launch_id,
    f.kind,
    f.family,
    sum(p.static_count)::BIGINT AS static_count,
    sum(p.executed)::BIGINT AS executed
FROM per_opcode AS p
JOIN family AS f ON regexp_full_match(p.opcode, f.pattern)
GROUP BY p.launch_id, f.kind, f.family
ORDER BY p.launch_id, f.kind, f.family
