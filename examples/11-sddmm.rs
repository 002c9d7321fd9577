//! 11: a pruned layer's three products in one training step, all on the device: Y = W X (forward), dX = W^T dY (the
//! input's gradient, W^T kept with W), and dW = (dY X^T) o spy(W) (the weight's gradient, an SDDMM into a matrix with
//! W's structure); then plain SGD's step W -= lr dW as one more SDDMM into W itself (`sddmm_auto_with`, alpha = -lr and
//! beta = 1), which writes W's values in place as `DeviceCsr::update_values` does. One gradient entry is checked on the
//! CPU. `cargo run --release --example 11-sddmm`

use tilesparse::{gen, sddmm_auto, sddmm_auto_with, spmm_auto, DeviceCsr, DeviceDense, Gpu};

fn main() -> tilesparse::Result<()> {
    // A 1536 x 384 weight pruned to 10% of its entries, a batch of 256 columns.
    let (m, k, n, lr) = (1536, 384, 256, 0.01f32);
    let w = gen::uniform_random(m, k, 0.1, 7);
    let x = gen::dense_matrix(k, n, 8);
    let dy = gen::dense_matrix(m, n, 9);
    let gpu = Gpu::new(0)?;
    let mut w_dev = DeviceCsr::upload(&gpu, w.view())?;
    let mut dw_dev = DeviceCsr::upload(&gpu, w.view())?; // W's structure; its values become dW's
    let x_dev = DeviceDense::upload(&gpu, k, n, &x)?;
    let dy_dev = DeviceDense::upload(&gpu, m, n, &dy)?;
    let mut y_dev = DeviceDense::<f32>::zeros(&gpu, m, n)?;
    let mut dx_dev = DeviceDense::<f32>::zeros(&gpu, k, n)?;
    let forward = spmm_auto(&gpu, &w_dev, &x_dev, &mut y_dev)?;
    let backward = spmm_auto(&gpu, w_dev.transposed(&gpu)?, &dy_dev, &mut dx_dev)?;
    // dW[i][j] = dY[i, :] . X[j, :] at W's entries: A = dY (m x n) and B = X (k x n), both row-major.
    let gradient = sddmm_auto(&gpu, &dy_dev, &x_dev, &mut dw_dev)?;
    // The step, in place: W = -lr (dY X^T) o spy(W) + 1 W, which also reaches W^T and W's tensor-core blocks.
    sddmm_auto_with(&gpu, &dy_dev, &x_dev, &mut w_dev, -lr, 1.0)?;
    let (dw, w_new) = (dw_dev.download(&gpu)?, w_dev.download(&gpu)?);
    // One entry on the CPU: the first stored entry of row 11.
    let (i, e) = (11, w.indptr().outer_inds_sz(11).start);
    let j = w.indices()[e];
    let want: f64 = (0..n).map(|t| dy[i * n + t] as f64 * x[j * n + t] as f64).sum();
    println!("Y by {forward}, dX by {backward}, dW by {}", gradient.kernel_name());
    println!("dW[{i}][{j}] = {} (CPU: {want:.5}); W[{i}][{j}]: {} -> {}", dw.data()[e], w.data()[e], w_new.data()[e]);
    Ok(())
}
