// How fast a Hopper thread-block cluster gathers random rows of B from its blocks' shared memory (distributed
// shared memory, DSMEM), against the same gathers from L2 (NOTES.md, "SpMM step 45"). Not part of the library: a
// standalone measurement, run on the GPU machine with
//
//     nvcc -O3 -arch=sm_90 -o /tmp/dsmem-gather scripts/dsmem-gather.cu && /tmp/dsmem-gather
//
// The question: steps 22-24 found the large uniform f32 problems bound by the L2's gather bandwidth (about 7.8 TB/s
// for random 128- or 512-byte rows). A cluster of C blocks, one per SM, holds C x 192 KB of shared memory: 3 MB at
// C = 16, all of B for k = 4096 at n = 128. If its SMs gathered B's rows from one another's shared memory faster
// than from L2, an SpMM could keep B in the cluster. Each subwarp of W lanes reads whole rows of W float4 (W = 8:
// 128 bytes; W = 32: 512 bytes) at rows drawn by a hash, U independent rows in flight per lane and no dependent
// chain, as scripts/l2-gather.cu does. Modes: "local" (each block reads its own shared memory only: the SM's
// shared-memory ceiling), "cluster" (rows anywhere in the cluster's C slices, so (C - 1) / C of them remote), "l2"
// (the same rows from a global B of the cluster's total size, resident in L2). Bytes delivered to the SMs per
// second, median of 7 event-timed launches after one.
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

namespace cg = cooperative_groups;

#define CK(x)                                                    \
  do {                                                           \
    cudaError_t e = (x);                                         \
    if (e != cudaSuccess) {                                      \
      printf("%s: %s\n", #x, cudaGetErrorString(e));             \
      return 1;                                                  \
    }                                                            \
  } while (0)

__device__ __forceinline__ unsigned mix(unsigned x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

enum Mode { LOCAL = 0, CLUSTER = 1, L2 = 2 };

constexpr int SLICE_BYTES = 192 * 1024;

template <int W, int U>
__global__ void __launch_bounds__(1024, 1) gather(const float4* __restrict__ B, int mode, int iters, float* out) {
  extern __shared__ float4 slice[];
  cg::cluster_group cluster = cg::this_cluster();
  const unsigned csize = cluster.num_blocks();
  const unsigned rank = cluster.block_rank();
  constexpr unsigned rows_per_slice = SLICE_BYTES / (16 * W);
  for (unsigned i = threadIdx.x; i < rows_per_slice * W; i += blockDim.x) slice[i] = make_float4(0.f, 0.f, 0.f, 0.f);
  cluster.sync();
  const unsigned sub = (blockIdx.x * blockDim.x + threadIdx.x) / W;
  const unsigned lane = threadIdx.x % W;
  const unsigned rows = mode == LOCAL ? rows_per_slice : rows_per_slice * csize;
  // The global B of mode L2 is one cluster's worth; every cluster reads the same one.
  float acc = 0.f;
  for (int it = 0; it < iters; ++it) {
    float4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const unsigned r = mix(sub * 0x9e3779b1u + static_cast<unsigned>(it * U + u)) % rows;
      if (mode == L2) {
        v[u] = __ldg(B + static_cast<size_t>(r) * W + lane);
      } else {
        const unsigned owner = mode == LOCAL ? rank : r / rows_per_slice;
        const float4* s = cluster.map_shared_rank(slice, owner);
        v[u] = s[(r % rows_per_slice) * W + lane];
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) acc += v[u].x + v[u].y + v[u].z + v[u].w;
  }
  cluster.sync();  // no block leaves while another may still read its shared memory
  if (acc == 1234.5f) out[0] = acc;  // never true for zero-filled rows: keeps the loads
}

template <int W, int U>
int run(int csize, int mode, const float4* B, float* out) {
  auto kernel = gather<W, U>;
  CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, SLICE_BYTES));
  CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = csize;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.blockDim = dim3(1024);
  cfg.dynamicSmemBytes = SLICE_BYTES;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  cfg.gridDim = dim3(csize);
  int clusters = 0;
  CK(cudaOccupancyMaxActiveClusters(&clusters, kernel, &cfg));
  if (clusters == 0) {
    printf("cluster %2d: does not fit\n", csize);
    return 0;
  }
  cfg.gridDim = dim3(csize * clusters);  // one wave: every cluster resident at once
  const int iters = 256;
  const double moved = static_cast<double>(csize) * clusters * 1024 * iters * U * 16;
  std::vector<float> t;
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int rep = 0; rep < 8; ++rep) {
    CK(cudaEventRecord(a));
    CK(cudaLaunchKernelEx(&cfg, kernel, B, mode, iters, out));
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float ms;
    CK(cudaEventElapsedTime(&ms, a, b));
    if (rep > 0) t.push_back(ms);
  }
  std::sort(t.begin(), t.end());
  const double ms = t[t.size() / 2];
  const char* names[] = {"local", "cluster", "l2"};
  printf("cluster %2d (%3d SMs busy)  %-7s  row %3d bytes  %d rows in flight per lane: %8.3f ms  %6.2f TB/s\n", csize,
         csize * clusters, names[mode], 16 * W, U, ms, moved / (ms * 1e-3) / 1e12);
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  return 0;
}

int main() {
  float4* B;
  float* out;
  const size_t bytes = size_t(16) * SLICE_BYTES;
  CK(cudaMalloc(&B, bytes));
  CK(cudaMemset(B, 0, bytes));
  CK(cudaMalloc(&out, 4));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  printf("%s, %d SMs, L2 %d MB; slices of %d KB, 1024 threads per block, one block per SM\n", prop.name,
         prop.multiProcessorCount, prop.l2CacheSize >> 20, SLICE_BYTES / 1024);
  for (int csize : {2, 4, 8, 16}) {
    for (int mode : {LOCAL, CLUSTER, L2}) {
      if (run<8, 4>(csize, mode, B, out) || run<8, 8>(csize, mode, B, out) || run<32, 4>(csize, mode, B, out) ||
          run<32, 8>(csize, mode, B, out))
        return 1;
    }
  }
  return 0;
}
