//! The sparse softmax and its gradient: every compiled config against the f64 oracle on awkward shapes (rows that
//! stream past the registers, rows left to the chunk kernels), NaN, Inf and masked (-inf) entries, the same bits on
//! every run, the typed errors, the new values reaching the kept transpose, a recorded replay, the CPU backend, and
//! sparse attention forward and backward (SDDMM, softmax, SpMM) against dense attention computed on the CPU.

mod common;

use common::{gpu_or_skip, seed, seed_note};
use half::{bf16, f16};
use sprs::CsMat;
use tilesparse::cpu::{backend, oracle, oracle::SoftmaxReference};
use tilesparse::{
    gen, sddmm_with, softmax, softmax_backward, softmax_backward_with, softmax_with, spmm_auto, spmm_auto_with, DType,
    DeviceCsr, DeviceDense, Error, Gpu, Scalar, SoftmaxConfig, SpmmEpilogue,
};

/// The shapes every config runs on: (name, structure with values uniform in [-8, 8), so that the rows' exponentials
/// spread over many binades). Holes and a dense row of 3000 (streamed past the registers, and long), one row, one
/// column, no entry, rows of 300, power-law rows, and a row of more than 32 chunks of the chunk kernels.
fn patterns() -> Vec<(&'static str, CsMat<f32>)> {
    let holes =
        gen::with_dense_row(&gen::with_empty_rows(&gen::uniform_random(300, 3000, 0.02, seed(1)), 0.3, seed(2)), 7);
    let spread = |a: CsMat<f32>| a.map(|v| 8.0 * v);
    vec![
        ("7 x 40 at 50%", spread(gen::uniform_random(7, 40, 0.5, seed(3)))),
        ("holes and a dense row", spread(holes)),
        ("m = 1", spread(gen::uniform_random(1, 5000, 0.3, seed(4)))),
        ("n = 1", spread(gen::uniform_random(400, 1, 0.5, seed(5)))),
        ("nnz = 0", CsMat::zero((50, 60))),
        ("rows of 300", spread(gen::uniform_random(97, 600, 0.5, seed(6)))),
        ("power law", spread(gen::power_law(1200, 4000, 12.0, 1.2, seed(7)))),
        ("a row of 140000 (35 chunks)", spread(gen::uniform_random(1, 140_000, 1.0, seed(8)))),
    ]
}

/// The long-row settings every lane count runs with: none, rows past 40 entries, and every non-empty row.
const LONG: [Option<usize>; 3] = [None, Some(40), Some(0)];

fn assert_matches<T: Scalar>(what: &str, reference: &SoftmaxReference, got: &[T]) {
    let cmp = reference.compare(got);
    assert_eq!(
        cmp.mismatches,
        0,
        "{what}: {} of {} entries mismatch; first (index, got, want) = {:?} ({})",
        cmp.mismatches,
        got.len(),
        cmp.first_mismatch,
        seed_note()
    );
}

/// The values of `c` after `run`, set to `values` first (the kernels write in place: an entry left unwritten keeps
/// its input, which the oracle tells apart).
fn values_after<T: Scalar>(
    gpu: &Gpu,
    c: &mut DeviceCsr<T>,
    values: &[T],
    run: impl FnOnce(&mut DeviceCsr<T>) -> tilesparse::Result<()>,
) -> tilesparse::Result<Vec<T>> {
    c.set_values(gpu, values).unwrap();
    run(c)?;
    Ok(c.download(gpu).unwrap().data().to_vec())
}

/// Every config and the automatic ones on scores `a`, forward, and backward with P = `prob` and dP = `dp` (`prob`'s
/// structure), against the oracle; with `twice`, each config again for the same bits. Returns the runs checked.
fn check_every_config<T: Scalar>(gpu: &Gpu, name: &str, a: &CsMat<T>, prob: &CsMat<T>, dp: &[T], twice: bool) -> usize {
    let (forward, backward) = (SoftmaxReference::new(a.view()), SoftmaxReference::backward(prob.view(), dp));
    let mut c = DeviceCsr::upload(gpu, a.view()).unwrap();
    let p_dev = DeviceCsr::upload(gpu, prob.view()).unwrap();
    let mut dp_dev = DeviceCsr::upload(gpu, prob.view()).unwrap();
    let bits = |v: &[T]| v.iter().map(|x| x.to_f64().to_bits()).collect::<Vec<_>>();
    let mut runs = 0;
    for lanes_per_row in SoftmaxConfig::LANES {
        for long_rows_from in LONG {
            let config = SoftmaxConfig { dtype: T::DTYPE, lanes_per_row, long_rows_from };
            let what = format!("{} long from {long_rows_from:?}, {name}", config.kernel_name(false));
            let got = values_after(gpu, &mut c, a.data(), |c| softmax_with(gpu, c, &config)).unwrap();
            assert_matches(&what, &forward, &got);
            if twice {
                let again = values_after(gpu, &mut c, a.data(), |c| softmax_with(gpu, c, &config)).unwrap();
                assert_eq!(bits(&got), bits(&again), "{what}: another run, other bits");
            }
            let what = format!("{} long from {long_rows_from:?}, {name}", config.kernel_name(true));
            let got = values_after(gpu, &mut dp_dev, dp, |g| softmax_backward_with(gpu, &p_dev, g, &config)).unwrap();
            assert_matches(&what, &backward, &got);
            runs += 2;
        }
    }
    let got = values_after(gpu, &mut c, a.data(), |c| softmax(gpu, c).map(drop)).unwrap();
    assert_matches(&format!("softmax (automatic) {name}"), &forward, &got);
    let got = values_after(gpu, &mut dp_dev, dp, |g| softmax_backward(gpu, &p_dev, g).map(drop)).unwrap();
    assert_matches(&format!("softmax_backward (automatic) {name}"), &backward, &got);
    runs
}

/// Every config of one type, forward and backward, on every shape: against the oracle, and the same bits twice.
fn every_config_of<T: Scalar>(gpu: &Gpu) -> usize {
    let mut runs = 0;
    for (name, pattern) in patterns() {
        let a: CsMat<T> = gen::convert(&pattern);
        // The backward's P: the forward's output as T (any P would do); dP uniform in [-1, 1).
        let p_values: Vec<T> = oracle::softmax(a.view()).iter().map(|&v| T::from_f64(v)).collect();
        let prob = CsMat::new(a.shape(), a.indptr().raw_storage().to_vec(), a.indices().to_vec(), p_values);
        let dp: Vec<T> = gen::dense_matrix(a.nnz(), 1, seed(8)).into_iter().map(T::from_f32).collect();
        runs += check_every_config(gpu, name, &a, &prob, &dp, true);
    }
    runs
}

/// Every compiled config of every type, forward and backward, on every shape, against the f64 oracle; each run twice
/// for the same bits.
#[test]
fn sanitizer_every_softmax_config_matches_the_oracle() {
    let Some(gpu) = gpu_or_skip("sanitizer_every_softmax_config_matches_the_oracle") else { return };
    let runs = every_config_of::<f32>(&gpu) + every_config_of::<f16>(&gpu) + every_config_of::<bf16>(&gpu);
    eprintln!("softmax: {runs} config runs matched the oracle");
}

/// Rows with a NaN, a +inf, only -inf, -inf beside finite entries, and one entry; in the backward a NaN in dP.
fn specials<T: Scalar>() -> (CsMat<T>, Vec<T>) {
    let rows: Vec<Vec<f32>> = vec![
        vec![1.0, f32::NAN, -2.0, 0.5],
        vec![3.0, f32::INFINITY, 1.0],
        vec![f32::NEG_INFINITY, f32::NEG_INFINITY],
        vec![f32::NEG_INFINITY, 2.0, f32::NEG_INFINITY, -1.0, 0.0],
        vec![-7.0],
        vec![],
        (0..700).map(|i| if i == 650 { f32::NAN } else { (i % 13) as f32 - 6.0 }).collect(),
        (0..700).map(|i| if i % 3 == 0 { f32::NEG_INFINITY } else { (i % 11) as f32 }).collect(),
        vec![0.25; 33],
    ];
    let mut indptr = vec![0];
    let (mut indices, mut values) = (Vec::new(), Vec::new());
    for row in &rows {
        indices.extend(0..row.len());
        values.extend(row.iter().map(|&v| T::from_f32(v)));
        indptr.push(indices.len());
    }
    let mut dp: Vec<T> = gen::dense_matrix(values.len(), 1, seed(9)).into_iter().map(T::from_f32).collect();
    dp[indptr[4]] = T::from_f32(f32::NAN); // the row of 5, whose P is finite
    (CsMat::new((rows.len(), 700), indptr, indices, values), dp)
}

fn specials_of<T: Scalar>(gpu: &Gpu) {
    let (a, dp) = specials::<T>();
    let forward = SoftmaxReference::new(a.view());
    let want = forward.want();
    let row = |i: usize| &want[a.indptr().outer_inds_sz(i)];
    assert!(row(0).iter().all(|v| v.is_nan()) && row(1).iter().all(|v| v.is_nan()));
    assert!(row(2).iter().all(|v| v.is_nan()) && row(3)[0] == 0.0 && row(3)[1] > 0.0 && row(4)[0] == 1.0);
    // P with NaN and Inf in it: the gradient of those rows is NaN.
    check_every_config(gpu, "specials", &a, &a, &dp, false);
}

/// NaN, +inf and -inf behave as in the dense softmax, in every config and type.
#[test]
fn softmax_nan_inf_and_masked_entries() {
    let Some(gpu) = gpu_or_skip("softmax_nan_inf_and_masked_entries") else { return };
    specials_of::<f32>(&gpu);
    specials_of::<f16>(&gpu);
    specials_of::<bf16>(&gpu);
}

/// Every bad input is a typed error before anything is written.
#[test]
fn softmax_refuses_bad_input() {
    let Some(gpu) = gpu_or_skip("softmax_refuses_bad_input") else { return };
    let a = gen::uniform_random(60, 50, 0.2, seed(20));
    let mut c = DeviceCsr::upload(&gpu, a.view()).unwrap();
    let kept = |c: &DeviceCsr<f32>| c.download(&gpu).unwrap().data() == a.data();
    let stats = tilesparse::RowStats::of_csr(&a.indptr().to_proper(), a.indices());
    let config = SoftmaxConfig::select(a.rows(), &stats, DType::F32);
    let invalid = |r: tilesparse::Result<()>| matches!(r, Err(Error::InvalidConfig { .. }));
    assert!(invalid(softmax_with(&gpu, &mut c, &SoftmaxConfig { lanes_per_row: 3, ..config })));
    assert!(invalid(softmax_with(&gpu, &mut c, &SoftmaxConfig { lanes_per_row: 64, ..config })));
    assert!(invalid(softmax_with(&gpu, &mut c, &SoftmaxConfig { dtype: DType::Bf16, ..config })));
    // f64 has no softmax kernel.
    let mut c64 = DeviceCsr::upload(&gpu, gen::convert::<f64>(&a).view()).unwrap();
    assert!(matches!(softmax(&gpu, &mut c64), Err(Error::UnsupportedDtype { .. })));
    // Another handle's matrix.
    let other = Gpu::new(0).unwrap();
    let mut c_other = DeviceCsr::upload(&other, a.view()).unwrap();
    assert!(matches!(softmax(&gpu, &mut c_other), Err(Error::WrongGpu(_))));
    // The backward: P and dP of another shape, another count, or the same count in other places.
    let p = DeviceCsr::upload(&gpu, a.view()).unwrap();
    let mut wide = DeviceCsr::upload(&gpu, gen::uniform_random(60, 51, 0.2, seed(20)).view()).unwrap();
    assert!(matches!(softmax_backward(&gpu, &p, &mut wide), Err(Error::ShapeMismatch(_))));
    let moved = {
        // The same rows and counts, the last entry moved to another column.
        let mut indices = a.indices().to_vec();
        let last = indices.len() - 1;
        let row_start = a.indptr().outer_inds_sz(59).start;
        let free = (0..50).rev().find(|j| !a.indices()[row_start..].contains(j)).unwrap();
        indices[last] = free;
        let mut triplets: Vec<(usize, f32)> =
            indices[row_start..].iter().copied().zip(a.data()[row_start..].iter().copied()).collect();
        triplets.sort_by_key(|t| t.0);
        for (i, (j, _)) in triplets.iter().enumerate() {
            indices[row_start + i] = *j;
        }
        CsMat::new(a.shape(), a.indptr().raw_storage().to_vec(), indices, a.data().to_vec())
    };
    let mut dp_moved = DeviceCsr::upload(&gpu, moved.view()).unwrap();
    assert!(matches!(softmax_backward(&gpu, &p, &mut dp_moved), Err(Error::PatternMismatch(_))));
    assert!(dp_moved.download(&gpu).unwrap().data() == moved.data(), "an error wrote dP");
    let mut dp_other = DeviceCsr::upload(&other, a.view()).unwrap();
    assert!(matches!(softmax_backward(&gpu, &p, &mut dp_other), Err(Error::WrongGpu(_))));
    assert!(kept(&c), "an error wrote the matrix");
    // And the right calls run.
    softmax_with(&gpu, &mut c, &config).unwrap();
    assert!(!kept(&c));
    let mut dp = DeviceCsr::upload(&gpu, a.view()).unwrap();
    softmax_backward(&gpu, &p, &mut dp).unwrap();
}

/// The new values reach the matrix's kept transpose, bit for bit.
#[test]
fn softmax_values_reach_the_transpose() {
    let Some(gpu) = gpu_or_skip("softmax_values_reach_the_transpose") else { return };
    let a = gen::power_law(400, 300, 20.0, 1.3, seed(30)).map(|v| 4.0 * v);
    let mut c = DeviceCsr::upload(&gpu, a.view()).unwrap();
    c.transposed(&gpu).unwrap();
    softmax(&gpu, &mut c).unwrap();
    let new = c.download(&gpu).unwrap();
    assert_matches("softmax", &SoftmaxReference::new(a.view()), new.data());
    let t = c.transposed(&gpu).unwrap().download(&gpu).unwrap();
    let want = new.transpose_view().to_csr();
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(t.data()), bits(want.data()), "A^T's values after the softmax");
}

/// A softmax with long rows (a search, a list allocated on the stream) recorded once replays on new values.
#[test]
fn softmax_records_and_replays() {
    let Some(gpu) = gpu_or_skip("softmax_records_and_replays") else { return };
    let a = gen::with_dense_row(&gen::uniform_random(3000, 6000, 0.005, seed(40)), 17);
    let mut c = DeviceCsr::upload(&gpu, a.view()).unwrap();
    let config = SoftmaxConfig::select(c.rows(), c.stats(&gpu).unwrap(), DType::F32);
    assert!(config.long_rows_from.is_some(), "{config:?}: the dense row should be long");
    softmax_with(&gpu, &mut c, &config).unwrap(); // loads the kernels, which a recording cannot
    let (recording, _) = gpu.record(|g| softmax_with(g, &mut c, &config)).unwrap();
    for round in 0..3u64 {
        let values: Vec<f32> = gen::dense_matrix(a.nnz(), 1, seed(41 + round)).iter().map(|v| 6.0 * v).collect();
        c.set_values(&gpu, &values).unwrap();
        // SAFETY: the matrix outlives the replay, and nothing else uses it meanwhile.
        unsafe { recording.replay(&gpu) }.unwrap();
        let scores = CsMat::new(a.shape(), a.indptr().raw_storage().to_vec(), a.indices().to_vec(), values);
        assert_matches(
            &format!("replay {round}"),
            &SoftmaxReference::new(scores.view()),
            c.download(&gpu).unwrap().data(),
        );
    }
}

/// The CPU backend against the oracle (no GPU needed): every shape and the special values, f32, f16 and f64.
#[test]
fn cpu_backend_softmax_matches_the_oracle() {
    fn check<T: Scalar>() {
        let mut cases: Vec<(String, CsMat<T>, Vec<T>)> = patterns()
            .into_iter()
            .map(|(name, a)| {
                let dp = gen::dense_matrix(a.nnz(), 1, seed(10)).into_iter().map(T::from_f32).collect();
                (name.to_string(), gen::convert(&a), dp)
            })
            .collect();
        let (a, dp) = specials::<T>();
        cases.push(("specials".to_string(), a, dp));
        for (name, a, dp) in cases {
            let indptr = a.indptr().to_proper().to_vec();
            let mut got = a.data().to_vec();
            backend::softmax(&indptr, &mut got);
            assert_matches(&format!("CPU {} {name}", T::DTYPE), &SoftmaxReference::new(a.view()), &got);
            let mut grad = dp.clone();
            backend::softmax_backward(&indptr, a.data(), &mut grad);
            assert_matches(
                &format!("CPU backward {} {name}", T::DTYPE),
                &SoftmaxReference::backward(a.view(), &dp),
                &grad,
            );
        }
    }
    check::<f32>();
    check::<f16>();
    check::<f64>();
}

/// The oracle on rows worked by hand: softmax([0, ln 3]) = [1/4, 3/4]; a row of equal entries is uniform; the
/// gradient of [1/4, 3/4] with dP = [1, 0] is P (dP - 1/4) = [3/16, -3/16]. And its bound fails a value off by one
/// part in a thousand.
#[test]
fn softmax_oracle_on_rows_worked_by_hand() {
    let a = CsMat::new((2, 4), vec![0, 2, 5], vec![0, 3, 0, 1, 2], vec![0.0, 3f64.ln(), 2.0, 2.0, 2.0]);
    let want = oracle::softmax(a.view());
    let close = |x: f64, y: f64| (x - y).abs() < 1e-15;
    assert!(close(want[0], 0.25) && close(want[1], 0.75), "{want:?}");
    assert!(want[2..].iter().all(|&v| close(v, 1.0 / 3.0)), "{want:?}");
    let p = CsMat::new((1, 2), vec![0, 2], vec![0, 1], vec![0.25, 0.75]);
    let (grad, _) = oracle::softmax_backward(p.view(), &[1.0, 0.0]);
    assert!(close(grad[0], 3.0 / 16.0) && close(grad[1], -3.0 / 16.0), "{grad:?}");
    let af32: CsMat<f32> = gen::convert(&gen::uniform_random(50, 200, 0.3, seed(11)));
    let reference = SoftmaxReference::new(af32.view());
    let mut got: Vec<f32> = reference.want().iter().map(|&v| v as f32).collect();
    assert_eq!(reference.compare(&got).mismatches, 0);
    got[17] *= 1.001;
    assert_eq!(reference.compare(&got).mismatches, 1, "the bound let a value off by 1e-3 pass");
}

/// Dense attention with a mask, in f64 on the CPU: S = alpha Q K^T on the mask's entries, P = softmax(S) per row,
/// O = P V; dP = dO V^T, dS = P (dP - rowsum(P dP)) on the mask, dQ = alpha dS K, dK = alpha dS^T Q, dV = P^T dO.
/// Returns (O, dQ, dK, dV), each row-major.
#[allow(clippy::too_many_arguments)]
fn dense_attention(
    mask: &CsMat<f32>,
    q: &[f32],
    k: &[f32],
    v: &[f32],
    d_o: &[f32],
    d: usize,
    alpha: f64,
) -> [Vec<f64>; 4] {
    let s = mask.rows();
    let dot = |x: &[f32], y: &[f32]| x.iter().zip(y).map(|(&a, &b)| a as f64 * b as f64).sum::<f64>();
    let row = |m: &[f32], i: usize| m[i * d..(i + 1) * d].to_vec();
    let (mut o, mut dq, mut dk, mut dv) = (vec![0.0; s * d], vec![0.0; s * d], vec![0.0; s * d], vec![0.0; s * d]);
    for i in 0..s {
        let cols = &mask.indices()[mask.indptr().outer_inds_sz(i)];
        let scores: Vec<f64> = cols.iter().map(|&j| alpha * dot(&row(q, i), &row(k, j))).collect();
        let max = scores.iter().fold(f64::NEG_INFINITY, |m, &x| m.max(x));
        let sum: f64 = scores.iter().map(|x| (x - max).exp()).sum();
        let p: Vec<f64> = scores.iter().map(|x| (x - max).exp() / sum).collect();
        let dp: Vec<f64> = cols.iter().map(|&j| dot(&row(d_o, i), &row(v, j))).collect();
        let rowsum: f64 = p.iter().zip(&dp).map(|(a, b)| a * b).sum();
        for ((&j, &pj), &dpj) in cols.iter().zip(&p).zip(&dp) {
            let ds = pj * (dpj - rowsum);
            for t in 0..d {
                o[i * d + t] += pj * v[j * d + t] as f64;
                dq[i * d + t] += alpha * ds * k[j * d + t] as f64;
                dk[j * d + t] += alpha * ds * q[i * d + t] as f64;
                dv[j * d + t] += pj * d_o[i * d + t] as f64;
            }
        }
    }
    [o, dq, dk, dv]
}

/// Sparse attention forward and backward on the device (SDDMM, softmax, SpMM, the transposes) against dense attention
/// with the same mask on the CPU, in f32: a local window of 64 and 8 global tokens over a sequence of 8192 (the global
/// rows are long rows), head dimension 64.
#[test]
fn sparse_attention_matches_dense_attention() {
    let Some(gpu) = gpu_or_skip("sparse_attention_matches_dense_attention") else { return };
    let (s, d, window, global) = (8192usize, 64usize, 64usize, 8usize);
    let alpha = 1.0 / (d as f32).sqrt();
    let mask = tilesparse::suite_softmax::local_global_mask(s, window, global);
    let [q, k, v, d_o] = [50, 51, 52, 53].map(|t| gen::dense_matrix(s, d, seed(t)));
    let want = dense_attention(&mask, &q, &k, &v, &d_o, d, alpha as f64);
    let up = |x: &[f32]| DeviceDense::upload(&gpu, s, d, x).unwrap();
    let (q_dev, k_dev, v_dev, do_dev) = (up(&q), up(&k), up(&v), up(&d_o));
    // Forward: S = alpha (Q K^T) o mask, P = softmax(S), O = P V.
    let mut p = DeviceCsr::upload(&gpu, mask.view()).unwrap();
    let sddmm_config = tilesparse::SddmmConfig::select(d, p.nnz(), DType::F32);
    sddmm_with(&gpu, &q_dev, &k_dev, &mut p, &sddmm_config, alpha, 0.0).unwrap();
    let config = softmax(&gpu, &mut p).unwrap();
    assert!(config.long_rows_from.is_some(), "{config:?}: the global rows should be long");
    let mut o = DeviceDense::<f32>::zeros(&gpu, s, d).unwrap();
    spmm_auto(&gpu, &p, &v_dev, &mut o).unwrap();
    // Backward: dP = (dO V^T) o mask, dS = softmax_backward(P, dP), dQ = alpha dS K, dK = alpha dS^T Q, dV = P^T dO.
    let mut ds = DeviceCsr::upload(&gpu, mask.view()).unwrap();
    sddmm_with(&gpu, &do_dev, &v_dev, &mut ds, &sddmm_config, 1.0, 0.0).unwrap();
    softmax_backward(&gpu, &p, &mut ds).unwrap();
    let mut dq = DeviceDense::<f32>::zeros(&gpu, s, d).unwrap();
    let mut dk = DeviceDense::<f32>::zeros(&gpu, s, d).unwrap();
    let mut dv = DeviceDense::<f32>::zeros(&gpu, s, d).unwrap();
    spmm_auto_with(&gpu, &ds, &k_dev, &mut dq, SpmmEpilogue::scaled(alpha, 0.0)).unwrap();
    spmm_auto_with(&gpu, ds.transposed(&gpu).unwrap(), &q_dev, &mut dk, SpmmEpilogue::scaled(alpha, 0.0)).unwrap();
    spmm_auto(&gpu, p.transposed(&gpu).unwrap(), &do_dev, &mut dv).unwrap();
    for ((name, got), want) in [("O", o), ("dQ", dq), ("dK", dk), ("dV", dv)].into_iter().zip(&want) {
        let got = got.download(&gpu).unwrap();
        let scale = want.iter().fold(0.0f64, |m, x| m.max(x.abs()));
        let worst = got.iter().zip(want).map(|(&g, &w)| (g as f64 - w).abs()).fold(0.0, f64::max);
        // f32 sums of up to 8192 terms, through four kernels: 1e-4 of the largest entry is far above their rounding
        // (about 1e-6) and below a wrong entry's effect (a dropped term of a local row moves its entry by about 1e-2).
        assert!(
            worst <= 1e-4 * scale,
            "{name}: worst error {worst:e} against entries up to {scale:e} ({})",
            seed_note()
        );
        eprintln!("attention {name}: worst error {:.2e} of the largest entry", worst / scale);
    }
}
