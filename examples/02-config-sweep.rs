//! 02: time every compiled SpMM variant that can run one problem, fastest first.
//! `cargo run --release --example 02-config-sweep`

use tilesparse::kernels::compiled_spmm_variants_for;
use tilesparse::spmm::check_config;
use tilesparse::timing::time_op;
use tilesparse::{gen, spmm, DType, DeviceCsr, DeviceDense, Gpu};

fn main() -> tilesparse::Result<()> {
    let (m, k, n) = (4096, 4096, 256);
    let a = gen::uniform_random(m, k, 0.1, 1);
    let gpu = Gpu::new(0)?;
    let a_dev = DeviceCsr::upload(&gpu, a.view())?;
    let b_dev = DeviceDense::upload(&gpu, k, n, &gen::dense_matrix(k, n, 2))?;
    let mut c_dev = DeviceDense::<f32>::zeros(&gpu, m, n)?;
    let mut rows = Vec::new();
    for config in compiled_spmm_variants_for(DType::F32).filter(|c| check_config(c, DType::F32, m, k, n).is_ok()) {
        let t = time_op(&gpu, 3, 20, || spmm(&gpu, &a_dev, &b_dev, &mut c_dev, config))?;
        rows.push((t.median_ms(), config.kernel_name()));
    }
    rows.sort_by(|x, y| x.0.total_cmp(&y.0));
    for (ms, name) in rows {
        println!("{name:<44} {ms:8.4} ms {:8.1} GFLOP/s", 2.0 * a.nnz() as f64 * n as f64 / ms / 1e6);
    }
    Ok(())
}
