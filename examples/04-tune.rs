//! 04: choose the SpMM kernel for one matrix by timing (`spmm_tune`), keep its name, and reuse it.
//! `cargo run --release --example 04-tune`

use tilesparse::{gen, spmm_kernel, spmm_tune, DeviceCsr, DeviceDense, Gpu, SpmmKernel, TuneOptions};

fn main() -> tilesparse::Result<()> {
    // A power-law matrix, as a graph's adjacency: rows of very different lengths.
    let (m, k, n) = (4096, 4096, 128);
    let a = gen::power_law(m, k, 40.0, 2.0, 7);
    let b = gen::dense_matrix(k, n, 8);
    let gpu = Gpu::new(0)?;
    let a_dev = DeviceCsr::upload(&gpu, a.view())?;
    let b_dev = DeviceDense::upload(&gpu, k, n, &b)?;
    let mut c_dev = DeviceDense::<f32>::zeros(&gpu, m, n)?;
    // Once: every kernel that can run this product, timed on these operands.
    let tuned = spmm_tune(&gpu, &a_dev, &b_dev, &mut c_dev, &TuneOptions::default())?;
    println!(
        "{} kernels timed in {:?}: {} at {:.4} ms; the automatic choice {} at {:.4} ms",
        tuned.screened, tuned.elapsed, tuned.kernel, tuned.ms, tuned.automatic, tuned.automatic_ms
    );
    // The choice is a kernel name: store it with the matrix, parse it back, and multiply as often as needed.
    let stored = tuned.kernel.to_string();
    let kernel: SpmmKernel =
        stored.parse().map_err(|rule| tilesparse::Error::InvalidConfig { config: stored, rule })?;
    for _ in 0..3 {
        spmm_kernel(&gpu, &a_dev, &b_dev, &mut c_dev, &kernel)?;
    }
    let c = c_dev.download(&gpu)?;
    let row = a.outer_view(3).expect("row 3");
    let c_3_5: f32 = row.iter().map(|(j, v)| v * b[j * n + 5]).sum();
    println!("{kernel}: C[3][5] = {} (CPU: {c_3_5})", c[3 * n + 5]);
    Ok(())
}
