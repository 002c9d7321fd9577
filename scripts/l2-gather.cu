// How fast this GPU gathers random rows of B from L2 (NOTES.md, "SpMM step 24"). Not part of the library: a
// standalone measurement, run on the GPU machine with
//
//     nvcc -O3 -arch=sm_90 -o /tmp/l2-gather scripts/l2-gather.cu && /tmp/l2-gather
//
// Each subwarp of W lanes reads whole rows of W float4 (W = 8: a 128-byte row, a 32-column f32 tile; W = 32:
// 512 bytes, 128 columns), at rows drawn by a hash, U independent rows in flight per lane and no dependent
// chain: the gathers of a tiled SpMM with every latency hidden. B of 4-32 MB stays in L2 (50 MB) and misses L1
// almost always (256 KB per SM); 512 MB goes to DRAM. Bytes delivered to the SMs per second, median of 7
// event-timed launches.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>
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

template <int W, int U>
__global__ void __launch_bounds__(256) gather(const float4* __restrict__ B, unsigned rows, int iters, float* out) {
  const unsigned sub = (blockIdx.x * blockDim.x + threadIdx.x) / W;
  const int lane = threadIdx.x % W;
  float acc = 0.f;
  for (int it = 0; it < iters; ++it) {
    float4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const unsigned r = mix(sub * 0x9e3779b1u + static_cast<unsigned>(it * U + u)) % rows;
      v[u] = __ldg(B + static_cast<size_t>(r) * W + lane);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) acc += v[u].x + v[u].y + v[u].z + v[u].w;
  }
  if (acc == 1234.5f) out[0] = acc;  // never true for the zero-filled B: keeps the loads
}

template <int W, int U>
int run(const float4* B, size_t bytes, float* out) {
  const unsigned rows = static_cast<unsigned>(bytes / (16 * W));
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int blocks = sms * 8;  // 2048 threads per SM
  const int iters = 256;
  const double moved = static_cast<double>(blocks) * 256 * iters * U * 16;
  std::vector<float> t;
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int rep = 0; rep < 8; ++rep) {
    CK(cudaEventRecord(a));
    gather<W, U><<<blocks, 256>>>(B, rows, iters, out);
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float ms;
    CK(cudaEventElapsedTime(&ms, a, b));
    if (rep > 0) t.push_back(ms);  // the first is a warm-up
  }
  std::sort(t.begin(), t.end());
  const double ms = t[t.size() / 2];
  printf("B %6.1f MB  row %4d bytes  %2d rows in flight per lane: %8.3f ms  %6.2f TB/s\n", bytes / 1048576.0, 16 * W, U,
         ms, moved / (ms * 1e-3) / 1e12);
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  return 0;
}

int main() {
  const size_t max_bytes = size_t(512) << 20;
  float4* B;
  float* out;
  CK(cudaMalloc(&B, max_bytes));
  CK(cudaMemset(B, 0, max_bytes));
  CK(cudaMalloc(&out, 4));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  printf("%s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);
  for (size_t mb : {4, 16, 32, 512}) {
    const size_t bytes = mb << 20;
    if (run<8, 4>(B, bytes, out) || run<8, 8>(B, bytes, out) || run<32, 4>(B, bytes, out) ||
        run<32, 8>(B, bytes, out))
      return 1;
  }
  return 0;
}
