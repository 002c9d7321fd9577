//! # tilesparse
//!
//! Sparse-matrix kernels for NVIDIA GPUs, from Rust: a Sputnik-style tiled SpMM (CSR x dense row-major, f32,
//! f16, bf16) whose [`SpmmConfig`] mirrors Sputnik's template parameters and selects among precompiled CUDA
//! variants, with A transposed on the device ([`DeviceCsr::transpose`]), B and C in either layout
//! ([`spmm_layouts`]), independent products side by side ([`spmm_concurrent`]), and steps recorded once and replayed
//! as CUDA graphs ([`Gpu::record`]); SDDMM, the sampled dense-dense product of a sparse layer's weight gradient
//! ([`sddmm()`]); the sparse softmax and its gradient, which with SDDMM and SpMM make sparse attention
//! ([`softmax()`], [`softmax_backward`]); SpGEMM (the production two-phase SpGEMM with a reusable [`SpgemmPlan`], and
//! the seed write-up's kernel ladder, in [`mod@spgemm`]); SpMV (the seed prefix-sum kernel and a production kernel planned from row
//! statistics); and a multi-threaded CPU backend with an independent f64 oracle.
//!
//! Layers: `kernels` (embedded fatbins and names) → one thin `unsafe` launcher per family → safe functions
//! ([`spmm()`], [`spgemm()`], [`spmv()`], [`spmv_seed`], [`spgemm::spgemm_ladder`]) that validate, select and
//! launch.
//!
//! ```no_run
//! use tilesparse::{gen, Gpu, DeviceCsr, DeviceDense, SpmmConfig};
//! let gpu = Gpu::new(0)?;
//! let a = gen::uniform_random(1024, 1024, 0.1, 7);
//! let b = gen::dense_matrix(1024, 256, 8);
//! let a_dev = DeviceCsr::upload(&gpu, a.view())?;
//! let b_dev = DeviceDense::upload(&gpu, 1024, 256, &b)?;
//! let mut c_dev = DeviceDense::<f32>::zeros(&gpu, 1024, 256)?;
//! let config = SpmmConfig::select(1024, 1024, 256, a.nnz(), tilesparse::DType::F32);
//! tilesparse::spmm(&gpu, &a_dev, &b_dev, &mut c_dev, &config)?;
//! let c = c_dev.download(&gpu)?;
//! # Ok::<(), tilesparse::Error>(())
//! ```

pub mod baseline;
pub mod cpu;
pub mod csr;
pub mod dense;
pub mod error;
pub mod gen;
pub mod gpu;
pub mod kernels;
pub mod mtx;
pub mod record;
pub mod scalar;
pub mod sddmm;
pub mod softmax;
pub mod spgemm;
pub mod spmm;
pub mod spmv;
pub mod suite;
pub mod suite_sddmm;
pub mod suite_softmax;
pub mod suite_spgemm;
pub mod suite_spmv;
pub mod timing;

pub use csr::{CsrError, CsrTranspose, DeviceCsr, RowStats};
pub use dense::DeviceDense;
pub use error::{Error, Result};
pub use gpu::Gpu;
pub use record::Recording;
pub use scalar::{DType, Scalar};
pub use sddmm::{sddmm, sddmm_auto, sddmm_auto_with, sddmm_planned, sddmm_with, SddmmConfig, SddmmPlan};
pub use softmax::{softmax, softmax_backward, softmax_backward_with, softmax_with, SoftmaxConfig};
pub use spgemm::{spgemm, SpgemmPlan};
pub use spmm::{
    spmm, spmm_auto, spmm_auto_with, spmm_bias_relu, spmm_bias_relu_auto, spmm_concurrent, spmm_in_order, spmm_kernel,
    spmm_kernel_bias_relu, spmm_kernel_with, spmm_layouts, spmm_tensor_core, spmm_tensor_core_bias_relu,
    spmm_tensor_core_empty_windows, spmm_tensor_core_paths, spmm_tensor_core_with, spmm_tune, spmm_tune_bias_relu,
    spmm_tune_with, spmm_with, BlockOrder, DenseLayouts, Layout, RangeSum, SpmmConfig, SpmmEpilogue, SpmmJob,
    SpmmKernel, TensorCoreConfig, TuneOptions, TunedSpmm,
};
pub use spmv::{spmv, spmv_seed, SpmvPlan, SpmvStrategy};
