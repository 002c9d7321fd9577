// The one place an SpMM kernel name is built. `include!`d by build.rs (which names the exported kernels) and
// by src/spmm/config.rs (which looks them up), so the two can never disagree.

/// `spmm_{dtype}_s{sv}d{dv}_y{y}k{k}x{x}w{w}_u{ru}_{pred|nopred}[_r{row_split}][_c{column_tiles}][_lb{min_occupancy}]`
/// (`_r` and `_c` only above 1, so Sputnik's variants keep Sputnik's names)
#[allow(clippy::too_many_arguments)]
fn spmm_kernel_name(
    dtype: &str,
    sv: u32,
    dv: u32,
    y: u32,
    k: u32,
    x: u32,
    w: u32,
    ru: u32,
    pred: bool,
    lb: bool,
    mo: u32,
    rs: u32,
    ct: u32,
) -> String {
    let predicates = if pred { "pred" } else { "nopred" };
    let split = if rs != 1 { format!("_r{rs}") } else { String::new() };
    let columns = if ct != 1 { format!("_c{ct}") } else { String::new() };
    let bounds = if lb { format!("_lb{mo}") } else { String::new() };
    format!("spmm_{dtype}_s{sv}d{dv}_y{y}k{k}x{x}w{w}_u{ru}_{predicates}{split}{columns}{bounds}")
}
