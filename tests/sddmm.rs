//! SDDMM, C = alpha (A B^T) o spy(C) + beta C: every compiled config against the f64 oracle on awkward shapes and
//! inner dimensions, the scalars, NaN and Inf, the typed errors, the new values reaching what C keeps (its
//! transpose, its tensor-core blocks), a recorded replay, cuSPARSE's SDDMM, and the CPU backend.

mod common;

use common::{gpu_or_skip, seed, seed_note, SpmmOracle, POISON};
use half::{bf16, f16};
use sprs::CsMat;
use tilesparse::baseline::cusparse::{Cusparse, CusparseSddmm, SddmmForm};
use tilesparse::cpu::backend;
use tilesparse::cpu::oracle::{SddmmReference, Summation};
use tilesparse::spmm::{SpmmKernel, TensorCoreConfig};
use tilesparse::{
    gen, sddmm, sddmm_auto, sddmm_auto_with, sddmm_planned, sddmm_with, spmm_kernel, DType, DeviceCsr, DeviceDense,
    Error, Gpu, Scalar, SddmmConfig, SddmmPlan,
};

/// A rows x cols dense matrix of T, uniform in [-1, 1).
fn dense<T: Scalar>(rows: usize, cols: usize, s: u64) -> Vec<T> {
    gen::dense_matrix(rows, cols, s).into_iter().map(T::from_f32).collect()
}

/// The shapes every config runs on: (name, C's structure). Holes and a dense row, one row, one column, no entry, a
/// wide rectangle, and power-law rows long enough to span many warps' runs of entries.
fn patterns() -> Vec<(&'static str, CsMat<f32>)> {
    let holes =
        gen::with_dense_row(&gen::with_empty_rows(&gen::uniform_random(300, 200, 0.05, seed(1)), 0.3, seed(2)), 7);
    vec![
        ("7 x 40 at 50%", gen::uniform_random(7, 40, 0.5, seed(3))),
        ("holes and a dense row", holes),
        ("m = 1", gen::uniform_random(1, 500, 0.3, seed(4))),
        ("n = 1", gen::uniform_random(400, 1, 0.5, seed(5))),
        ("nnz = 0", CsMat::zero((50, 60))),
        ("37 x 1000", gen::uniform_random(37, 1000, 0.05, seed(6))),
        ("power law", gen::power_law(1200, 1500, 8.0, 1.5, seed(7))),
    ]
}

/// The inner dimensions: none (every entry 0), odd, prime, below and past a vector of every width and a warp's reach
/// per step.
const KS: [usize; 9] = [0, 1, 3, 8, 30, 64, 97, 128, 264];

/// C's values after `run` on a C poisoned before it, as T.
fn run_poisoned<T: Scalar>(
    gpu: &Gpu,
    c: &mut DeviceCsr<T>,
    run: impl FnOnce(&mut DeviceCsr<T>) -> tilesparse::Result<()>,
) -> tilesparse::Result<Vec<T>> {
    c.set_values(gpu, &vec![T::from_f64(POISON); c.nnz()]).unwrap();
    run(c)?;
    Ok(c.download(gpu).unwrap().data().to_vec())
}

fn assert_matches<T: Scalar>(what: &str, reference: &SddmmReference, got: &[T]) {
    assert_matches_summed(what, reference, Summation::Fma, got);
}

/// `got` against the oracle with the bound of a kernel that sums as `summation`.
fn assert_matches_summed<T: Scalar>(what: &str, reference: &SddmmReference, summation: Summation, got: &[T]) {
    let cmp = reference.compare_summed(summation, got);
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

fn every_config_of<T: Scalar>(gpu: &Gpu) -> usize {
    let configs = SddmmConfig::compiled_for(T::DTYPE);
    assert_eq!(configs.len(), if T::DTYPE == DType::F32 { 36 } else { 48 });
    let mut runs = 0;
    for (name, pattern) in patterns() {
        let pattern: CsMat<T> = gen::convert(&pattern);
        let (m, n) = pattern.shape();
        let mut c = DeviceCsr::upload(gpu, pattern.view()).unwrap();
        for (i, &k) in KS.iter().enumerate() {
            let a = dense::<T>(m, k, seed(100 + i as u64));
            let b = dense::<T>(n, k, seed(200 + i as u64));
            let reference = SddmmReference::new(pattern.view(), &a, &b, k);
            let a_dev = DeviceDense::upload(gpu, m, k, &a).unwrap();
            let b_dev = DeviceDense::upload(gpu, n, k, &b).unwrap();
            for config in &configs {
                let what = format!("{} {name}, k = {k}", config.kernel_name());
                let got = run_poisoned(gpu, &mut c, |c| sddmm(gpu, &a_dev, &b_dev, c, config));
                if k % config.vector_width != 0 {
                    assert!(matches!(got, Err(Error::Unsupported { .. })), "{what}: {:?}", got.err());
                    let untouched = c.download(gpu).unwrap();
                    assert!(untouched.data().iter().all(|v| v.to_f64() == T::from_f64(POISON).to_f64()), "{what}");
                    continue;
                }
                assert_matches(&what, &reference, &got.unwrap());
                runs += 1;
            }
            let got = run_poisoned(gpu, &mut c, |c| sddmm_auto(gpu, &a_dev, &b_dev, c).map(drop)).unwrap();
            assert_matches(&format!("sddmm_auto {name}, k = {k}"), &reference, &got);
        }
    }
    runs
}

/// Every compiled config of every type on every shape and inner dimension it can run, against the f64 oracle on a
/// poisoned C; a config whose vector does not divide k is refused and leaves C as it was.
#[test]
fn sanitizer_every_sddmm_config_matches_the_oracle() {
    let Some(gpu) = gpu_or_skip("sanitizer_every_sddmm_config_matches_the_oracle") else { return };
    let runs = every_config_of::<f32>(&gpu) + every_config_of::<f16>(&gpu) + every_config_of::<bf16>(&gpu);
    eprintln!("sddmm: {runs} config runs matched the oracle");
}

fn tiled_of<T: Scalar>(gpu: &Gpu) -> usize {
    let vector = 16 / T::DTYPE.size();
    let mut runs = 0;
    for (name, pattern) in patterns() {
        let pattern: CsMat<T> = gen::convert(&pattern);
        let (m, n) = pattern.shape();
        let mut c = DeviceCsr::upload(gpu, pattern.view()).unwrap();
        // Every lane count the plans take (up to 8 vectors per lane: 4 lanes to 32 vectors, 8 to 64, 16 to 128, 32 to
        // 256), odd vector counts, and k = 0.
        for (i, vectors) in [0, 1, 4, 33, 65, 129, 256].into_iter().enumerate() {
            let k = vectors * vector;
            let a = dense::<T>(m, k, seed(300 + i as u64));
            let b = dense::<T>(n, k, seed(310 + i as u64));
            let reference = SddmmReference::new(pattern.view(), &a, &b, k);
            let a_dev = DeviceDense::upload(gpu, m, k, &a).unwrap();
            let b_dev = DeviceDense::upload(gpu, n, k, &b).unwrap();
            let largest = SddmmPlan::tiled(gpu, &c, k, None).unwrap().tile_rows();
            for tile_rows in [None, Some(1), Some(7.min(largest))] {
                let plan = SddmmPlan::tiled(gpu, &c, k, tile_rows).unwrap();
                let what = format!("{} tiles of {} rows, {name}, k = {k}", plan.kernel_name(), plan.tile_rows());
                let got = run_poisoned(gpu, &mut c, |c| sddmm_planned(gpu, &a_dev, &b_dev, c, &plan, 1.0, 0.0));
                assert_matches(&what, &reference, &got.unwrap());
                runs += 1;
            }
        }
    }
    runs
}

/// The tiled kernels through plans, every lane count, tiles of the largest size, one row and seven rows, on every
/// structure of the configs' test, against the oracle on a poisoned C.
#[test]
fn sanitizer_tiled_sddmm_matches_the_oracle() {
    let Some(gpu) = gpu_or_skip("sanitizer_tiled_sddmm_matches_the_oracle") else { return };
    let runs = tiled_of::<f32>(&gpu) + tiled_of::<f16>(&gpu) + tiled_of::<bf16>(&gpu);
    eprintln!("sddmm: {runs} planned runs matched the oracle");
}

fn assert_matches_tc<T: Scalar>(what: &str, reference: &SddmmReference, got: &[T]) {
    assert_matches_summed(what, reference, Summation::tensor_cores(T::DTYPE).unwrap(), got);
}

/// C = alpha (A B^T) o spy(C) + beta C on the tensor cores, through a plan made for C.
fn tc<T: Scalar>(
    gpu: &Gpu,
    a: &DeviceDense<T>,
    b: &DeviceDense<T>,
    c: &mut DeviceCsr<T>,
    alpha: f32,
    beta: f32,
) -> tilesparse::Result<()> {
    let plan = SddmmPlan::tensor_cores(gpu, c, a.cols())?;
    sddmm_planned(gpu, a, b, c, &plan, alpha, beta)
}

fn tensor_cores_of<T: Scalar>(gpu: &Gpu) -> usize {
    let mut runs = 0;
    // The configs' shapes, and: a full 130 x 150 (rows of 64 entries in a tile, two rounds of 32 lanes), an attention
    // mask (tiles skipped), and a band 2000 x 3000 (many column ranges, each row in one or two tiles).
    let mut shapes = patterns();
    shapes.push(("full 130 x 150", gen::uniform_random(130, 150, 1.0, seed(8))));
    shapes.push(("attention mask", tilesparse::suite_softmax::local_global_mask(300, 20, 3)));
    shapes.push(("band", gen::banded(2000, 3000, 5, seed(9))));
    for (name, pattern) in shapes {
        let pattern: CsMat<T> = gen::convert(&pattern);
        let (m, n) = pattern.shape();
        let mut c = DeviceCsr::upload(gpu, pattern.view()).unwrap();
        // Every KS, and k past a few chunks, not a multiple of 16 bytes.
        for (i, &k) in KS.iter().chain(&[517]).enumerate() {
            let a = dense::<T>(m, k, seed(400 + i as u64));
            let b = dense::<T>(n, k, seed(420 + i as u64));
            let reference = SddmmReference::new(pattern.view(), &a, &b, k);
            let a_dev = DeviceDense::upload(gpu, m, k, &a).unwrap();
            let b_dev = DeviceDense::upload(gpu, n, k, &b).unwrap();
            let what = format!("tensor cores {name}, k = {k}");
            let plan = SddmmPlan::tensor_cores(gpu, &c, k).unwrap();
            assert!(plan.uses_tensor_cores() && plan.kernel_name() == format!("sddmm_tc_{}", T::DTYPE.name()));
            let tiles = tilesparse::sddmm::sddmm_tc_tiles(pattern.indptr().raw_storage(), pattern.indices());
            assert_eq!(plan.tensor_core_tiles(), tiles, "{what}");
            let got = run_poisoned(gpu, &mut c, |c| sddmm_planned(gpu, &a_dev, &b_dev, c, &plan, 1.0, 0.0)).unwrap();
            assert_matches_tc(&what, &reference, &got);
            // The same bits on every run.
            let again = run_poisoned(gpu, &mut c, |c| sddmm_planned(gpu, &a_dev, &b_dev, c, &plan, 1.0, 0.0)).unwrap();
            assert!(got.iter().zip(&again).all(|(x, y)| x.to_f64().to_bits() == y.to_f64().to_bits()), "{what}");
            runs += 1;
        }
    }
    runs
}

/// The tensor-core SDDMM, directly and through a plan, on the configs' shapes and three more (rows that fill a tile,
/// an attention mask whose empty tiles are skipped, a band over many column ranges) at every k of the configs' test
/// and one past several chunks that is not a multiple of 16 bytes, against the oracle with the tensor cores' bounds,
/// on a poisoned C, twice for the same bits.
#[test]
fn sanitizer_tensor_core_sddmm_matches_the_oracle() {
    let Some(gpu) = gpu_or_skip("sanitizer_tensor_core_sddmm_matches_the_oracle") else { return };
    let runs = tensor_cores_of::<f32>(&gpu) + tensor_cores_of::<f16>(&gpu) + tensor_cores_of::<bf16>(&gpu);
    eprintln!("sddmm: {runs} tensor-core runs matched the oracle");
}

/// Plans: `SddmmPlan::new` takes the gather kernel on a small matrix and the tiled one on a large uniform f32 one at
/// k = 256, both matching the oracle with scalars; a tiled plan's refusals (k it cannot take, another matrix, another
/// k, another type, a tile past the shared memory); new values of C through a kept plan.
#[test]
fn sddmm_plans_refuse_what_they_were_not_made_for() {
    let Some(gpu) = gpu_or_skip("sddmm_plans_refuse_what_they_were_not_made_for") else { return };
    // The gather kernel on a small matrix, the tiled one on a large uniform f32 one at k = 256 with tiles 10% full,
    // the tensor cores on one whose tiles are 30% full.
    for (m, n, density, k, kind) in [
        (200, 150, 0.06, 64, "sddmm_f32_"),
        (3000, 3000, 0.1, 256, "sddmm_tiled_"),
        (2048, 2048, 0.3, 256, "sddmm_tc_"),
    ] {
        let tiled = kind == "sddmm_tiled_";
        let pattern = gen::uniform_random(m, n, density, seed(320));
        let a = gen::dense_matrix(m, k, seed(321));
        let b = gen::dense_matrix(n, k, seed(322));
        let a_dev = DeviceDense::upload(&gpu, m, k, &a).unwrap();
        let b_dev = DeviceDense::upload(&gpu, n, k, &b).unwrap();
        let mut c = DeviceCsr::upload(&gpu, pattern.view()).unwrap();
        let plan = SddmmPlan::new(&gpu, &c, k).unwrap();
        assert!(plan.kernel_name().starts_with(kind), "{m} x {n} at {density}, k = {k}: {}", plan.kernel_name());
        assert_eq!(plan.uses_tiled_kernel(), tiled);
        assert_eq!(plan.uses_tensor_cores(), kind == "sddmm_tc_");
        let c0 = gen::dense_matrix(pattern.nnz(), 1, seed(323));
        c.set_values(&gpu, &c0).unwrap();
        sddmm_planned(&gpu, &a_dev, &b_dev, &mut c, &plan, -0.5, 2.0).unwrap();
        let reference = SddmmReference::new(pattern.view(), &a, &b, k);
        let what = format!("{} with scalars", plan.kernel_name());
        let summation = if plan.uses_tensor_cores() { Summation::Tf32x3 } else { Summation::Fma };
        assert_matches_summed(&what, &reference.epilogue(-0.5, 2.0, &c0), summation, c.download(&gpu).unwrap().data());
        // Another matrix's plan (the same structure, another identity), another k, another type.
        let other = DeviceCsr::upload(&gpu, pattern.view()).unwrap();
        let other_plan = SddmmPlan::new(&gpu, &other, k).unwrap();
        let r = sddmm_planned(&gpu, &a_dev, &b_dev, &mut c, &other_plan, 1.0, 0.0);
        assert!(matches!(r, Err(Error::PatternMismatch(_))), "{r:?}");
        let a32 = DeviceDense::upload(&gpu, m, 32, &gen::dense_matrix(m, 32, 1)).unwrap();
        let b32 = DeviceDense::upload(&gpu, n, 32, &gen::dense_matrix(n, 32, 2)).unwrap();
        let r = sddmm_planned(&gpu, &a32, &b32, &mut c, &plan, 1.0, 0.0);
        assert!(matches!(r, Err(Error::ShapeMismatch(_))), "{r:?}");
        let p16: CsMat<f16> = gen::convert(&pattern);
        let c16 = DeviceCsr::upload(&gpu, p16.view()).unwrap();
        let plan16 = SddmmPlan::new(&gpu, &c16, k).unwrap();
        let r = sddmm_planned(&gpu, &a_dev, &b_dev, &mut c, &plan16, 1.0, 0.0);
        assert!(matches!(r, Err(Error::InvalidConfig { .. })), "{r:?}");
        // The kept plan serves new values of C (its structure is the same): the plain product again.
        c.set_values(&gpu, &vec![POISON as f32; pattern.nnz()]).unwrap();
        sddmm_planned(&gpu, &a_dev, &b_dev, &mut c, &plan, 1.0, 0.0).unwrap();
        assert_matches_summed("kept plan", &reference, summation, c.download(&gpu).unwrap().data());
        // A tiled plan refuses what its kernels cannot take.
        let unsupported = |r: tilesparse::Result<SddmmPlan>| matches!(r, Err(Error::Unsupported { .. }));
        assert!(unsupported(SddmmPlan::tiled(&gpu, &c, 30, None)), "k not a multiple of 4");
        assert!(unsupported(SddmmPlan::tiled(&gpu, &c, 1028, None)), "k past 1024 in f32");
        assert!(unsupported(SddmmPlan::tiled(&gpu, &c, k, Some(0))));
        assert!(unsupported(SddmmPlan::tiled(&gpu, &c, k, Some(100_000))));
        // ... which a plan of the library's choice takes with the gather kernel.
        assert!(!SddmmPlan::new(&gpu, &c, 30).unwrap().uses_tiled_kernel());
    }
}

fn scalars_and_specials<T: Scalar>(gpu: &Gpu) {
    let (m, n, k) = (90, 70, 48);
    let pattern: CsMat<T> = gen::convert(&gen::uniform_random(m, n, 0.2, seed(10)));
    let mut a = dense::<T>(m, k, seed(11));
    let mut b = dense::<T>(n, k, seed(12));
    let c0: Vec<T> = dense::<T>(pattern.nnz(), 1, seed(13));
    let a_dev = DeviceDense::upload(gpu, m, k, &a).unwrap();
    let b_dev = DeviceDense::upload(gpu, n, k, &b).unwrap();
    let mut c = DeviceCsr::upload(gpu, pattern.view()).unwrap();
    let reference = SddmmReference::new(pattern.view(), &a, &b, k);
    let widest = SddmmConfig::compiled_for(T::DTYPE).into_iter().filter(|c| c.vector_width == 16 / T::DTYPE.size());
    for config in widest {
        for (alpha, beta) in [(0.5f32, -2.0f32), (1.0, 1.0), (-3.0, 0.0), (0.0, 0.25)] {
            c.set_values(gpu, &c0).unwrap();
            sddmm_with(gpu, &a_dev, &b_dev, &mut c, &config, alpha, beta).unwrap();
            let got = c.download(gpu).unwrap();
            let what = format!("{} alpha {alpha} beta {beta}", config.kernel_name());
            assert_matches(&what, &reference.epilogue(alpha, beta, &c0), got.data());
        }
        // beta 0 reads nothing: NaN in C's old values does not reach the new ones.
        c.set_values(gpu, &vec![T::from_f32(f32::NAN); pattern.nnz()]).unwrap();
        sddmm_with(gpu, &a_dev, &b_dev, &mut c, &config, 2.0, 0.0).unwrap();
        let got = c.download(gpu).unwrap();
        assert_matches("old NaN, beta 0", &reference.epilogue(2.0, 0.0, &c0), got.data());
    }
    // The same on the tensor cores.
    for (alpha, beta) in [(0.5f32, -2.0f32), (1.0, 1.0), (-3.0, 0.0), (0.0, 0.25)] {
        c.set_values(gpu, &c0).unwrap();
        tc(gpu, &a_dev, &b_dev, &mut c, alpha, beta).unwrap();
        let got = c.download(gpu).unwrap();
        assert_matches_tc(
            &format!("tensor cores alpha {alpha} beta {beta}"),
            &reference.epilogue(alpha, beta, &c0),
            got.data(),
        );
    }
    c.set_values(gpu, &vec![T::from_f32(f32::NAN); pattern.nnz()]).unwrap();
    tc(gpu, &a_dev, &b_dev, &mut c, 2.0, 0.0).unwrap();
    assert_matches_tc(
        "tensor cores, old NaN, beta 0",
        &reference.epilogue(2.0, 0.0, &c0),
        c.download(gpu).unwrap().data(),
    );
    // A NaN in a row of A and an Inf in a row of B reach exactly the entries that read them (the oracle's NaN and
    // Inf, as IEEE arithmetic makes them), and no other.
    let (row, col) = {
        let (_, (r, c)) = pattern.iter().nth(pattern.nnz() / 2).unwrap();
        (r, c)
    };
    a[row * k + 5] = T::from_f32(f32::NAN);
    b[col * k + 9] = T::from_f32(f32::INFINITY);
    let a_dev = DeviceDense::upload(gpu, m, k, &a).unwrap();
    let b_dev = DeviceDense::upload(gpu, n, k, &b).unwrap();
    let reference = SddmmReference::new(pattern.view(), &a, &b, k);
    assert!(reference.want().iter().any(|v| v.is_nan()) && reference.want().iter().any(|v| v.is_infinite()));
    for config in SddmmConfig::compiled_for(T::DTYPE).iter().filter(|c| k % c.vector_width == 0) {
        let got = run_poisoned(gpu, &mut c, |c| sddmm(gpu, &a_dev, &b_dev, c, config)).unwrap();
        assert_matches(&format!("{} NaN and Inf", config.kernel_name()), &reference, &got);
    }
    // The tensor cores: 3xTF32 splits an Inf into Inf and NaN, so those sums are computed again exactly. A second
    // Inf of the other sign in a row of B makes the entries that read both NaN (Inf - Inf), and one that reads it
    // alone -Inf.
    let got = run_poisoned(gpu, &mut c, |c| tc(gpu, &a_dev, &b_dev, c, 1.0, 0.0)).unwrap();
    assert_matches_tc("tensor cores, NaN and Inf", &reference, &got);
    let other = pattern.iter().map(|(_, (_, c))| c).find(|&j| j != col).unwrap();
    b[other * k + 9] = T::from_f32(f32::NEG_INFINITY);
    let b_dev = DeviceDense::upload(gpu, n, k, &b).unwrap();
    let reference = SddmmReference::new(pattern.view(), &a, &b, k);
    let got = run_poisoned(gpu, &mut c, |c| tc(gpu, &a_dev, &b_dev, c, 1.0, 0.0)).unwrap();
    assert_matches_tc("tensor cores, NaN, Inf and -Inf", &reference, &got);
    let got = run_poisoned(gpu, &mut c, |c| sddmm_auto(gpu, &a_dev, &b_dev, c).map(drop)).unwrap();
    assert_matches("sddmm_auto, NaN, Inf and -Inf", &reference, &got);
}

/// alpha and beta as cuSPARSE takes them, C's old NaN left unread where beta is 0, and NaN and Inf in A and B.
#[test]
fn sddmm_scalars_nan_and_inf() {
    let Some(gpu) = gpu_or_skip("sddmm_scalars_nan_and_inf") else { return };
    scalars_and_specials::<f32>(&gpu);
    scalars_and_specials::<f16>(&gpu);
    scalars_and_specials::<bf16>(&gpu);
}

/// Every bad input is a typed error before anything is written: C keeps its values.
#[test]
fn sddmm_refuses_bad_input() {
    let Some(gpu) = gpu_or_skip("sddmm_refuses_bad_input") else { return };
    let (m, n, k) = (40, 30, 16);
    let pattern = gen::uniform_random(m, n, 0.3, seed(20));
    let a = DeviceDense::upload(&gpu, m, k, &gen::dense_matrix(m, k, seed(21))).unwrap();
    let b = DeviceDense::upload(&gpu, n, k, &gen::dense_matrix(n, k, seed(22))).unwrap();
    let mut c = DeviceCsr::upload(&gpu, pattern.view()).unwrap();
    let kept = |c: &DeviceCsr<f32>| c.download(&gpu).unwrap().data() == pattern.data();
    let config = SddmmConfig::select(k, pattern.nnz(), DType::F32);
    let shape = |r: tilesparse::Result<()>| matches!(r, Err(Error::ShapeMismatch(_)));
    let a_short = DeviceDense::upload(&gpu, m - 1, k, &gen::dense_matrix(m - 1, k, 1)).unwrap();
    let b_wide = DeviceDense::upload(&gpu, n, k + 4, &gen::dense_matrix(n, k + 4, 2)).unwrap();
    let b_tall = DeviceDense::upload(&gpu, n + 1, k, &gen::dense_matrix(n + 1, k, 3)).unwrap();
    assert!(shape(sddmm(&gpu, &a_short, &b, &mut c, &config)));
    assert!(shape(sddmm(&gpu, &a, &b_wide, &mut c, &config)));
    assert!(shape(sddmm(&gpu, &a, &b_tall, &mut c, &config)));
    assert!(matches!(sddmm_auto(&gpu, &a, &b_tall, &mut c), Err(Error::ShapeMismatch(_))));
    assert!(shape(tc(&gpu, &a, &b_tall, &mut c, 1.0, 0.0)));
    assert!(shape(tc(&gpu, &a_short, &b, &mut c, 1.0, 0.0)));
    // A vector that does not divide k names the config that runs it.
    let odd_a = DeviceDense::upload(&gpu, m, 6, &gen::dense_matrix(m, 6, 4)).unwrap();
    let odd_b = DeviceDense::upload(&gpu, n, 6, &gen::dense_matrix(n, 6, 5)).unwrap();
    let wide = SddmmConfig { dtype: DType::F32, vector_width: 4, lanes_per_entry: 2, runs_per_warp: 4 };
    match sddmm(&gpu, &odd_a, &odd_b, &mut c, &wide) {
        Err(Error::Unsupported { reason, .. }) => assert!(reason.contains("sddmm_f32_v2_l"), "{reason}"),
        other => panic!("vector 4 over k = 6: {other:?}"),
    }
    // Configs that break a rule, or are for another type.
    let invalid = |r: tilesparse::Result<()>| matches!(r, Err(Error::InvalidConfig { .. }));
    assert!(invalid(sddmm(&gpu, &a, &b, &mut c, &SddmmConfig { lanes_per_entry: 3, ..config })));
    assert!(invalid(sddmm(&gpu, &a, &b, &mut c, &SddmmConfig { runs_per_warp: 3, ..config })));
    assert!(invalid(sddmm(&gpu, &a, &b, &mut c, &SddmmConfig { vector_width: 8, ..config })));
    assert!(invalid(sddmm(&gpu, &a, &b, &mut c, &SddmmConfig { dtype: DType::F16, ..config })));
    // f64 has no SDDMM kernel.
    let p64: CsMat<f64> = gen::convert(&pattern);
    let a64 = DeviceDense::upload(&gpu, m, k, &vec![1.0f64; m * k]).unwrap();
    let b64 = DeviceDense::upload(&gpu, n, k, &vec![1.0f64; n * k]).unwrap();
    let mut c64 = DeviceCsr::upload(&gpu, p64.view()).unwrap();
    assert!(matches!(sddmm_auto(&gpu, &a64, &b64, &mut c64), Err(Error::UnsupportedDtype { .. })));
    assert!(matches!(SddmmPlan::tensor_cores(&gpu, &c64, k), Err(Error::UnsupportedDtype { .. })));
    // Another handle's operands.
    let other = Gpu::new(0).unwrap();
    let a_other = DeviceDense::upload(&other, m, k, &gen::dense_matrix(m, k, 6)).unwrap();
    let b_other = DeviceDense::upload(&other, n, k, &gen::dense_matrix(n, k, 7)).unwrap();
    let mut c_other = DeviceCsr::upload(&other, pattern.view()).unwrap();
    let wrong = |r: tilesparse::Result<()>| matches!(r, Err(Error::WrongGpu(_)));
    assert!(wrong(sddmm(&gpu, &a_other, &b, &mut c, &config)));
    assert!(wrong(sddmm(&gpu, &a, &b_other, &mut c, &config)));
    assert!(wrong(sddmm(&gpu, &a, &b, &mut c_other, &config)));
    assert!(wrong(tc(&gpu, &a_other, &b, &mut c, 1.0, 0.0)));
    assert!(wrong(tc(&gpu, &a, &b, &mut c_other, 1.0, 0.0)));
    assert!(kept(&c), "an error wrote C");
    // And the right call runs.
    sddmm(&gpu, &a, &b, &mut c, &config).unwrap();
    assert!(!kept(&c));
}

/// The new values reach what C keeps: its transpose (made before the SDDMM) holds them bit for bit, and products with
/// C on its tensor-core blocks (built before) and on a tile match the oracle of the new values.
fn new_values_reach_what_c_keeps<T: Scalar>(gpu: &Gpu) {
    let (m, n, k, width) = (256, 192, 40, 64);
    let pattern: CsMat<T> = gen::convert(&gen::uniform_random(m, n, 0.15, seed(30)));
    let mut c = DeviceCsr::upload(gpu, pattern.view()).unwrap();
    let x = dense::<T>(n, width, seed(31));
    let x_dev = DeviceDense::upload(gpu, n, width, &x).unwrap();
    let mut y = DeviceDense::<T>::zeros(gpu, m, width).unwrap();
    let tensor_cores: Vec<TensorCoreConfig> =
        TensorCoreConfig::all(T::DTYPE).into_iter().filter(|t| t.runs_on(gpu.info())).collect();
    assert!(!tensor_cores.is_empty());
    for t in &tensor_cores {
        spmm_kernel(gpu, &c, &x_dev, &mut y, &SpmmKernel::TensorCore(*t)).unwrap();
    }
    c.transposed(gpu).unwrap();
    let a = dense::<T>(m, k, seed(32));
    let b = dense::<T>(n, k, seed(33));
    let a_dev = DeviceDense::upload(gpu, m, k, &a).unwrap();
    let b_dev = DeviceDense::upload(gpu, n, k, &b).unwrap();
    sddmm_auto(gpu, &a_dev, &b_dev, &mut c).unwrap();
    let new = c.download(gpu).unwrap();
    assert_matches("the new values", &SddmmReference::new(pattern.view(), &a, &b, k), new.data());
    assert_eq!(c.holds_non_finite(), None);
    let t = c.transposed(gpu).unwrap().download(gpu).unwrap();
    let want = new.transpose_view().to_csr();
    let bits = |v: &[T]| v.iter().map(|x| x.to_f64().to_bits()).collect::<Vec<_>>();
    assert_eq!(t.indptr().raw_storage(), want.indptr().raw_storage(), "{}: A^T's row pointer", T::DTYPE);
    assert_eq!(t.indices(), want.indices());
    assert_eq!(bits(t.data()), bits(want.data()), "{}: A^T's values after the SDDMM", T::DTYPE);
    let oracle = SpmmOracle::new(new.view(), &x, width);
    for t in &tensor_cores {
        let kernel = SpmmKernel::TensorCore(*t);
        y.fill(gpu, T::from_f64(POISON)).unwrap();
        spmm_kernel(gpu, &c, &x_dev, &mut y, &kernel).unwrap();
        oracle.check_kernel(&format!("{kernel:?} after the SDDMM"), &y.download(gpu).unwrap(), &kernel);
    }
    y.fill(gpu, T::from_f64(POISON)).unwrap();
    let kernel = tilesparse::spmm_auto(gpu, &c, &x_dev, &mut y).unwrap();
    oracle.check_kernel("spmm_auto after the SDDMM", &y.download(gpu).unwrap(), &kernel);
}

#[test]
fn sddmm_values_reach_the_transpose_and_the_tensor_core_blocks() {
    let Some(gpu) = gpu_or_skip("sddmm_values_reach_the_transpose_and_the_tensor_core_blocks") else { return };
    new_values_reach_what_c_keeps::<f32>(&gpu);
    new_values_reach_what_c_keeps::<f16>(&gpu);
    new_values_reach_what_c_keeps::<bf16>(&gpu);
}

/// An SDDMM recorded once replays with new inputs written into its buffers, and matches the oracle each time: the
/// automatic choice, and a plan on the tensor cores.
#[test]
fn sddmm_records_and_replays() {
    let Some(gpu) = gpu_or_skip("sddmm_records_and_replays") else { return };
    let (m, n, k) = (500, 300, 64);
    let pattern = gen::power_law(m, n, 10.0, 1.5, seed(40));
    let mut a = DeviceDense::upload(&gpu, m, k, &gen::dense_matrix(m, k, seed(41))).unwrap();
    let b = gen::dense_matrix(n, k, seed(42));
    let b_dev = DeviceDense::upload(&gpu, n, k, &b).unwrap();
    let mut c = DeviceCsr::upload(&gpu, pattern.view()).unwrap();
    sddmm_auto(&gpu, &a, &b_dev, &mut c).unwrap();
    let (recording, config) = gpu.record(|g| sddmm_auto_with(g, &a, &b_dev, &mut c, 1.0, 0.0)).unwrap();
    assert_eq!(config, SddmmConfig::select(k, pattern.nnz(), DType::F32));
    for round in 0..3 {
        let new_a = gen::dense_matrix(m, k, seed(43 + round));
        a.overwrite(&gpu, &new_a).unwrap();
        c.set_values(&gpu, &vec![POISON as f32; c.nnz()]).unwrap();
        // SAFETY: A, B and C outlive the replay, and nothing else uses them meanwhile.
        unsafe { recording.replay(&gpu) }.unwrap();
        let got = c.download(&gpu).unwrap();
        assert_matches(&format!("replay {round}"), &SddmmReference::new(pattern.view(), &new_a, &b, k), got.data());
    }
    // A plan on the tensor cores records and replays too.
    let plan = SddmmPlan::tensor_cores(&gpu, &c, k).unwrap();
    sddmm_planned(&gpu, &a, &b_dev, &mut c, &plan, 1.0, 0.0).unwrap();
    let (recording, ()) = gpu.record(|g| sddmm_planned(g, &a, &b_dev, &mut c, &plan, 1.0, 0.0)).unwrap();
    for round in 0..2 {
        let new_a = gen::dense_matrix(m, k, seed(46 + round));
        a.overwrite(&gpu, &new_a).unwrap();
        c.set_values(&gpu, &vec![POISON as f32; c.nnz()]).unwrap();
        // SAFETY: A, B, C and the plan outlive the replay, and nothing else uses them meanwhile.
        unsafe { recording.replay(&gpu) }.unwrap();
        let got = c.download(&gpu).unwrap();
        let reference = SddmmReference::new(pattern.view(), &new_a, &b, k);
        assert_matches_tc(&format!("tensor cores, replay {round}"), &reference, got.data());
    }
}

/// cuSPARSE's SDDMM (the benchmarks' baseline) in both forms of B matches the oracle, where it takes the type.
#[test]
fn cusparse_sddmm_matches_the_oracle() {
    let Some(gpu) = gpu_or_skip("cusparse_sddmm_matches_the_oracle") else { return };
    let lib = Cusparse::new(&gpu).unwrap();
    let (m, n, k) = (300, 200, 64);
    let pattern = gen::power_law(m, n, 12.0, 1.5, seed(50));
    let a = gen::dense_matrix(m, k, seed(51));
    let b = gen::dense_matrix(n, k, seed(52));
    let a_dev = DeviceDense::upload(&gpu, m, k, &a).unwrap();
    let b_dev = DeviceDense::upload(&gpu, n, k, &b).unwrap();
    let mut c = DeviceCsr::upload(&gpu, pattern.view()).unwrap();
    let reference = SddmmReference::new(pattern.view(), &a, &b, k);
    let c0 = gen::dense_matrix(pattern.nnz(), 1, seed(53));
    for form in SddmmForm::ALL {
        c.set_values(&gpu, &c0).unwrap();
        {
            let mut theirs = CusparseSddmm::new(&gpu, &lib, &a_dev, &b_dev, &mut c, form).unwrap();
            theirs.run_scaled(&gpu, 0.5, 2.0).unwrap();
        }
        let got = c.download(&gpu).unwrap();
        assert_matches(&format!("cuSPARSE {}", form.name()), &reference.epilogue(0.5, 2.0, &c0), got.data());
    }
}

/// The CPU backend's SDDMM against the oracle (no GPU needed): every shape, f32, f16 and f64, with scalars.
#[test]
fn cpu_backend_sddmm_matches_the_oracle() {
    fn check<T: Scalar>() {
        for (name, pattern) in patterns() {
            let pattern: CsMat<T> = gen::convert(&pattern);
            let (m, n) = pattern.shape();
            for (i, &k) in KS.iter().enumerate() {
                let a = dense::<T>(m, k, seed(60 + i as u64));
                let b = dense::<T>(n, k, seed(70 + i as u64));
                let c0 = dense::<T>(pattern.nnz(), 1, seed(80 + i as u64));
                let mut got = c0.clone();
                backend::sddmm(pattern.view(), &a, &b, k, 0.75, -1.0, &mut got);
                let reference = SddmmReference::new(pattern.view(), &a, &b, k).epilogue(0.75, -1.0, &c0);
                assert_matches(&format!("CPU {} {name}, k = {k}", T::DTYPE), &reference, &got);
            }
        }
    }
    check::<f32>();
    check::<f16>();
    check::<f64>();
}
