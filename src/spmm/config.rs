//! [`SpmmConfig`]: the Rust mirror of `ts::SpmmConfig` (cuda/spmm/spmm_config.cuh), field for field.

use std::fmt;
use std::str::FromStr;

use crate::scalar::DType;

include!("kernel_name.rs");

/// One SpMM variant: element type, vector widths, tile shape and code-generation switches.
///
/// Mirrors the C++ template field for field (Sputnik's parameters, and `row_split` and `column_tiles`, which are
/// not among them);
/// [`SpmmConfig::validate`] repeats each of its `static_assert`s with the same message, and
/// [`SpmmConfig::kernel_name`] is the one place a kernel name is built.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SpmmConfig {
    /// Element type of A, B and C (accumulation is always f32).
    pub dtype: DType,
    /// Elements of A per vector load (1, 2, 4; up to 8 for 16-bit types).
    pub sparse_vector_width: u32,
    /// Elements of B and C per vector load and store.
    pub dense_vector_width: u32,
    /// Subwarps per block: one per row, or `row_split` per row ([`SpmmConfig::rows_per_block`]).
    pub block_items_y: u32,
    /// Nonzeros of a row per shared-memory tile.
    pub block_items_k: u32,
    /// Columns of C per block.
    pub block_items_x: u32,
    /// Threads per subwarp.
    pub block_width: u32,
    /// Unroll factor of the residue loop.
    pub residue_unroll: u32,
    /// Guard loads and stores in n; without it n must be a multiple of `block_items_x`.
    pub predicate_loads: bool,
    /// Emit `__launch_bounds__` with `min_occupancy` blocks per SM.
    pub launch_bounds: bool,
    /// Blocks per SM the compiler must fit when `launch_bounds` is set.
    pub min_occupancy: u32,
    /// Subwarps that share one row (1: Sputnik's one subwarp per row). Subwarp q of a row takes the row's full
    /// tiles q, q + row_split, ... (and the residue when its turn comes next); the block adds their sums in
    /// subwarp order, so C has the same bits on every run. More of a long row's loads are then in flight at
    /// once (NOTES.md, "SpMM step 29"). Not in Sputnik, and named `_r{row_split}` only when above 1.
    pub row_split: u32,
    /// Column tiles of C each block computes, one after another on the same rows (1: Sputnik's one). The grid's
    /// column extent is then ceil(column tiles / column_tiles). On very short rows the rows' bounds and entries,
    /// loaded for the first tile, are L1 hits for the others, and the block's fixed costs are paid once (NOTES.md,
    /// "SpMM step 60"). Not in Sputnik, and named `_c{column_tiles}` only when above 1.
    pub column_tiles: u32,
}

impl SpmmConfig {
    /// Threads per block.
    pub fn threads_per_block(&self) -> u32 {
        self.block_items_y.saturating_mul(self.block_width)
    }

    /// Rows of C per block: `block_items_y / row_split`.
    pub fn rows_per_block(&self) -> u32 {
        self.block_items_y / self.row_split.max(1)
    }

    /// The tile kernel's grid extent over n columns: groups of `column_tiles` column tiles of `block_items_x`
    /// (one tile each for most variants). `spmm_kernel` in cuda/spmm/spmm.cu decodes the same groups.
    pub(crate) fn column_groups(&self, n: usize) -> usize {
        n.div_ceil(self.block_items_x as usize).div_ceil(self.column_tiles.max(1) as usize)
    }

    /// The exported kernel name, e.g. `spmm_f32_s4d4_y4k32x32w8_u4_pred` (built by `kernel_name.rs`, which
    /// build.rs includes too).
    pub fn kernel_name(&self) -> String {
        spmm_kernel_name(
            self.dtype.name(),
            self.sparse_vector_width,
            self.dense_vector_width,
            self.block_items_y,
            self.block_items_k,
            self.block_items_x,
            self.block_width,
            self.residue_unroll,
            self.predicate_loads,
            self.launch_bounds,
            self.min_occupancy,
            self.row_split,
            self.column_tiles,
        )
    }

    /// Whether the kernel can walk the pieces of a row split ([`crate::spmm::split`]): every variant but the
    /// launch-bounded ones, whose register budget is spent (the piece path cost them 2-4% on unsplit
    /// matrices; NOTES.md, "SpMM step 5"), and those with `row_split` above 1, whose subwarps already share
    /// rows. Repeats `kWalksPieces` in cuda/spmm/spmm_config.cuh.
    pub fn walks_pieces(&self) -> bool {
        !self.launch_bounds && self.row_split == 1
    }

    /// Whether the kernel can run the SM-affine block order ([`crate::spmm::BlockOrder::SmAffine`]): the
    /// launch-bounded variants only. Compiled into the others (those that walk pieces), the claim cost the
    /// unbounded 128-column tiles 9-31% at n = 4096 even when it did not run (uniform 4096^2 at 80%, two rows per
    /// block: 3.01 -> 3.94 ms; NOTES.md, "SpMM step 15"). Nor those with `column_tiles` above 1: a claim is one
    /// column tile. Repeats `kClaimsBlocks` in cuda/spmm/spmm_config.cuh.
    pub fn claims_blocks(&self) -> bool {
        self.launch_bounds && self.column_tiles == 1
    }

    /// Whether two configs name the same kernel (min_occupancy only matters with launch bounds).
    pub fn same_kernel(&self, other: &SpmmConfig) -> bool {
        self.kernel_key() == other.kernel_key()
    }

    /// The config with what does not change its kernel cleared (min_occupancy without launch bounds): equal for
    /// configs that name the same kernel.
    pub(crate) fn kernel_key(&self) -> SpmmConfig {
        SpmmConfig { min_occupancy: if self.launch_bounds { self.min_occupancy } else { 0 }, ..*self }
    }

    /// Checks every rule of the C++ template, with the same messages as its `static_assert`s.
    pub fn validate(&self) -> Result<(), String> {
        let (sv, dv, y, k, x, w, ru, rs, ct) = (
            self.sparse_vector_width,
            self.dense_vector_width,
            self.block_items_y,
            self.block_items_k,
            self.block_items_x,
            self.block_width,
            self.residue_unroll,
            self.row_split,
            self.column_tiles,
        );
        let rule = |ok: bool, msg: &str| if ok { Ok(()) } else { Err(msg.to_string()) };
        // Host-only rules first, so that the template's rules below never divide by zero.
        rule(
            sv > 0 && dv > 0 && y > 0 && k > 0 && x > 0 && w > 0 && ru > 0 && rs > 0 && ct > 0,
            "every size must be positive",
        )?;
        // No tile dimension can pass a block's 1024 threads; the bound also keeps the products below in u32.
        rule([sv, dv, y, k, x, w, ru, rs, ct].iter().all(|&v| v <= 1024), "every size must be at most 1024")?;
        rule(!self.launch_bounds || self.min_occupancy > 0, "min_occupancy must be positive with launch_bounds")?;
        rule(self.dtype != DType::F64, "SpMM kernels store f32, f16 or bf16")?;
        let elem = self.dtype.size() as u32;
        // The template's static_asserts, in its order and words.
        rule((y * w) % 32 == 0, "block_items_y * block_width must be a multiple of 32")?;
        rule(k >= w && k % w == 0, "block_items_k must be a multiple of block_width")?;
        rule(x >= w && x % w == 0, "block_items_x must be a multiple of block_width")?;
        rule(sv <= k / w, "sparse_vector_width must be <= block_items_k / block_width")?;
        rule(dv * w <= x, "dense_vector_width * block_width must be <= block_items_x")?;
        rule(k % ru == 0, "block_items_k must be a multiple of residue_unroll")?;
        rule(w == 1 || w % 2 == 0, "block_width must be 1 or even")?;
        // Not Sputnik's "block_items_y * block_width == 32 when 1 < block_width < 32": see spmm_config.cuh.
        rule(w <= 32, "block_width must be <= 32")?;
        rule(y * w <= 1024, "block_items_y * block_width must be at most 1024 (threads per block)")?;
        rule(x % (w * dv) == 0, "block_items_x must be a multiple of block_width * dense_vector_width")?;
        rule(k % (w * sv) == 0, "block_items_k must be a multiple of block_width * sparse_vector_width")?;
        rule(elem * sv <= 16 && elem * dv <= 16, "a vector access moves at most 16 bytes")?;
        rule(sv.is_power_of_two() && dv.is_power_of_two(), "vector widths must be powers of two")?;
        rule(y % rs == 0, "block_items_y must be a multiple of row_split")?;
        // The template's "column_tiles must be positive" is "every size must be positive" above.
        rule(k % 4 == 0, "block_items_k must be a multiple of 4")?;
        Ok(())
    }
}

impl fmt::Display for SpmmConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.kernel_name())
    }
}

impl FromStr for SpmmConfig {
    type Err = String;

    /// Parses a kernel name (the `spmm_` prefix is optional), e.g. `f32_s4d4_y4k32x32w8_u4_pred_lb8` or
    /// `f32_s1d4_y4k32x128w32_u4_nopred_r4` or `f32_s1d4_y2k16x128w16_u4_nopred_c4_lb16`.
    fn from_str(s: &str) -> Result<Self, String> {
        let bad =
            || format!("cannot parse config '{s}': expected e.g. spmm_f32_s4d4_y4k32x32w8_u4_pred[_r2][_c4][_lb8]");
        let body = s.strip_prefix("spmm_").unwrap_or(s);
        let parts: Vec<&str> = body.split('_').collect();
        if !(5..=8).contains(&parts.len()) {
            return Err(bad());
        }
        let dtype: DType = parts[0].parse()?;
        // Reads "<letter><number>..." groups in order.
        let nums = |part: &str, letters: &[char]| -> Option<Vec<u32>> {
            let mut out = Vec::new();
            let mut rest = part;
            for &l in letters {
                rest = rest.strip_prefix(l)?;
                let end = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
                out.push(rest[..end].parse().ok()?);
                rest = &rest[end..];
            }
            rest.is_empty().then_some(out)
        };
        let sd = nums(parts[1], &['s', 'd']).ok_or_else(bad)?;
        let tile = nums(parts[2], &['y', 'k', 'x', 'w']).ok_or_else(bad)?;
        let ru = nums(parts[3], &['u']).ok_or_else(bad)?;
        let predicate_loads = match parts[4] {
            "pred" => true,
            "nopred" => false,
            _ => return Err(bad()),
        };
        // Then `_r{row_split}` and `_c{column_tiles}` (only above 1, as kernel_name writes them) and
        // `_lb{min_occupancy}`, in that order.
        let mut rest = &parts[5..];
        let mut suffix = |prefix: &str| -> Result<Option<u32>, String> {
            match rest.first().and_then(|p| p.strip_prefix(prefix)) {
                Some(v) => {
                    rest = &rest[1..];
                    v.parse().map(Some).map_err(|_| bad())
                }
                None => Ok(None),
            }
        };
        let row_split = suffix("r")?.unwrap_or(1);
        let column_tiles = suffix("c")?.unwrap_or(1);
        let lb = suffix("lb")?;
        if !rest.is_empty() {
            return Err(bad());
        }
        let (launch_bounds, min_occupancy) = match lb {
            Some(mo) => (true, mo),
            None => (false, 8),
        };
        Ok(SpmmConfig {
            dtype,
            sparse_vector_width: sd[0],
            dense_vector_width: sd[1],
            block_items_y: tile[0],
            block_items_k: tile[1],
            block_items_x: tile[2],
            block_width: tile[3],
            residue_unroll: ru[0],
            predicate_loads,
            launch_bounds,
            min_occupancy,
            row_split,
            column_tiles,
        })
    }
}
