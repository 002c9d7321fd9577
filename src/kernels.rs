//! The embedded kernels: one fatbin per family, built by build.rs, and the generated table of SpMM variants.

use crate::scalar::DType;
use crate::spmm::SpmmConfig;

include!(concat!(env!("OUT_DIR"), "/kernels_gen.rs"));

/// A kernel family: one folder under `cuda/`, one fatbin, one module loaded per [`crate::Gpu`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Family {
    Spmm,
    Spmv,
    Spgemm,
    /// Helpers beside the products (cuda/util: the timing's stream hold, the row copy that pads columns).
    Util,
    /// The sampled dense-dense product (cuda/sddmm, [`crate::sddmm()`]).
    Sddmm,
    /// The sparse softmax and its gradient (cuda/softmax, [`crate::softmax()`]).
    Softmax,
    /// Hopper-only SpMM kernels (warpgroup mma), machine code for sm_90a alone: they load on compute
    /// capability 9.0 only ([`SM90A_BUILT`] says whether this build has them).
    Spmm90a,
}

impl Family {
    /// All families, in the order of their module slots.
    pub const ALL: [Family; 7] =
        [Family::Spmm, Family::Spmv, Family::Spgemm, Family::Util, Family::Sddmm, Family::Softmax, Family::Spmm90a];

    /// The family's folder name.
    pub fn name(self) -> &'static str {
        match self {
            Family::Spmm => "spmm",
            Family::Spmv => "spmv",
            Family::Spgemm => "spgemm",
            Family::Util => "util",
            Family::Sddmm => "sddmm",
            Family::Softmax => "softmax",
            Family::Spmm90a => "spmm90a",
        }
    }

    /// The embedded fatbin (empty when the build had no nvcc).
    pub(crate) fn fatbin(self) -> &'static [u8] {
        match self {
            Family::Spmm => SPMM_FATBIN,
            Family::Spmv => SPMV_FATBIN,
            Family::Spgemm => SPGEMM_FATBIN,
            Family::Util => UTIL_FATBIN,
            Family::Sddmm => SDDMM_FATBIN,
            Family::Softmax => SOFTMAX_FATBIN,
            Family::Spmm90a => SPMM90A_FATBIN,
        }
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

/// Names of the seed SpMV kernels (cuda/spmv/spmv.cu).
pub(crate) const SPMV_SEED_PRODUCTS: &str = "spmv_seed_block_prefix_f32";
pub(crate) const SPMV_SEED_COMBINE: &str = "spmv_seed_combine_rows_f32";

/// The SpMM variants compiled into this build (empty without nvcc). Tests and benches iterate over it.
pub fn compiled_spmm_variants() -> &'static [SpmmConfig] {
    if KERNELS_BUILT {
        SPMM_TABLE
    } else {
        &[]
    }
}

/// The SpMM variant table as written in cuda/spmm/variants.txt, whether or not this build compiled it.
pub fn spmm_table() -> &'static [SpmmConfig] {
    SPMM_TABLE
}

/// The compiled variants for one element type.
pub fn compiled_spmm_variants_for(dtype: DType) -> impl Iterator<Item = &'static SpmmConfig> {
    compiled_spmm_variants().iter().filter(move |c| c.dtype == dtype)
}

/// The launch of one of cuda/util/util.cu's grid-stride kernels over `elements` elements, one thread each (the row
/// copy, the bias + ReLU pass): blocks of 256 threads, at most 1056 of them (8 on each of an H100's 132 SMs, one
/// wave); the kernels' loops stride over the rest.
pub(crate) fn grid_stride_launch(elements: usize) -> cudarc::driver::LaunchConfig {
    const THREADS: usize = 256;
    const MAX_BLOCKS: usize = 1056;
    cudarc::driver::LaunchConfig {
        grid_dim: (elements.div_ceil(THREADS).clamp(1, MAX_BLOCKS) as u32, 1, 1),
        block_dim: (THREADS as u32, 1, 1),
        shared_mem_bytes: 0,
    }
}
