//! 06: a pruned layer whose values are trained while its pattern stays: each step gives the weight new values
//! (`DeviceCsr::set_values`), which rewrites on the device the tensor-core blocks the kernel multiplies by, then
//! multiplies. The kernel is chosen once, by timing each one with the work an update costs it
//! (`TuneOptions::values_change`), and only its blocks are kept (`keep_tensor_core_blocks_of`), so each update
//! rewrites those alone. Values computed on the device, by an optimizer's own kernel, are written where they lie
//! through `DeviceCsr::update_values`, with no copy. `cargo run --release --example 06-new-values`

use half::f16;
use tilesparse::{gen, spmm_kernel, spmm_tune, DeviceCsr, DeviceDense, Gpu, TuneOptions};

fn main() -> tilesparse::Result<()> {
    // A 1536 x 384 weight pruned to 30% of its entries, times a batch of 1024 columns.
    let (m, k, n) = (1536, 384, 1024);
    let mut w: sprs::CsMat<f16> = gen::convert(&gen::uniform_random(m, k, 0.3, 7));
    let x: Vec<f16> = gen::dense_matrix(k, n, 8).into_iter().map(f16::from_f32).collect();
    let gpu = Gpu::new(0)?;
    let mut w_dev = DeviceCsr::upload(&gpu, w.view())?;
    let x_dev = DeviceDense::upload(&gpu, k, n, &x)?;
    let mut c_dev = DeviceDense::<f16>::zeros(&gpu, m, n)?;
    let opts = TuneOptions { values_change: true, ..TuneOptions::default() };
    let tuned = spmm_tune(&gpu, &w_dev, &x_dev, &mut c_dev, &opts)?;
    w_dev.keep_tensor_core_blocks_of(&tuned.kernel);
    println!("tuned for changing values: {} ({:.4} ms with its update)", tuned.kernel, tuned.ms);
    for step in 0..3 {
        if step > 0 {
            // A stand-in for an optimizer's update: every stored value moves, no entry appears or leaves.
            let noise = gen::dense_matrix(1, w.nnz(), 100 + step);
            for (v, d) in w.data_mut().iter_mut().zip(noise) {
                *v = f16::from_f32(0.9 * v.to_f32() + 0.1 * d);
            }
            w_dev.set_values(&gpu, w.data())?;
        }
        spmm_kernel(&gpu, &w_dev, &x_dev, &mut c_dev, &tuned.kernel)?;
        let c = c_dev.download(&gpu)?;
        // One element on the CPU, from this step's values.
        let (i, j) = (5, 17);
        let row = w.outer_view(i).expect("row 5");
        let sum: f64 = row.iter().map(|(p, v)| v.to_f64() * x[p * n + j].to_f64()).sum();
        println!("step {step}: C[{i}][{j}] = {} (CPU: {sum:.4})", c[i * n + j]);
    }
    Ok(())
}
