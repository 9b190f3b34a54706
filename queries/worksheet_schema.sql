/*
What `wsperf.analyses.handoffs.store_sheets` writes: the handoff worksheet (`wsperf
worksheet`, analyses/worksheet.py) of the generated code a bundle keeps (collect's
generated/ folder, or `--source` files), one set of rows per kernel, so SQL can join it
with the hang capture, the sanitizer's findings and the profile by kernel name (the
mangled `.entry` name, as cuda-gdb, compute-sanitizer and Nsight Compute name it) and by
source line. Applied before the rows are written; idempotent.

Barriers are the worksheet's: a (symbol, byte offset) that an mbarrier.init initializes,
or the group of them one ring-indexed operation may address. PTX lines are 1-based lines
of the PTX module read; source lines come from its `.loc` directives (NULL when the code
was built without -lineinfo / -G).
*/

CREATE TABLE IF NOT EXISTS ws_barriers (
    kernel VARCHAR NOT NULL,      -- the kernel's .entry name (mangled)
    barrier VARCHAR NOT NULL,     -- symbol, symbol+offset or symbol+{offsets} (a ring's stages)
    init_count INTEGER,           -- mbarrier.init's count; NULL: not a constant, or its barriers differ
    init_ptx_line INTEGER,        -- where it is initialized
    decided BOOLEAN NOT NULL,     -- false: some operation's index is not decided by the PTX (any barrier of the symbol)
    slots INTEGER[],              -- byte offsets of the barriers in the group, from the symbol
    origin VARCHAR NOT NULL       -- the generated file the sheet was read from
);

CREATE TABLE IF NOT EXISTS ws_arrivals (
    kernel VARCHAR NOT NULL,
    barrier VARCHAR NOT NULL,     -- ws_barriers.barrier
    role VARCHAR NOT NULL,        -- the worksheet's role of the arriving code, e.g. 'consumer (warps 1-4)'
    threads INTEGER,              -- threads of the CTA that execute the arrive; NULL: not derived
    kind VARCHAR NOT NULL,        -- arrive | arrive.expect_tx | complete_tx | tcgen05.commit | cp.async.mbarrier.arrive
    arrivals INTEGER,             -- arrivals it adds per phase (threads x 1; 0 for complete_tx); NULL: not derived
    tx_bytes VARCHAR,             -- expect_tx / complete_tx byte count as written
    ptx_line INTEGER NOT NULL,
    source_file VARCHAR,          -- the .loc of the PTX line: file
    source_line INTEGER           -- and line
);

CREATE TABLE IF NOT EXISTS ws_waits (
    kernel VARCHAR NOT NULL,
    barrier VARCHAR NOT NULL,     -- ws_barriers.barrier
    role VARCHAR NOT NULL,        -- the worksheet's role of the waiting code
    threads INTEGER,              -- threads that execute the wait; NULL: not derived
    parity VARCHAR,               -- the parity operand as the sheet resolved it
    ptx_line INTEGER NOT NULL,
    source_file VARCHAR,          -- the .loc of the wait: the innermost file (an inlined wait helper's)
    source_line INTEGER,
    call_file VARCHAR,            -- the inlined_at of that .loc: the caller's file
    call_line INTEGER             -- and line (what cuda-gdb shows as the kernel's own line)
);

CREATE TABLE IF NOT EXISTS ws_flags (
    kernel VARCHAR NOT NULL,
    code INTEGER NOT NULL,        -- 1 init-in-role, 2 init-count, 3 cta-barrier-in-role, 4 tmem-not-freed, 5 missing-proxy-fence
    name VARCHAR NOT NULL,
    text VARCHAR NOT NULL,        -- the sheet's sentence: what is wrong and the fix
    basis VARCHAR NOT NULL,       -- evidence | assumption
    ptx_line INTEGER
);

-- The mbarrier words cuda-gdb read while the kernel hung (collect's hang/mbarriers.txt),
-- decoded with the layout measured on the H200 (collectors/mbarrier.py); one row per word.
-- `confirmed`: the word's expected count is the barrier's init count in ws_barriers (its
-- address is taken as that barrier's only then).
CREATE TABLE IF NOT EXISTS ws_mbarrier_words (
    kernel VARCHAR NOT NULL,
    barrier VARCHAR NOT NULL,     -- ws_barriers.barrier
    slot INTEGER NOT NULL,        -- index of the barrier in the group (ws_barriers.slots, sorted)
    block_x INTEGER NOT NULL,     -- the CTA read
    block_y INTEGER NOT NULL,
    block_z INTEGER NOT NULL,
    address UBIGINT NOT NULL,     -- shared-window address read
    word UBIGINT,                 -- NULL: cuda-gdb could not read it
    phase_parity INTEGER,         -- parity of the phase in progress
    expected INTEGER,             -- arrivals each phase needs
    pending_arrivals INTEGER,     -- still owed in the phase in progress
    pending_tx BIGINT,            -- tx bytes still owed (negative: completed before expected)
    confirmed BOOLEAN NOT NULL
);

-- The waits the hung warps spin on, read from their registers while cuda-gdb was attached
-- (collect's hang/mbarriers.txt, `==== wait` sections; collectors/mbarrier.parse_waits): the
-- phase check before each warp's PC, the barrier address its operands compute and the
-- parity it asks for, joined with the word read at that address in the same CTA.
CREATE TABLE IF NOT EXISTS ws_live_waits (
    kernel VARCHAR,               -- the kernel whose barrier was read there (NULL: no word read at that address)
    barrier VARCHAR,              -- ws_barriers.barrier (NULL: as above)
    slot INTEGER,
    block_x INTEGER NOT NULL,
    block_y INTEGER NOT NULL,
    block_z INTEGER NOT NULL,
    warp INTEGER NOT NULL,        -- the warp index in its CTA
    sass_offset INTEGER,          -- the phase check's offset in its function (NULL: none before the PC)
    instruction VARCHAR,          -- the phase check, as cuda-gdb disassembled it
    address UBIGINT,              -- the barrier's shared-window address (NULL: a register was not read)
    parity INTEGER,               -- the parity the wait asks for
    phase_parity INTEGER,         -- the parity of the phase in progress, from the word (NULL: none read)
    contradiction BOOLEAN         -- the word says the phase waited for has completed, yet the warp spins
);
