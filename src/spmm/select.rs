//! The config heuristic: a pure function of the problem, unit-tested, each branch citing NOTES.md.

use super::SpmmConfig;
use crate::scalar::DType;

/// The widest of `widths` that divides `n` (1 always does).
pub(crate) fn widest_dividing(n: usize, widths: &[u32]) -> u32 {
    widths.iter().copied().filter(|&w| n % w as usize == 0).max().unwrap_or(1)
}

fn tile(dtype: DType, sv: u32, dv: u32, y: u32, x: u32, w: u32, pred: bool) -> SpmmConfig {
    SpmmConfig {
        dtype,
        sparse_vector_width: sv,
        dense_vector_width: dv,
        block_items_y: y,
        block_items_k: 32,
        block_items_x: x,
        block_width: w,
        residue_unroll: 4,
        predicate_loads: pred,
        launch_bounds: false,
        min_occupancy: 8,
    }
}

impl SpmmConfig {
    /// Chooses a compiled config for C (m x n) = A (m x k, nnz stored entries) * B (k x n).
    ///
    /// The result always satisfies `validate()`, is in the variant table, and its dense vector width divides
    /// n, so it never needs a misaligned access. Starting point: Sputnik's fp32 dispatch (NOTES.md, "SpMM
    /// selection"), which branches on n alone; m, k and nnz are taken so that later measurements can refine it.
    pub fn select(m: usize, k: usize, n: usize, nnz: usize, dtype: DType) -> SpmmConfig {
        let _ = (m, k, nnz);
        let dv = widest_dividing(n, &[1, 2, 4]);
        if n <= 8 {
            // One 8-wide tile covers n; float4 sparse loads (NOTES.md: SpMM selection, n <= 16).
            tile(dtype, 4, 1, 4, 8, 8, n % 8 != 0)
        } else if n <= 16 {
            tile(dtype, 4, dv.min(2), 4, 16, 8, n % 16 != 0)
        } else if dv == 4 && n % 64 == 0 {
            // Large tile with launch bounds, only when no predicates are needed (Sputnik: avoids spills).
            SpmmConfig { launch_bounds: true, ..tile(dtype, 4, 4, 4, 64, 8, false) }
        } else if dv == 4 {
            tile(dtype, 4, 4, 4, 32, 8, n % 32 != 0)
        } else if dv == 2 {
            tile(dtype, 2, 2, 2, 32, 16, n % 32 != 0)
        } else {
            tile(dtype, 1, 1, 1, 32, 32, n % 32 != 0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::spmm_table;

    #[test]
    fn select_is_valid_tabled_and_aligned_for_every_n() {
        for n in 1..=300usize {
            let c = SpmmConfig::select(1000, 1000, n, 10_000, DType::F32);
            c.validate().unwrap_or_else(|e| panic!("n={n}: {c} invalid: {e}"));
            assert!(
                spmm_table().iter().any(|t| t.kernel_name() == c.kernel_name()),
                "n={n}: {c} is not in variants.txt"
            );
            assert_eq!(n % c.dense_vector_width as usize, 0, "n={n}: {c}");
            if !c.predicate_loads {
                assert_eq!(n % c.block_items_x as usize, 0, "n={n}: {c} without predicates");
            }
        }
    }

    #[test]
    fn select_follows_the_documented_branches() {
        let s = |n| SpmmConfig::select(4096, 4096, n, 1 << 20, DType::F32);
        assert_eq!(s(8).kernel_name(), "spmm_f32_s4d1_y4k32x8w8_u4_nopred");
        assert_eq!(s(5).kernel_name(), "spmm_f32_s4d1_y4k32x8w8_u4_pred");
        assert_eq!(s(16).kernel_name(), "spmm_f32_s4d2_y4k32x16w8_u4_nopred");
        assert_eq!(s(128).kernel_name(), "spmm_f32_s4d4_y4k32x64w8_u4_nopred_lb8");
        assert_eq!(s(100).kernel_name(), "spmm_f32_s4d4_y4k32x32w8_u4_pred");
        assert_eq!(s(34).kernel_name(), "spmm_f32_s2d2_y2k32x32w16_u4_pred");
        assert_eq!(s(33).kernel_name(), "spmm_f32_s1d1_y1k32x32w32_u4_pred");
    }

    #[test]
    fn widest_dividing_picks_the_largest_divisor() {
        assert_eq!(widest_dividing(12, &[1, 2, 4]), 4);
        assert_eq!(widest_dividing(18, &[1, 2, 4]), 2);
        assert_eq!(widest_dividing(7, &[1, 2, 4]), 1);
    }
}
