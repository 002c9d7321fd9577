//! The crate's error type.
//!
//! Policy (after sprs/faer): everything a caller can get wrong at run time — malformed CSR, shapes that do not
//! match, a config that is invalid or not compiled, sizes past i32, no GPU, out of device memory — is a
//! [`Error`] value, never a panic, a device fault or a silently wrong answer.

use crate::csr::CsrError;

/// Everything that can go wrong in tilesparse.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// libcuda could not be loaded (no NVIDIA driver on this machine).
    #[error("no CUDA driver: libcuda could not be loaded on this machine")]
    NoDriver,
    /// The driver loaded but reports no device (or not the one asked for).
    #[error("no CUDA device {ordinal}: the driver reports {count} device(s)")]
    NoDevice { ordinal: usize, count: usize },
    /// The kernels were not compiled into this build (nvcc was missing when it was built).
    #[error(
        "the GPU kernels were not compiled into this build of tilesparse (nvcc was not found at build time). \
         Install nvcc 13.0 (`scripts/install-cuda-toolchain.sh` does it from pip wheels and prints the PATH line), \
         then rebuild; set TILESPARSE_REQUIRE_NVCC=1 to make a missing nvcc a build error"
    )]
    KernelsNotBuilt,
    /// A CUDA driver call failed; `what` says which operation.
    #[error("CUDA driver error during {what}: {source}")]
    Driver {
        what: &'static str,
        #[source]
        source: cudarc::driver::DriverError,
    },
    /// The device ran out of memory.
    #[error("out of device memory during {what} (asked for {bytes} bytes)")]
    OutOfDeviceMemory { what: &'static str, bytes: usize },
    /// A cuSPARSE call failed.
    #[error("cuSPARSE error during {what}: {status:?}")]
    Cusparse { what: &'static str, status: cudarc::cusparse::sys::cusparseStatus_t },
    /// A cuBLAS call failed.
    #[error("cuBLAS error during {what}: {status:?}")]
    Cublas { what: &'static str, status: cudarc::cublas::sys::cublasStatus_t },
    /// A library (cuSPARSE, cuBLAS) could not be loaded.
    #[error("{0} could not be loaded on this machine")]
    LibraryMissing(&'static str),
    /// The sparse matrix is not a valid CSR matrix.
    #[error("invalid CSR matrix: {0}")]
    InvalidCsr(#[from] CsrError),
    /// Operand shapes do not fit together.
    #[error("shape mismatch: {0}")]
    ShapeMismatch(String),
    /// A size does not fit the 32-bit indices the kernels use.
    #[error("too large: {0}")]
    TooLarge(String),
    /// A kernel config breaks one of the template's rules.
    #[error("invalid config {config}: {rule}")]
    InvalidConfig { config: String, rule: String },
    /// A valid config that is not among the precompiled variants.
    #[error("config {config} is valid but not compiled; nearest compiled variants: {nearest}")]
    NotCompiled { config: String, nearest: String },
    /// The config cannot run this problem (for example its dense vector width does not divide n).
    #[error("config {config} cannot run this problem: {reason}")]
    Unsupported { config: String, reason: String },
    /// Device memory made by another [`crate::Gpu`] handle (another device, or another handle's stream on the
    /// same device, which this one's launches would not wait for).
    #[error("wrong GPU handle: {0}")]
    WrongGpu(String),
    /// Operands whose sparsity pattern is not the one a reusable plan was made for.
    #[error("pattern mismatch: {0}")]
    PatternMismatch(String),
    /// The element type is not supported by this operation.
    #[error("unsupported dtype {dtype} for {op}")]
    UnsupportedDtype { dtype: crate::DType, op: &'static str },
    /// An operation that cannot run while the stream records ([`crate::Gpu::record`]).
    #[error("while recording: {0}")]
    Recording(String),
    /// A command-line or file-system problem outside the kernels.
    #[error("{0}")]
    Usage(String),
    /// A result did not match the f64 oracle.
    #[error("verification failed: {0}")]
    Verification(String),
    /// Reading or writing a Matrix Market file failed.
    #[error(transparent)]
    Mtx(#[from] crate::mtx::MtxError),
}

/// Result with the crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Maps a driver error, turning CUDA_ERROR_OUT_OF_MEMORY into [`Error::OutOfDeviceMemory`].
    pub(crate) fn driver(what: &'static str, bytes: usize) -> impl FnOnce(cudarc::driver::DriverError) -> Error {
        move |source| {
            if source.0 == cudarc::driver::sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY {
                Error::OutOfDeviceMemory { what, bytes }
            } else {
                Error::Driver { what, source }
            }
        }
    }
}
