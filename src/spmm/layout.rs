//! B and C in either layout: C = A * B where B and C may be column-major, as cuSPARSE's SpMM takes them
//! (`CUSPARSE_ORDER_COL`). A sparse layer over row-major activations, Y = X W^T, is C = W X^T stored as C^T: B and
//! C column-major.
//!
//! Every kernel reads B and writes C row-major, gathering whole rows of B, so a column-major operand is turned
//! around on the device ([`DeviceDense::transpose_into`]) and the product runs as it always does: B^T is
//! transposed into B before it, C after it (and before it too where beta reads C). The result has the bits of the
//! row-major product on the same values, and costs a pass over each column-major operand (NOTES.md step 109).

use crate::csr::DeviceCsr;
use crate::dense::DeviceDense;
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::scalar::Scalar;

use super::{auto_kernel, check_bias, check_gpu_operands, run_kernel, SpmmEpilogue, SpmmKernel};

/// How a dense operand's elements lie in memory.
///
/// A column-major `r x c` matrix holds the same elements, in the same order, as the row-major `c x r` matrix that
/// is its transpose, and that is how it is passed: as a [`DeviceDense`] of `c` rows and `r` columns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Layout {
    /// Element (i, j) of an r x c matrix at i * c + j.
    #[default]
    RowMajor,
    /// Element (i, j) of an r x c matrix at j * r + i: a [`DeviceDense`] of c x r.
    ColMajor,
}

impl Layout {
    /// The logical rows and columns of `d` held in this layout.
    pub fn shape<T: Scalar>(self, d: &DeviceDense<T>) -> (usize, usize) {
        match self {
            Layout::RowMajor => (d.rows(), d.cols()),
            Layout::ColMajor => (d.cols(), d.rows()),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Layout::RowMajor => "row-major",
            Layout::ColMajor => "column-major",
        }
    }
}

impl std::fmt::Display for Layout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Layout {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "row" | "row-major" => Ok(Layout::RowMajor),
            "col" | "column" | "col-major" | "column-major" => Ok(Layout::ColMajor),
            other => Err(format!("layout '{other}': row or col")),
        }
    }
}

/// The layouts of B and C in [`spmm_layouts`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct DenseLayouts {
    pub b: Layout,
    pub c: Layout,
}

impl DenseLayouts {
    /// B and C row-major: the plain product.
    pub const ROW_MAJOR: DenseLayouts = DenseLayouts { b: Layout::RowMajor, c: Layout::RowMajor };
    /// B and C column-major: cuSPARSE's classic layout, and Y = X W^T over row-major X and Y (B = X, C = Y).
    pub const COL_MAJOR: DenseLayouts = DenseLayouts { b: Layout::ColMajor, c: Layout::ColMajor };
}

/// [`Error::ShapeMismatch`] unless A (m x k) times B (k x n) fits C (m x n), each as its layout has it; returns n.
pub fn check_layout_shapes<T: Scalar>(
    a: &DeviceCsr<T>,
    b: &DeviceDense<T>,
    c: &DeviceDense<T>,
    layouts: DenseLayouts,
) -> Result<usize> {
    let held = |what: &str, d: &DeviceDense<T>, layout: Layout| {
        let (r, c) = layout.shape(d);
        match layout {
            Layout::RowMajor => format!("{what} is {r} x {c} (row-major)"),
            Layout::ColMajor => {
                format!("{what} is {r} x {c} (column-major: a {} x {} DeviceDense)", d.rows(), d.cols())
            }
        }
    };
    let (bk, n) = layouts.b.shape(b);
    let (cm, cn) = layouts.c.shape(c);
    if bk != a.cols() {
        return Err(Error::ShapeMismatch(format!("A is {} x {} but {}", a.rows(), a.cols(), held("B", b, layouts.b))));
    }
    if cm != a.rows() || cn != n {
        return Err(Error::ShapeMismatch(format!("A * B is {} x {n} but {}", a.rows(), held("C", c, layouts.c))));
    }
    Ok(n)
}

/// C = alpha * A * B + beta * C (+ bias, ReLU) with B and C in `layouts` ([`Layout`]: a column-major operand is
/// passed as the row-major [`DeviceDense`] of its transpose), by `kernel` or, where it is None, the automatic choice
/// for A and n ([`auto_kernel`]); returns the kernel that ran.
///
/// A column-major B is transposed into a row-major copy first, and a column-major C is computed row-major into a
/// copy that is then transposed into it (where beta reads C, C is transposed into that copy first). So the kernels
/// are the row-major ones, C gets the same bits as the row-major product on the same values, and each column-major
/// operand costs one pass over it on the device and its size in device memory while the call runs (from the
/// stream-ordered pool, which keeps it for the next call). The bias is one f32 per row of C as the product has it
/// (A's rows) in either layout. Every element of C is written. To tune, run [`super::spmm_tune`] on row-major
/// operands of the same shapes and pass its kernel: the transpositions cost every kernel the same.
///
/// Errors are the row-major product's, and [`Error::ShapeMismatch`] where A (m x k), B (k x n) and C (m x n) do
/// not fit as their layouts have them. A call that fails leaves a column-major C as it was.
pub fn spmm_layouts<T: Scalar>(
    gpu: &Gpu,
    a: &DeviceCsr<T>,
    b: &DeviceDense<T>,
    c: &mut DeviceDense<T>,
    layouts: DenseLayouts,
    kernel: Option<&SpmmKernel>,
    epilogue: SpmmEpilogue,
) -> Result<SpmmKernel> {
    check_gpu_operands(gpu, a, b, c)?;
    let n = check_layout_shapes(a, b, c, layouts)?;
    check_bias(gpu, a, epilogue.bias)?;
    let kernel = match kernel {
        Some(kernel) => *kernel,
        None => auto_kernel(gpu, a, n)?,
    };
    let b_rows;
    let b = match layouts.b {
        Layout::RowMajor => b,
        Layout::ColMajor => {
            b_rows = b.transpose_temporary(gpu)?;
            &b_rows
        }
    };
    match layouts.c {
        Layout::RowMajor => run_kernel(gpu, a, b, epilogue, c, &kernel)?,
        Layout::ColMajor => {
            let mut c_rows = if epilogue.reads_c() {
                c.transpose_temporary(gpu)?
            } else {
                DeviceDense::unwritten(gpu, a.rows(), n, "allocating C's row-major copy")?
            };
            run_kernel(gpu, a, b, epilogue, &mut c_rows, &kernel)?;
            c_rows.transpose_into(gpu, c)?;
        }
    }
    Ok(kernel)
}
