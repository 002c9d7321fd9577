//! 09: a sparse network's step recorded once and replayed for each batch (`Gpu::record`, a CUDA graph). Two pruned
//! layers, H = ReLU(W1 X + b1) and Y = W2 H, at a small batch, where issuing each product costs the host about as
//! much as the device's work. Each batch is written into the same X (`DeviceDense::overwrite`), the recording is
//! replayed, and Y read back. Run each product once before recording it: its first run builds what it keeps.
//! `cargo run --release --example 09-record`

use tilesparse::spmm::upload_bias;
use tilesparse::{gen, spmm_auto_with, DeviceCsr, DeviceDense, Gpu, SpmmEpilogue};

fn main() -> tilesparse::Result<()> {
    let (inputs, hidden, outputs, batch) = (1024, 4096, 1024, 16);
    let w1 = gen::uniform_random(hidden, inputs, 0.1, 1);
    let w2 = gen::uniform_random(outputs, hidden, 0.1, 2);
    let b1 = gen::dense_matrix(hidden, 1, 3);
    let gpu = Gpu::new(0)?;
    let (w1_dev, w2_dev, b1_dev) =
        (DeviceCsr::upload(&gpu, w1.view())?, DeviceCsr::upload(&gpu, w2.view())?, upload_bias(&gpu, &b1)?);
    let mut x_dev = DeviceDense::<f32>::zeros(&gpu, inputs, batch)?;
    let mut h_dev = DeviceDense::<f32>::zeros(&gpu, hidden, batch)?;
    let mut y_dev = DeviceDense::<f32>::zeros(&gpu, outputs, batch)?;
    let step = |g: &Gpu, x: &DeviceDense<f32>, h: &mut DeviceDense<f32>, y: &mut DeviceDense<f32>| {
        spmm_auto_with(g, &w1_dev, x, h, SpmmEpilogue::bias_relu(&b1_dev))?;
        spmm_auto_with(g, &w2_dev, h, y, SpmmEpilogue::default())
    };
    step(&gpu, &x_dev, &mut h_dev, &mut y_dev)?;
    let (recording, kernel) = gpu.record(|g| step(g, &x_dev, &mut h_dev, &mut y_dev))?;
    let mut y = vec![0f32; outputs * batch];
    for round in 0..3 {
        let x = gen::dense_matrix(inputs, batch, 10 + round);
        x_dev.overwrite(&gpu, &x)?;
        // SAFETY: the weights, the bias, X, H and Y outlive the recording, at the addresses it was made with.
        unsafe { recording.replay(&gpu)? };
        y_dev.download_into(&gpu, &mut y)?;
        // Y[o][t] on the CPU, in f64.
        let (o, t) = (7, 3);
        let h = |r: usize| {
            let s: f64 = w1.outer_view(r).unwrap().iter().map(|(c, &v)| v as f64 * x[c * batch + t] as f64).sum();
            (s + b1[r] as f64).max(0.0)
        };
        let y_cpu: f64 = w2.outer_view(o).unwrap().iter().map(|(r, &v)| v as f64 * h(r)).sum();
        println!("batch {round}: Y[{o}][{t}] = {} (CPU: {y_cpu:.4}; last product by {kernel})", y[o * batch + t]);
    }
    Ok(())
}
