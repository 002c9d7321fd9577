//! 07: a pruned layer's forward and backward products: Y = W X, then dX = W^T dY with the transpose made once on the
//! device and kept with W (`DeviceCsr::transposed`). Each step the weight gets new values (`DeviceCsr::set_values`),
//! which reach W^T on the device in the same call, with no transposition (`DeviceCsr::transpose` and
//! `CsrTranspose::refresh` do the same by hand). Every product takes the automatic choice (`spmm_auto`); W^T is a
//! `DeviceCsr` like any other. `cargo run --release --example 07-transpose`

use tilesparse::{gen, spmm_auto, DeviceCsr, DeviceDense, Gpu};

fn main() -> tilesparse::Result<()> {
    // A 1536 x 384 weight pruned to 30% of its entries, a batch of 1024 columns.
    let (m, k, n) = (1536, 384, 1024);
    let mut w = gen::uniform_random(m, k, 0.3, 7);
    let x = gen::dense_matrix(k, n, 8);
    let dy = gen::dense_matrix(m, n, 9);
    let gpu = Gpu::new(0)?;
    let mut w_dev = DeviceCsr::upload(&gpu, w.view())?;
    let x_dev = DeviceDense::upload(&gpu, k, n, &x)?;
    let dy_dev = DeviceDense::upload(&gpu, m, n, &dy)?;
    let mut y_dev = DeviceDense::<f32>::zeros(&gpu, m, n)?;
    let mut dx_dev = DeviceDense::<f32>::zeros(&gpu, k, n)?;
    for step in 0..3 {
        if step > 0 {
            // A stand-in for an optimizer's update: every stored value moves, no entry appears or leaves.
            let noise = gen::dense_matrix(1, w.nnz(), 100 + step);
            w.data_mut().iter_mut().zip(noise).for_each(|(v, d)| *v = 0.9 * *v + 0.1 * d);
            // W^T's values follow, on the device.
            w_dev.set_values(&gpu, w.data())?;
        }
        let forward = spmm_auto(&gpu, &w_dev, &x_dev, &mut y_dev)?;
        let backward = spmm_auto(&gpu, w_dev.transposed(&gpu)?, &dy_dev, &mut dx_dev)?;
        let dx = dx_dev.download(&gpu)?;
        // One element of dX on the CPU, from this step's values: column 11 of W times column 17 of dY.
        let (i, j) = (11, 17);
        let sum: f64 = w.iter().filter(|&(_, (_, c))| c == i).map(|(&v, (r, _))| v as f64 * dy[r * n + j] as f64).sum();
        println!("step {step}: Y by {forward}, dX by {backward}; dX[{i}][{j}] = {} (CPU: {sum:.4})", dx[i * n + j]);
    }
    Ok(())
}
