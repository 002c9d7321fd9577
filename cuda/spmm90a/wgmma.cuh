/**
 * @file @brief wgmma.mma_async m64n64k8 in tf32 with A from registers and B from a shared-memory descriptor
 * (sm_90a only; cuda/spmm90a/spmm90a.cu).
 */
#pragma once

namespace ts {

/// @brief d (64 x 64, the warpgroup's accumulator fragments) = a (64 x 8, this thread's tf32 A fragment:
/// (g, t), (g + 8, t), (g, t + 4), (g + 8, t + 4) of its warp's 16 rows) * B (8 x 64 at `desc`) + (scale_d ? d :
/// 0). Asynchronous: d and a must not be touched until wgmma.wait_group says the group is done.
__device__ __forceinline__ void wgmma_m64n64k8_tf32(float (&d)[32], unsigned a0, unsigned a1, unsigned a2,
                                                    unsigned a3, unsigned long long desc, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "{%32, %33, %34, %35}, %36, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc), "r"(scale_d));
}

}  // namespace ts
