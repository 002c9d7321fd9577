// The ceiling of the tiled (Sputnik) SpMM design on this GPU, and the floor of a launch (NOTES.md, "SpMM
// step 22"). Not part of the library: a standalone measurement, run on the GPU machine with
//
//     nvcc -O3 -arch=sm_90 -o /tmp/spmm-ceiling scripts/spmm-ceiling.cu && /tmp/spmm-ceiling
//
// Ceiling: the design's inner loop with every B load a hit. Per nonzero a subwarp broadcasts (value, column
// offset) from shared memory and each lane loads one float4 of B (or two) and does 4 (8) FMAs; B is small
// (16-128 KB), so every load hits L1 (global B) or is served by shared memory (shared B). No real SpMM of this
// design can beat this rate of FLOPs. Floor: an empty launch, event-timed back to back behind a hold kernel
// as src/timing.rs times everything (and, for comparison, one launch at a time, which on this machine is
// slower and is not how the suite times).
#include <cstdio>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e)); return 1; } } while (0)

constexpr int kTile = 256;  // nonzeros per pass

__global__ void empty_kernel() {}
__global__ void hold_kernel(long long cycles) {
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {}
}
// Event pairs around `runs` back-to-back empty launches, all queued behind a hold kernel (as the library's
// timing does), median in us.
float held_floor(int blocks, int runs) {
  std::vector<cudaEvent_t> ev(2 * runs);
  for (auto& e : ev) cudaEventCreate(&e);
  hold_kernel<<<1, 1>>>(20000000LL);
  for (int i = 0; i < runs; ++i) {
    cudaEventRecord(ev[2 * i]);
    empty_kernel<<<blocks, 256>>>();
    cudaEventRecord(ev[2 * i + 1]);
  }
  cudaDeviceSynchronize();
  std::vector<float> t;
  for (int i = 0; i < runs; ++i) {
    float ms;
    cudaEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]);
    t.push_back(ms * 1e3f);
  }
  for (auto& e : ev) cudaEventDestroy(e);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// kVec float4 per lane: a warp covers 128 * kVec columns of a B row. kSmemB: B rows in shared memory.
template <int kVec, bool kSmemB>
__global__ void __launch_bounds__(256) gather(const float4* __restrict__ B, int brows, int passes, float* out) {
  __shared__ int4 idx4[kTile / 4];
  __shared__ float4 val4[kTile / 4];
  extern __shared__ float4 bsh[];
  const int lane = threadIdx.x & 31;
  const int row4 = 32 * kVec;  // float4 per B row
  for (int i = threadIdx.x; i < kTile; i += blockDim.x) {
    unsigned h = (i + 1) * 2654435761u ^ (blockIdx.x * 40503u + threadIdx.x / 32 * 977u);
    reinterpret_cast<int*>(idx4)[i] = (int)(h % brows) * row4;
    reinterpret_cast<float*>(val4)[i] = 1.0f + 1e-7f * (h & 1023);
  }
  if (kSmemB)
    for (int i = threadIdx.x; i < brows * row4; i += blockDim.x) bsh[i] = B[i];
  __syncthreads();
  float acc[4 * kVec] = {};
  for (int p = 0; p < passes; ++p) {
#pragma unroll 4
    for (int k = 0; k < kTile / 4; ++k) {
      const int4 c = idx4[k];
      const float4 v = val4[k];
      const int cs[4] = {c.x, c.y, c.z, c.w};
      const float vs[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
#pragma unroll
        for (int q = 0; q < kVec; ++q) {
          const float4 b = kSmemB ? bsh[cs[j] + lane + 32 * q] : __ldg(B + cs[j] + lane + 32 * q);
          acc[4 * q + 0] = fmaf(vs[j], b.x, acc[4 * q + 0]);
          acc[4 * q + 1] = fmaf(vs[j], b.y, acc[4 * q + 1]);
          acc[4 * q + 2] = fmaf(vs[j], b.z, acc[4 * q + 2]);
          acc[4 * q + 3] = fmaf(vs[j], b.w, acc[4 * q + 3]);
        }
      }
    }
  }
  float s = 0;
  for (int i = 0; i < 4 * kVec; ++i) s += acc[i];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

template <typename F>
float median_ms(F launch, int runs) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  for (int i = 0; i < 5; ++i) launch();
  std::vector<float> t;
  for (int i = 0; i < runs; ++i) {
    cudaEventRecord(a);
    launch();
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float ms;
    cudaEventElapsedTime(&ms, a, b);
    t.push_back(ms);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

template <int kVec, bool kSmemB>
int run(const char* label, int brows, int blocks_per_sm, int sms) {
  const int row4 = 32 * kVec;
  float4* B;
  float* out;
  CK(cudaMalloc(&B, sizeof(float4) * brows * row4));
  CK(cudaMemset(B, 0, sizeof(float4) * brows * row4));
  const int blocks = blocks_per_sm * sms, threads = 256, passes = 200;
  CK(cudaMalloc(&out, sizeof(float) * blocks * threads));
  const size_t smem = kSmemB ? sizeof(float4) * brows * row4 : 0;
  if (smem > 48 * 1024) CK(cudaFuncSetAttribute(gather<kVec, kSmemB>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  auto launch = [&] { gather<kVec, kSmemB><<<blocks, threads, smem>>>(B, brows, passes, out); };
  launch();
  CK(cudaDeviceSynchronize());
  const float ms = median_ms(launch, 21);
  const double flops = 2.0 * 4 * kVec * double(blocks) * threads * passes * kTile;
  printf("%-34s B rows %4d (%6.1f KB) blocks/SM %d: %.3f ms, %.2f TFLOP/s, %.1f TB/s of B delivered\n", label, brows,
         brows * row4 * 16 / 1024.0, blocks_per_sm, ms, flops / ms / 1e9, flops * 2 / ms / 1e9);
  cudaFree(B);
  cudaFree(out);
  return 0;
}

int main() {
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  printf("%s, %d SMs\n", prop.name, sms);
  const float floor_ms = median_ms([] { empty_kernel<<<1, 32>>>(); }, 201);
  const float floor_big = median_ms([&] { empty_kernel<<<sms * 8, 256>>>(); }, 201);
  printf("empty launch, one at a time, event-timed median of 201: 1 block %.2f us, %d blocks of 256 %.2f us\n", floor_ms * 1e3, sms * 8,
         floor_big * 1e3);
  for (int b : {1, 132, 768, 1056}) printf("held-stream empty launch, %d blocks of 256: median %.2f us\n", b, held_floor(b, 101));
  for (int bps : {4, 8}) {
    run<1, false>("global B (L1 hits), float4 x1", 64, bps, sms);
    run<1, false>("global B (L1 hits), float4 x1", 256, bps, sms);
    run<2, false>("global B (L1 hits), float4 x2", 64, bps, sms);
    run<1, true>("shared B, float4 x1", 32, bps, sms);
    run<2, true>("shared B, float4 x2", 16, bps, sms);
  }
  return 0;
}
