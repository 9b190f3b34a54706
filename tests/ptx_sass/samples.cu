// One kernel per PTX instruction whose SASS opcode wsperf relies on (see
// tests/test_ptx_sass_map.py). Each body is the instruction and the least around it to
// keep ptxas from deleting it. Compiled for sm_90a and sm_100a; kernels an architecture
// lacks compile to empty bodies there.
#include <cstdint>

#if defined(__CUDA_ARCH_FEAT_SM100_ALL)
#define SM100 1
#endif
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define SM90 1
#endif

__device__ __forceinline__ uint32_t smem(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }

extern "C" __global__ void k_tcgen05_alloc(uint32_t* out) {
#ifdef SM100
  __shared__ uint32_t slot;
  asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], 32;" :: "r"(smem(&slot)));
  asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;");
  __syncthreads();
  uint32_t t = slot;
  out[threadIdx.x] = t;
  asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, 32;" :: "r"(t));
#endif
}

extern "C" __global__ void k_tcgen05_mma_commit(uint32_t taddr, uint64_t adesc, uint64_t bdesc, uint32_t idesc) {
#ifdef SM100
  __shared__ uint64_t bar;
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %4, 0;\n"
               "tcgen05.mma.cta_group::1.kind::f16 [%0], %1, %2, %3, p;\n}"
               :: "r"(taddr), "l"(adesc), "l"(bdesc), "r"(idesc), "r"(threadIdx.x));
  asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];" :: "r"(smem(&bar)));
#endif
}

extern "C" __global__ void k_tcgen05_mma_f8(uint32_t taddr, uint64_t adesc, uint64_t bdesc, uint32_t idesc) {
#ifdef SM100
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %4, 0;\n"
               "tcgen05.mma.cta_group::1.kind::f8f6f4 [%0], %1, %2, %3, p;\n}"
               :: "r"(taddr), "l"(adesc), "l"(bdesc), "r"(idesc), "r"(threadIdx.x));
#endif
}

extern "C" __global__ void k_tcgen05_ld_st(uint32_t taddr, uint32_t* out) {
#ifdef SM100
  uint32_t v;
  asm volatile("tcgen05.ld.sync.aligned.32x32b.x1.b32 {%0}, [%1];" : "=r"(v) : "r"(taddr));
  asm volatile("tcgen05.wait::ld.sync.aligned;");
  asm volatile("tcgen05.st.sync.aligned.32x32b.x1.b32 [%0], {%1};" :: "r"(taddr), "r"(v + 1));
  asm volatile("tcgen05.wait::st.sync.aligned;");
  out[threadIdx.x] = v;
#endif
}

extern "C" __global__ void k_tcgen05_cp(uint32_t taddr, uint64_t sdesc) {
#ifdef SM100
  asm volatile("tcgen05.cp.cta_group::1.128x256b [%0], %1;" :: "r"(taddr), "l"(sdesc));
#endif
}

extern "C" __global__ void k_tma_load(const __grid_constant__ uint64_t tmap[16], float* out) {
#if defined(SM90) || defined(SM100)
  __shared__ alignas(128) float tile[32 * 32];
  __shared__ uint64_t bar;
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
               :: "r"(smem(tile)), "l"(tmap), "r"(0), "r"((int)blockIdx.x), "r"(smem(&bar)) : "memory");
  out[threadIdx.x] = tile[threadIdx.x];
#endif
}

extern "C" __global__ void k_bulk_copy(const float* src, float* out) {
#if defined(SM90) || defined(SM100)
  __shared__ alignas(128) float buf[256];
  __shared__ uint64_t bar;
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], 1024, [%2];"
               :: "r"(smem(buf)), "l"(src), "r"(smem(&bar)) : "memory");
  out[threadIdx.x] = buf[threadIdx.x];
#endif
}

extern "C" __global__ void k_cp_async(const float4* src, float4* out) {
  __shared__ float4 buf[128];
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(smem(&buf[threadIdx.x])), "l"(src + threadIdx.x));
  asm volatile("cp.async.wait_all;");
  out[threadIdx.x] = buf[threadIdx.x ^ 1];
}

extern "C" __global__ void k_mbarrier_try_wait(uint32_t parity, int* out) {
  __shared__ uint64_t bar;
  uint32_t done;
  asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}"
               : "=r"(done) : "r"(smem(&bar)), "r"(parity) : "memory");
  out[threadIdx.x] = done;
}

extern "C" __global__ void __launch_bounds__(256, 1) k_setmaxnreg(int* out) {
#if defined(SM90) || defined(SM100)
  if (threadIdx.x < 128) asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
  else asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
  out[threadIdx.x] = 1;
#endif
}

extern "C" __global__ void k_elect(int* out) {
  uint32_t leader;
  asm volatile("{\n.reg .pred p;\nelect.sync _|p, 0xffffffff;\nselp.u32 %0, 1, 0, p;\n}" : "=r"(leader));
  out[threadIdx.x] = leader;
}

extern "C" __global__ void __cluster_dims__(2, 1, 1) k_cluster_barrier(int* out) {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
  out[threadIdx.x] = 1;
}

extern "C" __global__ void k_wgmma(uint64_t adesc, uint64_t bdesc, float* out) {
#ifdef SM90
  float d[32];
#pragma unroll
  for (int i = 0; i < 32; ++i) d[i] = 0.f;
  asm volatile("wgmma.fence.sync.aligned;");
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
      "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, %32, %33, 1, 1, 1, 0, 0;"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(adesc), "l"(bdesc));
  asm volatile("wgmma.commit_group.sync.aligned;\nwgmma.wait_group.sync.aligned 0;" ::: "memory");
#pragma unroll
  for (int i = 0; i < 32; ++i) out[threadIdx.x * 32 + i] = d[i];
#endif
}

extern "C" __global__ void k_mma_sync(const uint32_t* a, const uint32_t* b, float* out) {
  float d0 = 0, d1 = 0, d2 = 0, d3 = 0;
  uint32_t t = threadIdx.x;
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
               : "r"(a[t]), "r"(a[t + 32]), "r"(a[t + 64]), "r"(a[t + 96]), "r"(b[t]), "r"(b[t + 32]));
  out[t * 4] = d0; out[t * 4 + 1] = d1; out[t * 4 + 2] = d2; out[t * 4 + 3] = d3;
}
