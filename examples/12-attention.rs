//! 12: sparse attention on the device, forward and backward, with a mask of a local window and global tokens:
//! S = (Q K^T) / sqrt(d) at the mask's entries (an SDDMM), P = softmax(S) row by row (`softmax`), O = P V (an SpMM);
//! then from dO: dP = (dO V^T) at the mask (an SDDMM), dS = P o (dP - rowsum(P o dP)) (`softmax_backward`),
//! dQ = dS K / sqrt(d), dK = dS^T Q / sqrt(d) and dV = P^T dO (SpMMs, the transposes kept with P and dS). One row of O
//! is checked on the CPU. `cargo run --release --example 12-attention`

use tilesparse::suite_softmax::local_global_mask;
use tilesparse::{
    gen, sddmm_planned, softmax, softmax_backward, spmm_auto, spmm_auto_with, DeviceCsr, DeviceDense, Gpu, SddmmPlan,
    SpmmEpilogue,
};

fn main() -> tilesparse::Result<()> {
    // A sequence of 8192 tokens, head dimension 64: each attends to 128 neighbours and 16 global tokens.
    let (s, d) = (8192, 64);
    let mask = local_global_mask(s, 128, 16);
    let scale = 1.0 / (d as f32).sqrt();
    let [q, k, v, d_o] = [1, 2, 3, 4].map(|seed| gen::dense_matrix(s, d, seed));
    let gpu = Gpu::new(0)?;
    let up = |x: &[f32]| DeviceDense::upload(&gpu, s, d, x);
    let (q_dev, k_dev, v_dev, do_dev) = (up(&q)?, up(&k)?, up(&v)?, up(&d_o)?);

    // Forward. The mask's 64 x 64 tiles are well filled, so its SDDMM plan computes them on the tensor cores.
    let mut p = DeviceCsr::upload(&gpu, mask.view())?;
    let plan = SddmmPlan::new(&gpu, &p, d)?;
    sddmm_planned(&gpu, &q_dev, &k_dev, &mut p, &plan, scale, 0.0)?;
    let softmax_config = softmax(&gpu, &mut p)?;
    let mut o = DeviceDense::<f32>::zeros(&gpu, s, d)?;
    spmm_auto(&gpu, &p, &v_dev, &mut o)?;

    // Backward.
    let mut ds = DeviceCsr::upload(&gpu, mask.view())?;
    let ds_plan = SddmmPlan::new(&gpu, &ds, d)?;
    sddmm_planned(&gpu, &do_dev, &v_dev, &mut ds, &ds_plan, 1.0, 0.0)?;
    softmax_backward(&gpu, &p, &mut ds)?;
    let (mut dq, mut dk, mut dv) = (
        DeviceDense::<f32>::zeros(&gpu, s, d)?,
        DeviceDense::<f32>::zeros(&gpu, s, d)?,
        DeviceDense::zeros(&gpu, s, d)?,
    );
    spmm_auto_with(&gpu, &ds, &k_dev, &mut dq, SpmmEpilogue::scaled(scale, 0.0))?;
    spmm_auto_with(&gpu, ds.transposed(&gpu)?, &q_dev, &mut dk, SpmmEpilogue::scaled(scale, 0.0))?;
    spmm_auto(&gpu, p.transposed(&gpu)?, &do_dev, &mut dv)?;

    // Row 1000 of O on the CPU, in f64.
    let i = 1000;
    let cols = &mask.indices()[mask.indptr().outer_inds_sz(i)];
    let dot = |x: &[f32], j: usize, y: &[f32]| (0..d).map(|t| x[i * d + t] as f64 * y[j * d + t] as f64).sum::<f64>();
    let scores: Vec<f64> = cols.iter().map(|&j| scale as f64 * dot(&q, j, &k)).collect();
    let max = scores.iter().fold(f64::NEG_INFINITY, |m, &x| m.max(x));
    let sum: f64 = scores.iter().map(|x| (x - max).exp()).sum();
    let want: f64 = cols.iter().zip(&scores).map(|(&j, x)| (x - max).exp() / sum * v[j * d] as f64).sum();
    let got = o.download(&gpu)?[i * d];
    println!("{} entries in the mask; SDDMM {}; softmax {softmax_config:?}", mask.nnz(), plan.kernel_name());
    println!("O[{i}][0] = {got:.6} (CPU: {want:.6}); dQ, dK, dV: {} values each", dq.download(&gpu)?.len());
    let _ = (dk.download(&gpu)?, dv.download(&gpu)?);
    Ok(())
}
