//! 08: a pruned linear layer over row-major activations, as a framework stores them: Y = X W^T, with X (tokens x in)
//! and Y (tokens x out) row-major and W (out x in) sparse. That is C = W X^T held as C^T: B = X and C = Y, both
//! column-major to the SpMM (`spmm_layouts` with `DenseLayouts::COL_MAJOR`), so neither is rearranged by hand. The
//! backward product for X, dX = dY W (dX^T = W^T dY^T), is the same call on W's transpose (`DeviceCsr::transposed`).
//! `cargo run --release --example 08-layouts`

use tilesparse::{gen, spmm_layouts, DenseLayouts, DeviceCsr, DeviceDense, Gpu, SpmmEpilogue};

fn main() -> tilesparse::Result<()> {
    // A 1536 x 384 weight pruned to 30% of its entries, 1024 tokens.
    let (out_features, in_features, tokens) = (1536, 384, 1024);
    let w = gen::uniform_random(out_features, in_features, 0.3, 7);
    let x = gen::dense_matrix(tokens, in_features, 8);
    let dy = gen::dense_matrix(tokens, out_features, 9);
    let gpu = Gpu::new(0)?;
    let w_dev = DeviceCsr::upload(&gpu, w.view())?;
    // Row-major tokens x features: each is the column-major features x tokens operand of the SpMM.
    let x_dev = DeviceDense::upload(&gpu, tokens, in_features, &x)?;
    let dy_dev = DeviceDense::upload(&gpu, tokens, out_features, &dy)?;
    let mut y_dev = DeviceDense::<f32>::zeros(&gpu, tokens, out_features)?;
    let mut dx_dev = DeviceDense::<f32>::zeros(&gpu, tokens, in_features)?;
    let layouts = DenseLayouts::COL_MAJOR;
    let forward = spmm_layouts(&gpu, &w_dev, &x_dev, &mut y_dev, layouts, None, SpmmEpilogue::default())?;
    let backward =
        spmm_layouts(&gpu, w_dev.transposed(&gpu)?, &dy_dev, &mut dx_dev, layouts, None, SpmmEpilogue::default())?;
    let (y, dx) = (y_dev.download(&gpu)?, dx_dev.download(&gpu)?);
    // One element of each on the CPU: Y[t][o] = sum_i X[t][i] W[o][i], dX[t][i] = sum_o dY[t][o] W[o][i].
    let (t, o, i) = (17, 11, 5);
    let y_cpu: f64 = w.outer_view(o).unwrap().iter().map(|(c, &v)| v as f64 * x[t * in_features + c] as f64).sum();
    let dx_cpu: f64 =
        w.iter().filter(|&(_, (_, c))| c == i).map(|(&v, (r, _))| v as f64 * dy[t * out_features + r] as f64).sum();
    println!("Y = X W^T by {forward}: Y[{t}][{o}] = {} (CPU: {y_cpu:.4})", y[t * out_features + o]);
    println!("dX = dY W by {backward}: dX[{t}][{i}] = {} (CPU: {dx_cpu:.4})", dx[t * in_features + i]);
    Ok(())
}
