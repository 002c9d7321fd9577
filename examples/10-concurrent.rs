//! 10: independent products side by side (`spmm_concurrent`): a layer's query, key and value projections, three
//! pruned weights over one activation X at a small batch. Each alone fills a few of the device's SMs for a few
//! microseconds; side by side, on side streams the call forks and joins, they overlap. Recorded once
//! (`Gpu::record`), the three become parallel branches of one graph, replayed for each batch.
//! `cargo run --release --example 10-concurrent`

use tilesparse::{gen, spmm_concurrent, DeviceCsr, DeviceDense, Gpu, SpmmJob};

fn main() -> tilesparse::Result<()> {
    let (features, batch) = (768, 16);
    let weights: Vec<_> = (0..3).map(|i| gen::uniform_random(features, features, 0.1, i)).collect();
    let gpu = Gpu::new(0)?;
    let w_dev = weights.iter().map(|w| DeviceCsr::upload(&gpu, w.view())).collect::<tilesparse::Result<Vec<_>>>()?;
    let mut x_dev = DeviceDense::<f32>::zeros(&gpu, features, batch)?;
    let mut qkv =
        (0..3).map(|_| DeviceDense::<f32>::zeros(&gpu, features, batch)).collect::<tilesparse::Result<Vec<_>>>()?;
    let step = |g: &Gpu, x: &DeviceDense<f32>, qkv: &mut [DeviceDense<f32>]| {
        let mut jobs: Vec<SpmmJob<f32>> =
            w_dev.iter().zip(qkv.iter_mut()).map(|(w, c)| SpmmJob::new(w, x, c)).collect();
        spmm_concurrent(g, &mut jobs)
    };
    // The first call builds what the products keep (and the side streams); then the step is recorded.
    step(&gpu, &x_dev, &mut qkv)?;
    let (recording, kernels) = gpu.record(|g| step(g, &x_dev, &mut qkv))?;
    println!("kernels: {}", kernels.iter().map(|k| k.to_string()).collect::<Vec<_>>().join(", "));
    for round in 0..3 {
        let x = gen::dense_matrix(features, batch, 10 + round);
        x_dev.overwrite(&gpu, &x)?;
        // SAFETY: the weights, X and the three outputs outlive the recording, at the addresses it was made with.
        unsafe { recording.replay(&gpu)? };
        let (r, t) = (5, 2);
        for (name, (w, c)) in ["Q", "K", "V"].iter().zip(weights.iter().zip(&qkv)) {
            let got = c.download(&gpu)?[r * batch + t];
            let cpu: f64 = w.outer_view(r).unwrap().iter().map(|(j, &v)| v as f64 * x[j * batch + t] as f64).sum();
            println!("batch {round}: {name}[{r}][{t}] = {got} (CPU: {cpu:.4})");
        }
    }
    Ok(())
}
