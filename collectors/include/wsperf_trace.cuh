// wsperf_trace.cuh: in-kernel role events for CUDA C++ kernels, read by `wsperf timeline`.
//
// Build with `nvcc $(wsperf trace-include) ...`; define WSPERF_TRACE_DISABLE to compile every
// macro to nothing (the uninstrumented build of the same source, for overhead measurements).
//
// Device side (one lane per warp records; the others only keep the warp's slot counter):
//   WSPERF_TRACE_INIT(ctx, trace, role);               // once per warp, after its role is known
//   WSPERF_EVENT(ctx, event, phase, stage, seq);       // one 32-byte record per call
//   WSPERF_BEGIN(ctx, event, stage, seq) / WSPERF_END(ctx, event, stage, seq)
// `trace` is a wsperf_trace_t passed by value as a kernel argument. Call the macros from
// warp-uniform code (every active lane of the warp, or always the same lanes): each lane keeps
// the slot counter in a register, and the lowest active lane writes the record.
//
// Host side: wsperf_trace_alloc(&t, ctas, warps_per_cta, slots_per_warp, cta_stride) and
// wsperf_trace_dump(t, path, kernel, roles_json, events_json). From PyTorch, allocate a uint8
// CUDA tensor of wsperf_trace_bytes(...) bytes, build the same struct from tensor.data_ptr(),
// and write the file with wsperf.collectors.timeline.dump_tensor (same layout).
//
// Record (32 bytes, little-endian, one per event; a record whose t_ns is 0 is an unused slot):
//   off size field  meaning
//    0   8   t_ns   %globaltimer, ns (GPU-wide clock; same clock on every SM)
//    8   4   clk    low 32 bits of %clock64 on the recording SM (cycles, for sub-tick order)
//   12   4   sm     %smid
//   16   4   cta    linear CTA index (blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z))
//   20   2   warp   warp index inside the CTA (linear thread index / 32)
//   22   1   role   WSPERF_ROLE_* (0 producer, 1 consumer, 2 epilogue, 3 other; >= 16 user)
//   23   1   phase  0 instant, 1 begin of an interval, 2 end of an interval
//   24   2   event  WSPERF_EV_* (0 kernel, 1 wait, 2 copy, 3 compute, 4 epilogue, 5 release;
//                   >= 16 user-defined, named in the dump's events map)
//   26   2   stage  ring stage index (0xffff: none)
//   28   4   seq    caller's iteration / tile counter (pairs begins with ends, stages across roles)
// Slots: CTAs whose linear index is a multiple of cta_stride record; sampled CTA k = cta /
// cta_stride owns warps_per_cta * slots_per_warp consecutive records, warp w the slice
// [(k * warps_per_cta + w) * slots_per_warp, +slots_per_warp). Events past a warp's slots are
// dropped (the file then shows slots_per_warp records for that warp).
//
// File written by wsperf_trace_dump: one line of JSON (format "wsperf-trace", version 1,
// kernel, record_bytes, ctas, cta_stride, warps_per_cta, slots_per_warp, roles, events), a
// newline, then the raw records of the whole buffer. A DSL's own profiler output converts to
// this format by writing the same header line and records.
#pragma once
#include <cstdint>
#include <cstdio>
#include <cuda_runtime.h>

enum : uint8_t { WSPERF_ROLE_PRODUCER = 0, WSPERF_ROLE_CONSUMER = 1, WSPERF_ROLE_EPILOGUE = 2, WSPERF_ROLE_OTHER = 3 };
enum : uint16_t {
  WSPERF_EV_KERNEL = 0,    // the warp's lifetime: begin at entry, end at exit
  WSPERF_EV_WAIT = 1,      // waiting on a barrier (full for consumers, empty for producers)
  WSPERF_EV_COPY = 2,      // producer moves one stage (issue to handoff)
  WSPERF_EV_COMPUTE = 3,   // consumer computes on one stage
  WSPERF_EV_EPILOGUE = 4,  // work after the main loop (stores, reductions)
  WSPERF_EV_RELEASE = 5    // a stage handed back (instant)
};
enum : uint8_t { WSPERF_INSTANT = 0, WSPERF_BEGIN_PHASE = 1, WSPERF_END_PHASE = 2 };
#define WSPERF_NO_STAGE 0xffffu

struct wsperf_record_t {
  uint64_t t_ns;
  uint32_t clk, sm, cta;
  uint16_t warp;
  uint8_t role, phase;
  uint16_t event, stage;
  uint32_t seq;
};
static_assert(sizeof(wsperf_record_t) == 32, "the documented record is 32 bytes");

struct wsperf_trace_t {
  wsperf_record_t* records;  // null: tracing off for this launch
  uint32_t ctas, cta_stride, warps_per_cta, slots_per_warp;
};

struct wsperf_ctx_t {
  wsperf_record_t* slot;  // next record of this warp; null when this CTA is not sampled
  uint32_t left;          // slots left
  uint32_t sm, cta;
  uint16_t warp;
  uint8_t role, leader;
};

__device__ __forceinline__ uint64_t wsperf_globaltimer() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ wsperf_ctx_t wsperf_ctx_init(const wsperf_trace_t& t, uint8_t role) {
  wsperf_ctx_t c;
  const uint32_t tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  c.cta = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  c.warp = static_cast<uint16_t>(tid / 32);
  c.role = role;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(c.sm));
  c.slot = nullptr;
  c.left = 0;
  if (t.records != nullptr && c.cta % t.cta_stride == 0 && c.warp < t.warps_per_cta) {
    c.slot = t.records + (static_cast<uint64_t>(c.cta / t.cta_stride) * t.warps_per_cta + c.warp) * t.slots_per_warp;
    c.left = t.slots_per_warp;
  }
  return c;
}

__device__ __forceinline__ void wsperf_record(wsperf_ctx_t& c, uint16_t event, uint8_t phase, uint32_t stage, uint32_t seq) {
  if (c.left == 0) return;
  const uint32_t active = __activemask();
  const uint32_t lane = threadIdx.x % 32;  // blockDim.x is a multiple of 32 in the kernels this serves
  if (lane == static_cast<uint32_t>(__ffs(active) - 1)) {
    const uint64_t t = wsperf_globaltimer();
    const uint32_t clk = static_cast<uint32_t>(clock64());
    // Two 16-byte stores: fire-and-forget, the warp does not wait for them.
    uint4* p = reinterpret_cast<uint4*>(c.slot);
    p[0] = make_uint4(static_cast<uint32_t>(t), static_cast<uint32_t>(t >> 32), clk, c.sm);
    p[1] = make_uint4(c.cta, static_cast<uint32_t>(c.warp) | (static_cast<uint32_t>(c.role) << 16) | (static_cast<uint32_t>(phase) << 24),
                      static_cast<uint32_t>(event) | (static_cast<uint32_t>(stage & 0xffffu) << 16), seq);
  }
  ++c.slot;
  --c.left;
}

#ifndef WSPERF_TRACE_DISABLE
#define WSPERF_TRACE_INIT(ctx, trace, role) wsperf_ctx_t ctx = wsperf_ctx_init((trace), (role))
#define WSPERF_SET_ROLE(ctx, r) ((ctx).role = (r))
#define WSPERF_EVENT(ctx, ev, phase, stage, seq) wsperf_record((ctx), (ev), (phase), (stage), (seq))
#else
#define WSPERF_TRACE_INIT(ctx, trace, role) ((void)(trace))
#define WSPERF_SET_ROLE(ctx, r) ((void)0)
#define WSPERF_EVENT(ctx, ev, phase, stage, seq) ((void)0)
#endif
#define WSPERF_BEGIN(ctx, ev, stage, seq) WSPERF_EVENT(ctx, ev, WSPERF_BEGIN_PHASE, stage, seq)
#define WSPERF_END(ctx, ev, stage, seq) WSPERF_EVENT(ctx, ev, WSPERF_END_PHASE, stage, seq)
#define WSPERF_INSTANT_EVENT(ctx, ev, stage, seq) WSPERF_EVENT(ctx, ev, WSPERF_INSTANT, stage, seq)

// ---- host helpers ----
inline size_t wsperf_trace_bytes(uint32_t ctas, uint32_t warps_per_cta, uint32_t slots_per_warp, uint32_t cta_stride) {
  const uint32_t sampled = (ctas + cta_stride - 1) / cta_stride;
  return static_cast<size_t>(sampled) * warps_per_cta * slots_per_warp * sizeof(wsperf_record_t);
}

// Allocate and zero the buffer; returns the CUDA error (cudaSuccess on success).
inline cudaError_t wsperf_trace_alloc(wsperf_trace_t* t, uint32_t ctas, uint32_t warps_per_cta, uint32_t slots_per_warp,
                                      uint32_t cta_stride = 1) {
  t->ctas = ctas;
  t->cta_stride = cta_stride ? cta_stride : 1;
  t->warps_per_cta = warps_per_cta;
  t->slots_per_warp = slots_per_warp;
  const size_t n = wsperf_trace_bytes(ctas, warps_per_cta, slots_per_warp, t->cta_stride);
  cudaError_t e = cudaMalloc(reinterpret_cast<void**>(&t->records), n);
  if (e != cudaSuccess) return e;
  return cudaMemset(t->records, 0, n);
}

inline cudaError_t wsperf_trace_clear(const wsperf_trace_t& t) {
  return cudaMemset(t.records, 0, wsperf_trace_bytes(t.ctas, t.warps_per_cta, t.slots_per_warp, t.cta_stride));
}

// Write the header line and the records. roles_json / events_json are JSON objects mapping
// numbers to names, e.g. "{\"0\":\"producer\",\"1\":\"consumer\"}" (null: the built-in names).
// Returns 0 on success, -1 on a CUDA or file error.
inline int wsperf_trace_dump(const wsperf_trace_t& t, const char* path, const char* kernel, const char* roles_json = nullptr,
                             const char* events_json = nullptr) {
  const size_t n = wsperf_trace_bytes(t.ctas, t.warps_per_cta, t.slots_per_warp, t.cta_stride);
  void* host = malloc(n);
  if (host == nullptr) return -1;
  if (cudaMemcpy(host, t.records, n, cudaMemcpyDeviceToHost) != cudaSuccess) {
    free(host);
    return -1;
  }
  FILE* f = fopen(path, "wb");
  if (f == nullptr) {
    free(host);
    return -1;
  }
  fprintf(f,
          "{\"format\":\"wsperf-trace\",\"version\":1,\"kernel\":\"%s\",\"record_bytes\":32,\"ctas\":%u,"
          "\"cta_stride\":%u,\"warps_per_cta\":%u,\"slots_per_warp\":%u,\"roles\":%s,\"events\":%s}\n",
          kernel, t.ctas, t.cta_stride, t.warps_per_cta, t.slots_per_warp, roles_json ? roles_json : "{}",
          events_json ? events_json : "{}");
  const size_t w = fwrite(host, 1, n, f);
  free(host);
  return (fclose(f) == 0 && w == n) ? 0 : -1;
}
