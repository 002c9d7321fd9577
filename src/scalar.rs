//! Element types the kernels store: f32, f64, and the 16-bit f16 / bf16 (accumulated in f32).

use half::{bf16, f16};
use std::fmt;

/// The element type of a matrix, as the kernels and the CLI name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    F32,
    F64,
    F16,
    Bf16,
}

impl DType {
    /// The short name used in kernel names and on the command line (`f32`, `f16`, ...).
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::F16 => "f16",
            DType::Bf16 => "bf16",
        }
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DType::F32 => 4,
            DType::F64 => 8,
            DType::F16 | DType::Bf16 => 2,
        }
    }

    /// Unit roundoff of the storage type (half an ulp at 1.0).
    pub fn unit_roundoff(self) -> f64 {
        match self {
            DType::F32 => f32::EPSILON as f64 / 2.0,
            DType::F64 => f64::EPSILON / 2.0,
            DType::F16 => 2f64.powi(-11),
            DType::Bf16 => 2f64.powi(-8),
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for DType {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "f32" | "fp32" | "float" => Ok(DType::F32),
            "f64" | "fp64" | "double" => Ok(DType::F64),
            "f16" | "fp16" | "half" => Ok(DType::F16),
            "bf16" => Ok(DType::Bf16),
            _ => Err(format!("unknown dtype '{s}' (expected f32, f64, f16 or bf16)")),
        }
    }
}

/// A value type that can live in a [`crate::DeviceCsr`] or [`crate::DeviceDense`].
pub trait Scalar:
    Copy
    + Send
    + Sync
    + Default
    + PartialEq
    + fmt::Debug
    + cudarc::driver::DeviceRepr
    + cudarc::driver::ValidAsZeroBits
    + bytemuck::Pod
    + 'static
{
    const DTYPE: DType;
    fn to_f64(self) -> f64;
    fn from_f64(v: f64) -> Self;
    fn to_f32(self) -> f32;
    fn from_f32(v: f32) -> Self;
}

macro_rules! impl_scalar {
    ($t:ty, $dt:expr, $to64:expr, $from64:expr, $to32:expr, $from32:expr) => {
        impl Scalar for $t {
            const DTYPE: DType = $dt;
            #[inline]
            fn to_f64(self) -> f64 {
                $to64(self)
            }
            #[inline]
            fn from_f64(v: f64) -> Self {
                $from64(v)
            }
            #[inline]
            fn to_f32(self) -> f32 {
                $to32(self)
            }
            #[inline]
            fn from_f32(v: f32) -> Self {
                $from32(v)
            }
        }
    };
}

impl_scalar!(f32, DType::F32, |v: f32| v as f64, |v: f64| v as f32, |v: f32| v, |v: f32| v);
impl_scalar!(f64, DType::F64, |v: f64| v, |v: f64| v, |v: f64| v as f32, |v: f32| v as f64);
impl_scalar!(f16, DType::F16, |v: f16| v.to_f64(), f16::from_f64, |v: f16| v.to_f32(), f16::from_f32);
impl_scalar!(bf16, DType::Bf16, |v: bf16| v.to_f64(), bf16::from_f64, |v: bf16| v.to_f32(), bf16::from_f32);
