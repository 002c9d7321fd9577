//! 01: multiply a generated sparse matrix by a dense one on the GPU and check one element on the CPU.
//! `cargo run --release --example 01-spmm`

use tilesparse::{gen, spmm_auto, DeviceCsr, DeviceDense, Gpu};

fn main() -> tilesparse::Result<()> {
    let (m, k, n) = (2048, 1024, 256);
    let a = gen::uniform_random(m, k, 0.1, 7); // 90% sparse, f32 CSR (sprs)
    let b = gen::dense_matrix(k, n, 8); // row-major
    let gpu = Gpu::new(0)?;
    let a_dev = DeviceCsr::upload(&gpu, a.view())?; // validated: sorted, unique, in-range indices
    let b_dev = DeviceDense::upload(&gpu, k, n, &b)?;
    let mut c_dev = DeviceDense::<f32>::zeros(&gpu, m, n)?;
    let config = spmm_auto(&gpu, &a_dev, &b_dev, &mut c_dev)?;
    let c = c_dev.download(&gpu)?;
    let row = a.outer_view(3).expect("row 3");
    let c_3_5: f32 = row.iter().map(|(j, v)| v * b[j * n + 5]).sum();
    println!("{config}: C[3][5] = {} (CPU: {c_3_5})", c[3 * n + 5]);
    Ok(())
}
