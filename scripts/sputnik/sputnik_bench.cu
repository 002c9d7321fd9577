// Sputnik's own SpMM (google-research/sputnik, `sputnik::CudaSpmm`, fp32 or fp16) and cuSPARSE's CSR SpMM timed
// side by side on the suite's problems, the way `src/timing.rs` times tilesparse: warm-up runs, then one event pair per
// run, all runs enqueued behind a kernel that holds the stream, median reported. Each result is first checked
// against an f64 CPU product on a NaN-poisoned C.
//
// Sputnik is not part of this repository and is not fetched by it: build with `scripts/sputnik/build.sh`, which
// compiles this file against a Sputnik source tree that you provide (SPUTNIK_DIR). Sputnik's matrices: the
// library's own heuristic (`CudaSpmm`) picks the kernel from n; rows go longest first (`SortedRowSwizzle`, which
// the caller computes); rows are timed as stored and padded to multiples of 4 with zeros (Sputnik's benchmarks pad
// so by default), and the faster of the two is reported.
//
// fp16 is Sputnik's mixed precision (half A, B and C, fp32 accumulation): its rows must be of even length, so A is
// padded to 2 and to 4, and k must fit its 16-bit column indices (larger k is skipped with a line).
//
// Usage: sputnik_bench [--dtype f32|f16] [--iters N] [--warmup N] [--json FILE] PROBLEM...
//   PROBLEM: uniform:MxK:DENSITY:SEED:n1,n2,...   (rows of round(density * k) entries, stochastically rounded,
//            at uniformly drawn columns: the statistics of tilesparse's gen::uniform_random, not its draws)
//            mtx:PATH[:NAME]:n1,n2,...           (Matrix Market, .gz through gunzip; pattern entries are 1)

#include <cuda_runtime.h>
#include <cusparse.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "sputnik/spmm/cuda_spmm.h"

#define CUDA_OK(x)                                                                           \
  do {                                                                                       \
    cudaError_t e_ = (x);                                                                    \
    if (e_ != cudaSuccess) {                                                                 \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      exit(1);                                                                               \
    }                                                                                        \
  } while (0)
#define CUSPARSE_OK(x)                                                            \
  do {                                                                            \
    cusparseStatus_t s_ = (x);                                                    \
    if (s_ != CUSPARSE_STATUS_SUCCESS) {                                          \
      fprintf(stderr, "%s:%d: %s: status %d\n", __FILE__, __LINE__, #x, (int)s_); \
      exit(1);                                                                    \
    }                                                                             \
  } while (0)

struct Csr {
  int m = 0, k = 0;
  std::vector<int> offsets, cols;
  std::vector<float> vals;
  int64_t nnz() const { return offsets.empty() ? 0 : offsets.back(); }
};

// Rows of round(density * k) entries (stochastic rounding), distinct sorted uniform columns, values in [-1, 1).
static Csr uniform(int m, int k, double density, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  std::uniform_real_distribution<float> val(-1.0f, 1.0f);
  Csr a;
  a.m = m;
  a.k = k;
  a.offsets.assign(1, 0);
  double target = density * k;
  std::vector<char> taken(k, 0);
  std::vector<int> row;
  for (int r = 0; r < m; ++r) {
    int len = (int)std::floor(target) + (u01(rng) < target - std::floor(target) ? 1 : 0);
    len = std::min(len, k);
    row.clear();
    if (2 * len > k) {  // dense rows: choose the columns left out
      std::fill(taken.begin(), taken.end(), 1);
      std::uniform_int_distribution<int> col(0, k - 1);
      for (int left = k - len; left > 0;) {
        int c = col(rng);
        if (taken[c]) { taken[c] = 0; --left; }
      }
    } else {
      std::fill(taken.begin(), taken.end(), 0);
      std::uniform_int_distribution<int> col(0, k - 1);
      for (int got = 0; got < len;) {
        int c = col(rng);
        if (!taken[c]) { taken[c] = 1; ++got; }
      }
    }
    for (int c = 0; c < k; ++c) {
      if (taken[c]) { a.cols.push_back(c); a.vals.push_back(val(rng)); }
    }
    a.offsets.push_back((int)a.cols.size());
  }
  return a;
}

// Matrix Market coordinate (real, integer or pattern; general or symmetric), duplicates summed, columns sorted.
static Csr read_mtx(const std::string& path) {
  std::string cmd = (path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0) ? "gunzip -c '" + path + "'"
                                                                                       : "cat '" + path + "'";
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) { perror("popen"); exit(1); }
  char line[4096];
  if (!fgets(line, sizeof line, f)) { fprintf(stderr, "%s: empty\n", path.c_str()); exit(1); }
  std::string header(line);
  for (auto& ch : header) ch = (char)tolower(ch);
  bool pattern = header.find("pattern") != std::string::npos;
  bool symmetric = header.find("symmetric") != std::string::npos;
  if (header.find("coordinate") == std::string::npos || header.find("complex") != std::string::npos) {
    fprintf(stderr, "%s: only real/integer/pattern coordinate files\n", path.c_str());
    exit(1);
  }
  long rows = 0, cols = 0, entries = 0;
  while (fgets(line, sizeof line, f)) {
    if (line[0] == '%') continue;
    if (sscanf(line, "%ld %ld %ld", &rows, &cols, &entries) == 3) break;
  }
  std::vector<std::pair<int64_t, double>> trip;  // (row * cols + col, value)
  trip.reserve(symmetric ? 2 * entries : entries);
  for (long e = 0; e < entries && fgets(line, sizeof line, f); ++e) {
    long i, j;
    double v = 1.0;
    int got = sscanf(line, "%ld %ld %lf", &i, &j, &v);
    if (got < 2 || (!pattern && got < 3)) { fprintf(stderr, "%s: bad entry '%s'\n", path.c_str(), line); exit(1); }
    trip.push_back({(int64_t)(i - 1) * cols + (j - 1), v});
    if (symmetric && i != j) trip.push_back({(int64_t)(j - 1) * cols + (i - 1), v});
  }
  pclose(f);
  std::sort(trip.begin(), trip.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  Csr a;
  a.m = (int)rows;
  a.k = (int)cols;
  a.offsets.assign(rows + 1, 0);
  for (size_t t = 0; t < trip.size();) {
    size_t u = t;
    double sum = 0;
    for (; u < trip.size() && trip[u].first == trip[t].first; ++u) sum += trip[u].second;
    int r = (int)(trip[t].first / cols);
    a.cols.push_back((int)(trip[t].first % cols));
    a.vals.push_back((float)sum);
    a.offsets[r + 1]++;
    t = u;
  }
  for (long r = 0; r < rows; ++r) a.offsets[r + 1] += a.offsets[r];
  return a;
}

// Sputnik's PadSparseMatrix: each row padded with zeros to a multiple of `pad`, at the row's last column.
static Csr padded(const Csr& a, int pad) {
  Csr p;
  p.m = a.m;
  p.k = a.k;
  p.offsets.assign(1, 0);
  for (int r = 0; r < a.m; ++r) {
    for (int e = a.offsets[r]; e < a.offsets[r + 1]; ++e) { p.cols.push_back(a.cols[e]); p.vals.push_back(a.vals[e]); }
    while ((p.cols.size() - p.offsets.back()) % pad != 0) {
      p.cols.push_back(p.cols.back());
      p.vals.push_back(0.0f);
    }
    p.offsets.push_back((int)p.cols.size());
  }
  return p;
}

// Sputnik's SortedRowSwizzle: row indices argsorted by length, longest first.
static std::vector<int> sorted_swizzle(const Csr& a) {
  std::vector<int> idx(a.m);
  std::iota(idx.begin(), idx.end(), 0);
  std::sort(idx.begin(), idx.end(), [&](int x, int y) {
    return a.offsets[x + 1] - a.offsets[x] > a.offsets[y + 1] - a.offsets[y];
  });
  return idx;
}

// The kernel CudaSpmm's heuristic takes at this n (sputnik/spmm/cuda_spmm.cu.cc), for the report: sparse and dense
// vector types, then Y, K, X, W (fp16: K and X count half2 pairs), no predicates, launch bounds and min occupancy.
static std::string sputnik_config(int n, bool half) {
  if (half) {
    if (n < 16) return "half8/half2 4,32,8,8";
    if (n == 16) return "half8/half2 4,32,8,8 nopred";
    if (n < 32) return "half8/half4 4,32,16,8";
    if (n == 32) return "half8/half4 4,32,16,8 nopred";
    if (n % 64 == 0) return "half8/half8 4,32,32,8 nopred";
    return "half4/half4 2,32,32,16";
  }
  if (n % 4 == 0) {
    if (n == 8) return "float4/float 4,32,8,8 nopred";
    if (n < 8) return "float4/float 4,32,8,8";
    if (n == 16) return "float4/float2 4,32,16,8 nopred";
    if (n < 16) return "float4/float2 4,32,16,8";
    if (n == 32) return "float4/float4 4,32,32,8 nopred";
    if (n % 64 == 0) return "float4/float4 4,32,64,8 nopred lb minocc8";
    return "float4/float4 4,32,32,8";
  }
  if (n % 2 == 0) return "float2/float2 2,32,32,16";
  return "float/float 1,32,32,32";
}

__global__ void hold_kernel(uint64_t ns) {
  uint64_t start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}

__global__ void empty_kernel() {}

struct Timing {
  double median_ms = NAN, min_ms = NAN;
};

// warm-up runs, then `iters` event pairs behind a stream hold (src/timing.rs's method).
template <typename Op>
static Timing time_op(cudaStream_t s, int warmup, int iters, Op op) {
  for (int i = 0; i < warmup; ++i) op();
  CUDA_OK(cudaStreamSynchronize(s));
  std::vector<cudaEvent_t> ev(2 * iters);
  for (auto& e : ev) CUDA_OK(cudaEventCreate(&e));
  hold_kernel<<<1, 1, 0, s>>>(std::min<uint64_t>(50000000ull, 2000000ull + 200000ull * iters));
  for (int i = 0; i < iters; ++i) {
    CUDA_OK(cudaEventRecord(ev[2 * i], s));
    op();
    CUDA_OK(cudaEventRecord(ev[2 * i + 1], s));
  }
  CUDA_OK(cudaStreamSynchronize(s));
  std::vector<double> ms(iters);
  for (int i = 0; i < iters; ++i) {
    float t;
    CUDA_OK(cudaEventElapsedTime(&t, ev[2 * i], ev[2 * i + 1]));
    ms[i] = t;
  }
  for (auto& e : ev) CUDA_OK(cudaEventDestroy(e));
  std::sort(ms.begin(), ms.end());
  Timing t;
  t.median_ms = iters % 2 ? ms[iters / 2] : 0.5 * (ms[iters / 2 - 1] + ms[iters / 2]);
  t.min_ms = ms[0];
  return t;
}

struct Check {
  long checked = 0, mismatches = 0;
  double worst = 0;  // largest |error| / bound
};

// C against an f64 product on every `stride`-th row: |c - ref| <= (len + 2) * u_acc * sum |a||b| (u_acc = 2^-23
// for an fp32 accumulation), plus u_out * |ref| and half's smallest subnormal where C is rounded to f16 (u_out =
// 2^-11).
// NaN left from the poison, or any non-finite result where the reference is finite, is a mismatch.
static Check check(const Csr& a, const std::vector<float>& b, int n, const std::vector<float>& c, int stride,
                   double u_acc, double u_out) {
  Check r;
  std::vector<double> ref(n), mag(n);
  for (int row = 0; row < a.m; row += stride) {
    std::fill(ref.begin(), ref.end(), 0.0);
    std::fill(mag.begin(), mag.end(), 0.0);
    int len = a.offsets[row + 1] - a.offsets[row];
    for (int e = a.offsets[row]; e < a.offsets[row + 1]; ++e) {
      double v = a.vals[e];
      const float* brow = &b[(size_t)a.cols[e] * n];
      for (int j = 0; j < n; ++j) {
        ref[j] += v * brow[j];
        mag[j] += std::fabs(v * brow[j]);
      }
    }
    for (int j = 0; j < n; ++j) {
      double got = c[(size_t)row * n + j];
      double bound = (len + 2) * u_acc * mag[j] + u_out * std::fabs(ref[j]) + (u_out ? 6e-8 : 1e-30);
      // Not checked: an A or B of Inf (values past f16's range) and sums past it.
      if (!std::isfinite(bound) || (u_out && std::fabs(ref[j]) + bound > 65504)) continue;
      double err = std::fabs(got - ref[j]);
      ++r.checked;
      if (!(err <= bound)) ++r.mismatches;
      if (std::isfinite(err)) r.worst = std::max(r.worst, err / bound);
    }
  }
  return r;
}

struct Problem {
  std::string name;
  Csr a;
  std::vector<int> ns;
};

static std::vector<int> parse_ns(const std::string& s) {
  std::vector<int> ns;
  size_t p = 0;
  while (p < s.size()) {
    size_t q = s.find(',', p);
    if (q == std::string::npos) q = s.size();
    ns.push_back(atoi(s.substr(p, q - p).c_str()));
    p = q + 1;
  }
  return ns;
}

static std::string stem(const std::string& path) {
  std::string f = path.substr(path.find_last_of('/') + 1);
  for (const char* suf : {".gz", ".mtx"}) {
    size_t l = strlen(suf);
    if (f.size() > l && f.compare(f.size() - l, l, suf) == 0) f = f.substr(0, f.size() - l);
  }
  return f;
}

// Scalar types: fp32 (values, B and C in float; column indices int) and fp16 (Sputnik's mixed precision: half
// values, B and C, fp32 accumulation, 16-bit column indices, rows of even length).
template <typename T> struct Ty;
template <> struct Ty<float> {
  static constexpr cudaDataType_t kCuda = CUDA_R_32F;
  static constexpr double kOut = 0;  // no rounding of the output past the accumulator's
  static float from(float x) { return x; }
  static float to(float x) { return x; }
  static const char* name() { return "f32"; }
  static uint8_t poison() { return 0xff; }  // all-ones: a NaN
};
template <> struct Ty<__half> {
  static constexpr cudaDataType_t kCuda = CUDA_R_16F;
  static constexpr double kOut = 1.0 / 2048;  // rounding of C to f16
  static __half from(float x) { return __float2half_rn(x); }
  static float to(__half x) { return __half2float(x); }
  static const char* name() { return "f16"; }
  static uint8_t poison() { return 0xff; }  // all-ones: a NaN
};

static cudaError_t sputnik_spmm(int m, int k, int n, int nnz, const int* swz, const float* v, const int* off,
                                const void* cols, const float* b, float* c, cudaStream_t s) {
  return sputnik::CudaSpmm(m, k, n, nnz, swz, v, off, static_cast<const int*>(cols), b, c, s);
}
static cudaError_t sputnik_spmm(int m, int k, int n, int nnz, const int* swz, const __half* v, const int* off,
                                const void* cols, const __half* b, __half* c, cudaStream_t s) {
  return sputnik::CudaSpmm(m, k, n, nnz, swz, reinterpret_cast<const half2*>(v), off,
                           static_cast<const short2*>(cols), reinterpret_cast<const half2*>(b),
                           reinterpret_cast<half2*>(c), s);
}

struct Ctx {
  cudaStream_t stream;
  cusparseHandle_t handle;
  int iters, warmup;
  double floor_ms;
  FILE* out;
  bool first = true;
  long wrong = 0;
  std::mt19937_64 brng{7};
};

// One matrix at each of its widths: Sputnik on two forms of A (fp32: as stored and padded to 4; fp16, whose rows
// must be of even length: padded to 2 and to 4), cuSPARSE CSR ALG1/2/3 on A as stored (fp16: padded to 2, the
// same product).
template <typename T>
static void run(Ctx& x, const Problem& p) {
  const bool half = sizeof(T) == 2;
  if (half && p.a.k > 32767) {
    printf("%-40s skipped: k = %d is past Sputnik's 16-bit column indices in f16\n", p.name.c_str(), p.a.k);
    return;
  }
  // A's values as T (and back to float for the reference).
  auto rounded = [](Csr c) {
    for (auto& v : c.vals) v = Ty<T>::to(Ty<T>::from(v));
    return c;
  };
  const Csr forms[2] = {rounded(half ? padded(p.a, 2) : p.a), rounded(padded(p.a, 4))};
  const Csr& a32 = forms[0];  // what is checked and what cuSPARSE runs
  const char* form_name[2] = {half ? "padded2" : "as stored", "padded4"};
  struct Dev {
    int *offsets, *swizzle;
    void* cols;
    T* vals;
  } d[2];
  for (int f = 0; f < 2; ++f) {
    const Csr& c = forms[f];
    std::vector<int> swz = sorted_swizzle(c);
    std::vector<T> vals(c.vals.size());
    for (size_t i = 0; i < vals.size(); ++i) vals[i] = Ty<T>::from(c.vals[i]);
    size_t isz = half ? sizeof(short) : sizeof(int);
    std::vector<char> cols(c.cols.size() * isz);
    for (size_t i = 0; i < c.cols.size(); ++i) {
      if (half) { short s = (short)c.cols[i]; memcpy(&cols[i * isz], &s, isz); }
      else memcpy(&cols[i * isz], &c.cols[i], isz);
    }
    CUDA_OK(cudaMalloc(&d[f].offsets, sizeof(int) * (c.m + 1)));
    CUDA_OK(cudaMalloc(&d[f].swizzle, sizeof(int) * std::max(c.m, 1)));
    CUDA_OK(cudaMalloc(&d[f].cols, std::max<size_t>(cols.size(), 16)));
    CUDA_OK(cudaMalloc(&d[f].vals, sizeof(T) * std::max<size_t>(vals.size(), 16)));
    CUDA_OK(cudaMemcpy(d[f].offsets, c.offsets.data(), sizeof(int) * (c.m + 1), cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(d[f].swizzle, swz.data(), sizeof(int) * c.m, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(d[f].cols, cols.data(), cols.size(), cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(d[f].vals, vals.data(), sizeof(T) * vals.size(), cudaMemcpyHostToDevice));
  }
  // cuSPARSE's A: form 0 (fp32 as stored; fp16 padded to 2), with int column indices.
  int* cs_cols;
  CUDA_OK(cudaMalloc(&cs_cols, sizeof(int) * std::max<size_t>(a32.cols.size(), 1)));
  CUDA_OK(cudaMemcpy(cs_cols, a32.cols.data(), sizeof(int) * a32.cols.size(), cudaMemcpyHostToDevice));

  for (int n : p.ns) {
    char name[256];
    snprintf(name, sizeof name, "%s_n%d", p.name.c_str(), n);
    if (half && n % 2) {
      printf("%-40s skipped: Sputnik's f16 needs an even n\n", name);
      continue;
    }
    std::uniform_real_distribution<float> val(-1.0f, 1.0f);
    std::vector<T> hb((size_t)a32.k * n), hc((size_t)a32.m * n);
    std::vector<float> hb32(hb.size()), hc32(hc.size());
    for (size_t i = 0; i < hb.size(); ++i) { hb[i] = Ty<T>::from(val(x.brng)); hb32[i] = Ty<T>::to(hb[i]); }
    T *db, *dc;
    CUDA_OK(cudaMalloc(&db, sizeof(T) * hb.size()));
    CUDA_OK(cudaMalloc(&dc, sizeof(T) * hc.size()));
    CUDA_OK(cudaMemcpy(db, hb.data(), sizeof(T) * hb.size(), cudaMemcpyHostToDevice));
    // Rows checked: all where the product is small, else every stride-th (about 1e8 multiply-adds for Sputnik,
    // 2.5e7 for each cuSPARSE algorithm, whose results are checked only to catch a harness error).
    double work = (double)a32.nnz() * n;
    int stride = (int)std::max(1.0, std::ceil(work / 1e8));
    int cs_stride = (int)std::max(1.0, std::ceil(work / 2.5e7));
    // cuSPARSE's f16 ALG1 and ALG2 are checked as if they accumulated in f16 (u_acc = 2^-11): measured, their
    // errors pass the fp32 accumulation's bound, which Sputnik, ALG3 and tilesparse meet.
    auto checked = [&](const char* what, int stride, double u_acc, auto op) {
      CUDA_OK(cudaMemset(dc, Ty<T>::poison(), sizeof(T) * hc.size()));  // NaN
      op();
      CUDA_OK(cudaStreamSynchronize(x.stream));
      CUDA_OK(cudaMemcpy(hc.data(), dc, sizeof(T) * hc.size(), cudaMemcpyDeviceToHost));
      for (size_t i = 0; i < hc.size(); ++i) hc32[i] = Ty<T>::to(hc[i]);
      Check r = check(a32, hb32, n, hc32, stride, u_acc, Ty<T>::kOut);
      if (r.mismatches) {
        printf("WRONG %s %s: %ld of %ld elements outside the bound\n", name, what, r.mismatches, r.checked);
        ++x.wrong;
      }
      return r;
    };
    Timing sp[2];
    Check spc[2];
    for (int f = 0; f < 2; ++f) {
      const Csr& c = forms[f];
      auto op = [&, f] {
        CUDA_OK(sputnik_spmm(c.m, c.k, n, (int)c.nnz(), d[f].swizzle, d[f].vals, d[f].offsets, d[f].cols, db, dc,
                             x.stream));
      };
      char what[64];
      snprintf(what, sizeof what, "sputnik %s", form_name[f]);
      spc[f] = checked(what, stride, std::ldexp(1.0, -23), op);
      sp[f] = time_op(x.stream, x.warmup, x.iters, op);
    }
    cusparseSpMatDescr_t ma;
    cusparseDnMatDescr_t mb, mc;
    CUSPARSE_OK(cusparseCreateCsr(&ma, a32.m, a32.k, a32.nnz(), d[0].offsets, cs_cols, d[0].vals, CUSPARSE_INDEX_32I,
                                  CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, Ty<T>::kCuda));
    CUSPARSE_OK(cusparseCreateDnMat(&mb, a32.k, n, n, db, Ty<T>::kCuda, CUSPARSE_ORDER_ROW));
    CUSPARSE_OK(cusparseCreateDnMat(&mc, a32.m, n, n, dc, Ty<T>::kCuda, CUSPARSE_ORDER_ROW));
    float alpha = 1.0f, beta = 0.0f;
    const cusparseSpMMAlg_t algs[3] = {CUSPARSE_SPMM_CSR_ALG1, CUSPARSE_SPMM_CSR_ALG2, CUSPARSE_SPMM_CSR_ALG3};
    Timing cs[3];
    int best = -1;
    for (int g = 0; g < 3; ++g) {
      size_t bytes = 0;
      if (cusparseSpMM_bufferSize(x.handle, CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE,
                                  &alpha, ma, mb, &beta, mc, CUDA_R_32F, algs[g], &bytes) != CUSPARSE_STATUS_SUCCESS)
        continue;
      void* buf = nullptr;
      if (bytes) CUDA_OK(cudaMalloc(&buf, bytes));
      if (algs[g] == CUSPARSE_SPMM_CSR_ALG3 &&
          cusparseSpMM_preprocess(x.handle, CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE,
                                  &alpha, ma, mb, &beta, mc, CUDA_R_32F, algs[g], buf) != CUSPARSE_STATUS_SUCCESS) {
        if (buf) CUDA_OK(cudaFree(buf));
        continue;
      }
      auto op = [&] {
        CUSPARSE_OK(cusparseSpMM(x.handle, CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha,
                                 ma, mb, &beta, mc, CUDA_R_32F, algs[g], buf));
      };
      char what[32];
      snprintf(what, sizeof what, "cusparse alg%d", g + 1);
      checked(what, cs_stride, half && g < 2 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -23), op);
      cs[g] = time_op(x.stream, x.warmup, x.iters, op);
      if (best < 0 || cs[g].median_ms < cs[best].median_ms) best = g;
      if (buf) CUDA_OK(cudaFree(buf));
    }
    CUSPARSE_OK(cusparseDestroySpMat(ma));
    CUSPARSE_OK(cusparseDestroyDnMat(mb));
    CUSPARSE_OK(cusparseDestroyDnMat(mc));

    double sp_best = std::min(sp[0].median_ms, sp[1].median_ms);
    double cs_best = best >= 0 ? cs[best].median_ms : NAN;
    printf("%-40s %8" PRId64 " %10.1f %10.1f %10.1f %10s %8.2f  %s\n", name, p.a.nnz(), sp[0].median_ms * 1e3,
           sp[1].median_ms * 1e3, cs_best * 1e3, best >= 0 ? (best == 0 ? "ALG1" : best == 1 ? "ALG2" : "ALG3") : "-",
           cs_best / sp_best, sputnik_config(n, half).c_str());
    fflush(stdout);
    if (x.out) {
      fprintf(x.out,
              "%s  {\"problem\": \"%s\", \"dtype\": \"%s\", \"m\": %d, \"k\": %d, \"n\": %d, \"nnz\": %" PRId64
              ", \"sputnik_forms\": [\"%s\", \"%s\"], \"sputnik_nnz\": [%" PRId64 ", %" PRId64 "]"
              ", \"sputnik_config\": \"%s\", \"sputnik_ms\": [%.6f, %.6f], \"sputnik_min_ms\": [%.6f, %.6f], "
              "\"sputnik_mismatches\": [%ld, %ld], \"sputnik_worst\": %.4f, \"checked\": %ld, "
              "\"cusparse_ms\": [%.6f, %.6f, %.6f], \"empty_kernel_ms\": %.6f}",
              x.first ? "" : ",\n", name, Ty<T>::name(), p.a.m, p.a.k, n, p.a.nnz(), form_name[0], form_name[1],
              forms[0].nnz(), forms[1].nnz(), sputnik_config(n, half).c_str(), sp[0].median_ms, sp[1].median_ms,
              sp[0].min_ms, sp[1].min_ms, spc[0].mismatches, spc[1].mismatches, std::max(spc[0].worst, spc[1].worst),
              spc[0].checked, cs[0].median_ms, cs[1].median_ms, cs[2].median_ms, x.floor_ms);
      x.first = false;
    }
    CUDA_OK(cudaFree(db));
    CUDA_OK(cudaFree(dc));
  }
  for (int f = 0; f < 2; ++f) {
    CUDA_OK(cudaFree(d[f].offsets));
    CUDA_OK(cudaFree(d[f].swizzle));
    CUDA_OK(cudaFree(d[f].cols));
    CUDA_OK(cudaFree(d[f].vals));
  }
  CUDA_OK(cudaFree(cs_cols));
}

int main(int argc, char** argv) {
  Ctx x;
  x.iters = 30;
  x.warmup = 5;
  const char* json = nullptr;
  bool half = false;
  std::vector<std::string> specs;
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    if (s == "--iters" && i + 1 < argc) x.iters = atoi(argv[++i]);
    else if (s == "--warmup" && i + 1 < argc) x.warmup = atoi(argv[++i]);
    else if (s == "--json" && i + 1 < argc) json = argv[++i];
    else if (s == "--dtype" && i + 1 < argc) half = std::string(argv[++i]) == "f16";
    else specs.push_back(s);
  }
  if (specs.empty() || x.iters < 1) {
    fprintf(stderr,
            "usage: %s [--dtype f32|f16] [--iters N] [--warmup N] [--json FILE] uniform:MxK:DENSITY:SEED:NS | "
            "mtx:PATH[:NAME]:NS ...\n",
            argv[0]);
    return 2;
  }
  x.out = json ? fopen(json, "w") : nullptr;
  if (x.out) fprintf(x.out, "[\n");
  CUDA_OK(cudaStreamCreateWithFlags(&x.stream, cudaStreamNonBlocking));
  CUSPARSE_OK(cusparseCreate(&x.handle));
  CUSPARSE_OK(cusparseSetStream(x.handle, x.stream));
  cudaDeviceProp prop;
  CUDA_OK(cudaGetDeviceProperties(&prop, 0));
  Timing floor = time_op(x.stream, 10, 101, [&] { empty_kernel<<<1, 32, 0, x.stream>>>(); });
  x.floor_ms = floor.median_ms;
  printf("device %s; %s; empty kernel %.2f us (median of 101, this timing)\n", prop.name, half ? "f16" : "f32",
         floor.median_ms * 1e3);
  printf("%-40s %8s %10s %10s %10s %10s %8s  %s\n", "problem", "nnz", half ? "padded2" : "sputnik", "padded4",
         "cusparse", "(alg)", "cs/sp", "sputnik's kernel");

  for (const std::string& spec : specs) {
    Problem p;
    size_t last = spec.rfind(':');
    if (last == std::string::npos) { fprintf(stderr, "bad problem '%s'\n", spec.c_str()); return 2; }
    p.ns = parse_ns(spec.substr(last + 1));
    std::string head = spec.substr(0, last);
    if (head.rfind("uniform:", 0) == 0) {
      int m, k;
      double d;
      unsigned long long seed;
      if (sscanf(head.c_str(), "uniform:%dx%d:%lf:%llu", &m, &k, &d, &seed) != 4) {
        fprintf(stderr, "bad uniform spec '%s'\n", spec.c_str());
        return 2;
      }
      p.a = uniform(m, k, d, seed);
      char nm[128];
      snprintf(nm, sizeof nm, "uniform_%dx%d_s%02d", m, k, (int)std::lround((1.0 - d) * 100));
      p.name = nm;
    } else if (head.rfind("mtx:", 0) == 0) {
      std::string rest = head.substr(4);
      size_t colon = rest.find(':');
      std::string path = colon == std::string::npos ? rest : rest.substr(0, colon);
      p.a = read_mtx(path);
      p.name = colon == std::string::npos ? stem(path) : rest.substr(colon + 1);
    } else {
      fprintf(stderr, "bad problem '%s'\n", spec.c_str());
      return 2;
    }
    if (half) run<__half>(x, p);
    else run<float>(x, p);
  }
  if (x.out) {
    fprintf(x.out, "\n]\n");
    fclose(x.out);
  }
  CUSPARSE_OK(cusparseDestroy(x.handle));
  printf("%ld wrong\n", x.wrong);
  return x.wrong ? 1 : 0;
}
