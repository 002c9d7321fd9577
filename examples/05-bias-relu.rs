//! 05: a pruned layer, C = ReLU(W * X + bias), in f16 with the automatic kernel choice (`spmm_bias_relu_auto`): the
//! bias and the ReLU are fused into whichever kernel runs, tile or tensor cores, applied to each element's f32 sum
//! before its one rounding to f16.
//! `cargo run --release --example 05-bias-relu`

use half::f16;
use tilesparse::{gen, spmm_bias_relu_auto, DeviceCsr, DeviceDense, Gpu};

fn main() -> tilesparse::Result<()> {
    // A 1536 x 384 weight pruned to 30% of its entries, times a batch of 1024 columns.
    let (m, k, n) = (1536, 384, 1024);
    let w: sprs::CsMat<f16> = gen::convert(&gen::uniform_random(m, k, 0.3, 7));
    let x: Vec<f16> = gen::dense_matrix(k, n, 8).into_iter().map(f16::from_f32).collect();
    let bias: Vec<f32> = gen::dense_matrix(m, 1, 9);
    let gpu = Gpu::new(0)?;
    let w_dev = DeviceCsr::upload(&gpu, w.view())?;
    let x_dev = DeviceDense::upload(&gpu, k, n, &x)?;
    let bias_dev = gpu
        .stream()
        .clone_htod(&bias)
        .map_err(|e| tilesparse::Error::Driver { what: "uploading the bias", source: e })?;
    let mut c_dev = DeviceDense::<f16>::zeros(&gpu, m, n)?;
    let kernel = spmm_bias_relu_auto(&gpu, &w_dev, &x_dev, &bias_dev, &mut c_dev)?;
    let c = c_dev.download(&gpu)?;
    // One element on the CPU: the row's products summed in f64, the bias added, the ReLU.
    let (i, j) = (5, 17);
    let row = w.outer_view(i).expect("row 5");
    let sum: f64 = row.iter().map(|(p, v)| v.to_f64() * x[p * n + j].to_f64()).sum::<f64>() + bias[i] as f64;
    let zeros = c.iter().filter(|v| v.to_f32() == 0.0).count();
    println!(
        "{kernel}: C[{i}][{j}] = {} (CPU: {}); the ReLU cleared {zeros} of {} elements",
        c[i * n + j],
        sum.max(0.0),
        c.len()
    );
    Ok(())
}
