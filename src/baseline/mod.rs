//! Baselines the kernels are measured against, in the same run: cuSPARSE (bound raw through cudarc's
//! `cusparse::sys`, wrapped here) and cuBLAS GEMM on the densified matrix; and the bias + ReLU epilogue as a pass
//! of its own, for the products that have no fused one.

pub mod cublas;
pub mod cusparse;
pub mod epilogue;

use crate::scalar::DType;
use cudarc::cusparse::sys::cudaDataType;

/// The CUDA data type of a storage type.
pub(crate) fn cuda_data_type(dtype: DType) -> cudaDataType {
    match dtype {
        DType::F32 => cudaDataType::CUDA_R_32F,
        DType::F64 => cudaDataType::CUDA_R_64F,
        DType::F16 => cudaDataType::CUDA_R_16F,
        DType::Bf16 => cudaDataType::CUDA_R_16BF,
    }
}
