/**
 * @file @brief Vector types for 2/4/8/16-byte memory operations, and conversions between the storage types
 * (float, __half, __nv_bfloat16) and the float accumulators.
 */
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace ts {

/// @brief The unsigned type the hardware moves in one instruction for a vector of `kBytes` bytes.
template <int kBytes>
struct RawVec;
template <>
struct RawVec<2> { typedef unsigned short type; };
template <>
struct RawVec<4> { typedef unsigned int type; };
template <>
struct RawVec<8> { typedef uint2 type; };
template <>
struct RawVec<16> { typedef uint4 type; };

/// @brief `kWidth` consecutive elements of `T`, aligned so that one load or store instruction moves them.
template <typename T, int kWidth>
struct alignas(sizeof(T) * kWidth) Vec {
  static_assert(sizeof(T) * kWidth <= 16, "a vector access moves at most 16 bytes");
  T v[kWidth];
};

/// @brief Loads `kWidth` elements from global memory through the read-only path. `ptr` must be aligned to
/// the vector size.
template <typename T, int kWidth>
__device__ __forceinline__ Vec<T, kWidth> load_global(const T* __restrict__ ptr) {
  typedef typename RawVec<sizeof(T) * kWidth>::type Raw;
  Vec<T, kWidth> out;
  *reinterpret_cast<Raw*>(&out) = __ldg(reinterpret_cast<const Raw*>(ptr));
  return out;
}

/// @brief Loads `kWidth` elements from shared memory (or any generic address) in one instruction.
template <typename T, int kWidth>
__device__ __forceinline__ Vec<T, kWidth> load_shared(const T* ptr) {
  typedef typename RawVec<sizeof(T) * kWidth>::type Raw;
  Vec<T, kWidth> out;
  *reinterpret_cast<Raw*>(&out) = *reinterpret_cast<const Raw*>(ptr);
  return out;
}

/// @brief Stores `kWidth` elements in one instruction. `ptr` must be aligned to the vector size.
template <typename T, int kWidth>
__device__ __forceinline__ void store(T* ptr, const Vec<T, kWidth>& value) {
  typedef typename RawVec<sizeof(T) * kWidth>::type Raw;
  *reinterpret_cast<Raw*>(ptr) = *reinterpret_cast<const Raw*>(&value);
}

/// @brief Widens a stored element to the float accumulator type.
__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

/// @brief Narrows a float to the storage type, rounding to nearest even.
template <typename T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ float from_float<float>(float x) { return x; }
template <>
__device__ __forceinline__ __half from_float<__half>(float x) { return __float2half_rn(x); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

/// @brief A vector of zeros.
template <typename T, int kWidth>
__device__ __forceinline__ Vec<T, kWidth> zero_vec() {
  Vec<T, kWidth> out;
#pragma unroll
  for (int i = 0; i < kWidth; ++i) out.v[i] = from_float<T>(0.0f);
  return out;
}

}  // namespace ts

/// One kernel per storage type, `name`_f32, `name`_f16 and `name`_bf16, each of `threads` threads per block (the
/// number the host launches it with), calling ts::`name`<T> on its `Params`.
#define TILESPARSE_KERNEL_PER_TYPE(name, Params, threads)                                                     \
  extern "C" __global__ void __launch_bounds__(threads) name##_f32(const ts::Params p) { ts::name<float>(p); } \
  extern "C" __global__ void __launch_bounds__(threads) name##_f16(const ts::Params p) { ts::name<__half>(p); } \
  extern "C" __global__ void __launch_bounds__(threads) name##_bf16(const ts::Params p) {                    \
    ts::name<__nv_bfloat16>(p);                                                                              \
  }
