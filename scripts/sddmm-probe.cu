// The SDDMM kernel's template (cuda/sddmm/sddmm.cu) over entries per group and runs per warp, and a form that takes
// the entries permuted by column within tiles of rows (rows of B shared by a run's entries), timed on uniform random
// structures with CUDA events (median of 30 runs after 5), each variant's values checked against the first one's.
// A measurement tool for NOTES.md (SDDMM step 2), not part of the library:
//   nvcc -O3 -std=c++17 -arch=sm_90 -I cuda -o sddmm-probe scripts/sddmm-probe.cu && ./sddmm-probe
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "sddmm/sddmm.cu"

#define CHECK(x)                                                                   \
  do {                                                                             \
    cudaError_t e = (x);                                                           \
    if (e != cudaSuccess) {                                                        \
      std::printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e));        \
      std::exit(1);                                                                \
    }                                                                              \
  } while (0)

inline float ts_to_float(float x) { return x; }
inline float ts_to_float(__half x) { return __half2float(x); }

template <typename T, int V, int L, int E, int R>
__global__ void __launch_bounds__(ts::kSddmmThreads) probe_kernel(const ts::SddmmParams p) {
  ts::sddmm_kernel<T, V, L, E, R>(p);
}

/// The entries in a permuted order, as (row, column, index into C's values): each tile of kTile rows' entries by
/// column, so that a warp's run shares rows of B (L1 hits) and a tile's rows of A stay in L1.
template <typename T, int V, int L, int E, int Runs>
__global__ void __launch_bounds__(ts::kSddmmThreads) probe_coo_kernel(const ts::SddmmParams p, const int* rows,
                                                                      const int* cols, const int* dst) {
  constexpr int kGroups = 32 / L;
  constexpr int kRunEntries = kGroups * E;
  const int lane = threadIdx.x & 31;
  const int group = lane / L;
  const int slot = lane % L;
  const long long warp = (static_cast<long long>(blockIdx.x) * ts::kSddmmThreads + threadIdx.x) >> 5;
  const long long first_entry = warp * kRunEntries * Runs;
  const T* lhs = static_cast<const T*>(p.lhs);
  const T* rhs = static_cast<const T*>(p.rhs);
  T* values = static_cast<T*>(p.values);
  for (int run = 0; run < Runs; ++run) {
    const long long f = first_entry + (long long)run * kRunEntries;
    if (f >= p.nnz) return;
    const int first = (int)f;
    const int last = min(first + kRunEntries, p.nnz) - 1;
    long long lhs_row[E], rhs_row[E];
    bool valid[E];
    int out[E];
#pragma unroll
    for (int i = 0; i < E; ++i) {
      const int e = first + i * kGroups + group;
      valid[i] = e <= last;
      lhs_row[i] = valid[i] ? (long long)__ldg(rows + e) * p.k : 0;
      rhs_row[i] = valid[i] ? (long long)__ldg(cols + e) * p.k : 0;
      out[i] = valid[i] ? __ldg(dst + e) : 0;
    }
    float sum[E];
#pragma unroll
    for (int i = 0; i < E; ++i) sum[i] = 0.0f;
    ts::sddmm_walk_k<T, V, L, E, false>(lhs, rhs, p.k, slot, lhs_row, rhs_row, valid, sum);
#pragma unroll
    for (int i = 0; i < E; ++i) {
#pragma unroll
      for (int o = L / 2; o > 0; o /= 2) sum[i] += __shfl_xor_sync(0xffffffffu, sum[i], o);
    }
    if (slot == 0) {
#pragma unroll
      for (int i = 0; i < E; ++i) {
        if (!valid[i]) continue;
        float v[1] = {sum[i]};
        ts::finish_store<T, 1>(values + out[i], v, p.alpha, p.beta, false, 0.0f);
      }
    }
  }
}

struct Problem {
  const char* name;
  int m, n, k;
  double density;
};

template <typename T>
struct Run {
  ts::SddmmParams p;
  std::vector<float> reference;
  T* values;
  std::vector<int> offsets, columns;
  int tile = 0;
  int *rows_d = nullptr, *cols_d = nullptr, *dst_d = nullptr;
};

/// The permuted entries for tiles of `tile` rows, uploaded into run.rows_d/cols_d/dst_d.
template <typename T>
void build_coo(Run<T>& run, int tile) {
  const int m = (int)run.offsets.size() - 1;
  std::vector<int> rows, cols, dst;
  for (int t0 = 0; t0 < m; t0 += tile) {
    std::vector<std::pair<long long, int>> keyed;
    for (int r = t0; r < std::min(m, t0 + tile); ++r) {
      for (int e = run.offsets[r]; e < run.offsets[r + 1]; ++e) keyed.push_back({(long long)run.columns[e] * m + r, e});
    }
    std::sort(keyed.begin(), keyed.end());
    for (auto& [key, e] : keyed) {
      rows.push_back((int)(key % m));
      cols.push_back(run.columns[e]);
      dst.push_back(e);
    }
  }
  if (!run.rows_d) {
    CHECK(cudaMalloc(&run.rows_d, sizeof(int) * rows.size() + 4));
    CHECK(cudaMalloc(&run.cols_d, sizeof(int) * rows.size() + 4));
    CHECK(cudaMalloc(&run.dst_d, sizeof(int) * rows.size() + 4));
  }
  CHECK(cudaMemcpy(run.rows_d, rows.data(), sizeof(int) * rows.size(), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(run.cols_d, cols.data(), sizeof(int) * rows.size(), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(run.dst_d, dst.data(), sizeof(int) * rows.size(), cudaMemcpyHostToDevice));
  run.tile = tile;
}

/// The median of 30 event-timed launches after 5, and the largest difference of the values from the first variant's
/// (which this call records when it is the first).
template <typename T, typename Launch>
std::pair<float, double> time_and_check(Run<T>& run, Launch launch) {
  for (int i = 0; i < 5; ++i) launch();
  CHECK(cudaDeviceSynchronize());
  std::vector<float> ms(30);
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  for (auto& t : ms) {
    cudaEventRecord(a);
    launch();
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    cudaEventElapsedTime(&t, a, b);
  }
  std::sort(ms.begin(), ms.end());
  std::vector<T> got(run.p.nnz);
  CHECK(cudaMemcpy(got.data(), run.values, sizeof(T) * got.size(), cudaMemcpyDeviceToHost));
  double worst = 0;
  if (run.reference.empty()) {
    for (auto v : got) run.reference.push_back(ts_to_float(v));
  } else {
    for (size_t i = 0; i < got.size(); ++i) {
      worst = std::max(worst, (double)std::fabs(ts_to_float(got[i]) - run.reference[i]));
    }
  }
  return {ms[15], worst};
}

template <typename T, int V, int L, int E, int R>
void time_variant(Run<T>& run, const char* type) {
  const int warp_entries = 32 / L * E * R;
  const int blocks = (int)(((long long)run.p.nnz + warp_entries - 1) / warp_entries + 7) / 8;
  cudaFuncAttributes attr;
  CHECK(cudaFuncGetAttributes(&attr, probe_kernel<T, V, L, E, R>));
  auto [ms, worst] = time_and_check(run, [&] { probe_kernel<T, V, L, E, R><<<blocks, ts::kSddmmThreads>>>(run.p); });
  std::printf("  %s v%d l%-2d e%d r%d csr %3d regs     %8.4f ms  %7.0f GFLOP/s  max diff %.2e\n", type, V, L, E, R,
              attr.numRegs, ms, 2.0 * run.p.nnz * run.p.k / (ms * 1e6), worst);
}

template <typename T, int V, int L, int E, int R>
void time_coo(Run<T>& run, const char* type) {
  const int warp_entries = 32 / L * E * R;
  const int blocks = (int)(((long long)run.p.nnz + warp_entries - 1) / warp_entries + 7) / 8;
  CHECK(cudaMemset(run.values, 0, sizeof(T) * run.p.nnz));
  auto [ms, worst] = time_and_check(run, [&] {
    probe_coo_kernel<T, V, L, E, R><<<blocks, ts::kSddmmThreads>>>(run.p, run.rows_d, run.cols_d, run.dst_d);
  });
  std::printf("  %s v%d l%-2d e%d r%d coo tile %-4d       %8.4f ms  %7.0f GFLOP/s  max diff %.2e\n", type, V, L, E, R,
              run.tile, ms, 2.0 * run.p.nnz * run.p.k / (ms * 1e6), worst);
}

template <typename T>
void probe(const Problem& pr) {
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<float> u(-1, 1);
  std::bernoulli_distribution keep(pr.density);
  std::vector<int> offsets(1, 0), columns;
  for (int i = 0; i < pr.m; ++i) {
    for (int j = 0; j < pr.n; ++j) {
      if (keep(rng)) columns.push_back(j);
    }
    offsets.push_back((int)columns.size());
  }
  std::vector<T> a((size_t)pr.m * pr.k), b((size_t)pr.n * pr.k);
  for (auto& x : a) x = T(u(rng));
  for (auto& x : b) x = T(u(rng));
  int *d_off, *d_col;
  T *d_a, *d_b, *d_v;
  CHECK(cudaMalloc(&d_off, sizeof(int) * offsets.size()));
  CHECK(cudaMalloc(&d_col, sizeof(int) * columns.size()));
  CHECK(cudaMalloc(&d_a, sizeof(T) * a.size()));
  CHECK(cudaMalloc(&d_b, sizeof(T) * b.size()));
  CHECK(cudaMalloc(&d_v, sizeof(T) * columns.size()));
  CHECK(cudaMemcpy(d_off, offsets.data(), sizeof(int) * offsets.size(), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(d_col, columns.data(), sizeof(int) * columns.size(), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(d_a, a.data(), sizeof(T) * a.size(), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(d_b, b.data(), sizeof(T) * b.size(), cudaMemcpyHostToDevice));
  Run<T> run;
  run.p = ts::SddmmParams{pr.m, pr.n, pr.k, (int)columns.size(), d_off, d_col, d_a, d_b, d_v, 1.0f, 0.0f};
  run.values = d_v;
  run.offsets = offsets;
  run.columns = columns;
  const bool f32 = sizeof(T) == 4;
  std::printf("%s %s: %d x %d, k %d, nnz %zu\n", pr.name, f32 ? "f32" : "f16", pr.m, pr.n, pr.k, columns.size());
  const char* type = f32 ? "f32" : "f16";
  constexpr int V = 16 / sizeof(T);
  time_variant<T, V, 4, 4, 1>(run, type);
  time_variant<T, V, 4, 4, 4>(run, type);
  time_variant<T, V, 8, 4, 4>(run, type);
  time_variant<T, V, 8, 2, 8>(run, type);
  for (int tile : {8, 32, 128, 512}) {
    build_coo(run, tile);
    time_coo<T, V, 2, 4, 4>(run, type);
    time_coo<T, V, 4, 4, 4>(run, type);
    time_coo<T, V, 8, 4, 4>(run, type);
    time_coo<T, V, 8, 2, 8>(run, type);
    time_coo<T, V, 16, 4, 4>(run, type);
    time_coo<T, V, 32, 4, 2>(run, type);
  }
  cudaFree(run.rows_d);
  cudaFree(run.cols_d);
  cudaFree(run.dst_d);
  cudaFree(d_off);
  cudaFree(d_col);
  cudaFree(d_a);
  cudaFree(d_b);
  cudaFree(d_v);
}

int main() {
  const Problem problems[] = {
      {"uniform_s80_k256", 4096, 4096, 256, 0.2},  {"uniform_s98_k256", 4096, 4096, 256, 0.02},
      {"uniform_s90_k128", 4096, 4096, 128, 0.1},  {"uniform_s95_k32", 4096, 4096, 32, 0.05},
      {"ffn_1536x384_s70_k256", 1536, 384, 256, 0.3}, {"attn_384_s90_k64", 384, 384, 64, 0.1},
  };
  for (const auto& p : problems) {
    probe<float>(p);
    probe<__half>(p);
  }
  return 0;
}
