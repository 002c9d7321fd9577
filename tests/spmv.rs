//! The seed SpMV on the GPU against the f64 oracle.

mod common;

use common::{gpu_or_skip, POISON};
use sprs::CsMat;
use tilesparse::cpu::oracle;
use tilesparse::spmv::SeedSpmvWorkspace;
use tilesparse::{gen, spmv_seed, DeviceCsr, Gpu};

/// Runs the seed kernel and checks it. The seed sums a row as differences of block prefix sums, so its
/// error is bounded by the absolute sums of the blocks the row touches, not of the row alone:
/// |err| <= (2 * 32 + 2) u * max block |products| * (number of blocks the row spans + 2), times |alpha|, plus
/// the rounding of beta * y (only when beta != 0: y is not read then and may hold NaN).
fn check(gpu: &Gpu, what: &str, a: &CsMat<f32>, alpha: f32, beta: f32, y_in: &[f32]) {
    let (m, k) = (a.rows(), a.cols());
    let x = gen::dense_matrix(k, 1, 99);
    let a_dev = DeviceCsr::upload(gpu, a.view()).unwrap();
    let x_dev = gpu.stream().clone_htod(&x).unwrap();
    let mut y_dev = gpu.stream().clone_htod(y_in).unwrap();
    let mut ws = SeedSpmvWorkspace::new(gpu, a.nnz()).unwrap();
    spmv_seed(gpu, &a_dev, &x_dev, alpha, beta, &mut y_dev, &mut ws).unwrap();
    let y = gpu.stream().clone_dtoh(&y_dev).unwrap();
    let want = oracle::spmv(a.view(), &x, alpha as f64, Some(y_in), beta as f64);
    let products: Vec<f64> = a.data().iter().zip(a.indices()).map(|(v, &j)| (*v as f64 * x[j] as f64).abs()).collect();
    let block_abs: Vec<f64> = products.chunks(32).map(|c| c.iter().sum()).collect();
    let u = f32::EPSILON as f64 / 2.0;
    let indptr = a.indptr().to_proper().to_vec();
    let bound: Vec<f64> = (0..m)
        .map(|i| {
            let (r0, r1) = (indptr[i], indptr[i + 1]);
            let blocks = if r1 > r0 { (r0 / 32)..((r1 - 1) / 32 + 1) } else { 0..0 };
            let mag: f64 = blocks.clone().map(|b| block_abs[b]).sum();
            let nb = blocks.count() as f64;
            66.0 * u * mag * (nb + 2.0) * alpha.abs() as f64
                + if beta == 0.0 { 0.0 } else { 4.0 * u * (beta as f64 * y_in[i] as f64).abs() }
                + 1e-30
        })
        .collect();
    let got: Vec<f64> = y.iter().map(|v| *v as f64).collect();
    let cmp = oracle::compare(&got, &want, &bound);
    assert_eq!(cmp.mismatches, 0, "{what}: first mismatch (index, got, want) {:?}", cmp.first_mismatch);
}

#[test]
fn seed_spmv_matches_the_oracle() {
    let Some(gpu) = gpu_or_skip("seed_spmv_matches_the_oracle") else { return };
    let cases: Vec<(&str, CsMat<f32>)> = vec![
        ("uniform 1000x800", gen::uniform_random(1000, 800, 0.02, 1)),
        ("power-law 5000x5000", gen::power_law(5000, 5000, 12.0, 1.5, 2)),
        ("empty rows", gen::with_empty_rows(&gen::uniform_random(300, 300, 0.05, 3), 0.5, 4)),
        ("one very long row", gen::with_dense_row(&gen::uniform_random(200, 20000, 0.0005, 5), 100)),
        ("rectangular 50x3000", gen::uniform_random(50, 3000, 0.01, 6)),
        ("nnz = 0", CsMat::zero((17, 9))),
        ("m = 1", gen::uniform_random(1, 100, 0.3, 7)),
    ];
    for (what, a) in &cases {
        let m = a.rows();
        let y_in: Vec<f32> = gen::dense_matrix(m, 1, 5);
        for (alpha, beta) in [(1.0f32, 0.0f32), (2.5, 0.0), (1.0, 1.0), (-0.5, 2.0), (0.0, 1.0)] {
            check(&gpu, &format!("{what}, alpha {alpha}, beta {beta}"), a, alpha, beta, &y_in);
        }
    }
}

#[test]
fn seed_spmv_with_beta_zero_does_not_read_y() {
    let Some(gpu) = gpu_or_skip("seed_spmv_with_beta_zero_does_not_read_y") else { return };
    let a = gen::uniform_random(500, 500, 0.03, 8);
    let y_nan = vec![f32::NAN; 500];
    check(&gpu, "beta = 0 with NaN in y", &a, 1.5, 0.0, &y_nan);
    // And every element is written: poison, then beta = 0.
    let y_poison = vec![POISON as f32; 500];
    check(&gpu, "beta = 0 over poison", &a, 1.0, 0.0, &y_poison);
}

#[test]
fn seed_spmv_on_real_matrices() {
    let Some(gpu) = gpu_or_skip("seed_spmv_on_real_matrices") else { return };
    for file in ["pores_1.mtx.gz", "lund_a.mtx.gz", "utm300.mtx.gz", "west0479.mtx.gz", "well1850.mtx.gz"] {
        let path = common::data_path(file);
        let a = tilesparse::suite::load_matrix(&path).unwrap();
        let y_in = gen::dense_matrix(a.rows(), 1, 3);
        check(&gpu, file, &a, 1.0, 0.5, &y_in);
    }
}

/// Small enough for compute-sanitizer in run-all.sh --sanitize.
#[test]
fn sanitizer_spmv_seed_small() {
    let Some(gpu) = gpu_or_skip("sanitizer_spmv_seed_small") else { return };
    let a = gen::power_law(300, 200, 9.0, 1.5, 9);
    check(&gpu, "sanitizer", &a, 1.0, 1.0, &gen::dense_matrix(300, 1, 1));
}
