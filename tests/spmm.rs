//! SpMM on the GPU: every compiled variant against the f64 oracle, awkward shapes, NaN/Inf, bias + ReLU,
//! and the typed errors. Each run's output is poisoned first.

mod common;

use common::{check_spmm, from_triplets, gpu_or_skip, SpmmOracle, POISON};
use half::{bf16, f16};
use sprs::CsMat;
use tilesparse::kernels::compiled_spmm_variants_for;
use tilesparse::spmm::{block_order, check_config, column_tiles_first, splits_rows, spmm_bias_relu};
use tilesparse::{
    gen, spmm, spmm_auto, spmm_in_order, spmm_kernel, spmm_tensor_core, spmm_tensor_core_with, BlockOrder, DType,
    DeviceCsr, DeviceDense, Error, Gpu, RangeSum, RowStats, Scalar, SpmmConfig, SpmmKernel, TensorCoreConfig,
};

/// Runs `config` on A (m x k) * B (k x n) and returns C, poisoned beforehand.
fn run<T: Scalar>(gpu: &Gpu, a: &CsMat<T>, b: &[T], n: usize, config: &SpmmConfig) -> Vec<T> {
    let a_dev = DeviceCsr::upload(gpu, a.view()).unwrap();
    let b_dev = DeviceDense::upload(gpu, a.cols(), n, b).unwrap();
    let mut c_dev = DeviceDense::<T>::zeros(gpu, a.rows(), n).unwrap();
    c_dev.fill(gpu, T::from_f64(POISON)).unwrap();
    spmm(gpu, &a_dev, &b_dev, &mut c_dev, config).unwrap_or_else(|e| panic!("{config}: {e}"));
    c_dev.download(gpu).unwrap()
}

/// B (k x n) of random values rounded to T.
fn dense<T: Scalar>(k: usize, n: usize, seed: u64) -> Vec<T> {
    gen::dense_matrix(k, n, seed).into_iter().map(T::from_f32).collect()
}

/// A (rounded to T) and a random B (k x n) uploaded, C (m x n) allocated, and the oracle on the rounded inputs.
fn upload_problem<T: Scalar>(
    gpu: &Gpu,
    a: &CsMat<f32>,
    n: usize,
    seed: u64,
) -> (SpmmOracle, DeviceCsr<T>, DeviceDense<T>, DeviceDense<T>) {
    let a: CsMat<T> = gen::convert(a);
    let b = dense::<T>(a.cols(), n, seed);
    let oracle = SpmmOracle::new(a.view(), &b, n);
    let a_dev = DeviceCsr::upload(gpu, a.view()).unwrap();
    let b_dev = DeviceDense::upload(gpu, a.cols(), n, &b).unwrap();
    let c_dev = DeviceDense::<T>::zeros(gpu, a.rows(), n).unwrap();
    (oracle, a_dev, b_dev, c_dev)
}

/// Each of `kernels` on A (rounded to T) times B, checked against the oracle on the rounded inputs (computed
/// once). A and B are uploaded once; C is poisoned before every run. Returns how many ran.
fn check_kernels<T: Scalar>(
    gpu: &Gpu,
    what: &str,
    a: &CsMat<f32>,
    n: usize,
    seed: u64,
    kernels: impl IntoIterator<Item = SpmmKernel>,
) -> usize {
    let (oracle, a_dev, b_dev, mut c_dev) = upload_problem::<T>(gpu, a, n, seed);
    let mut ran = 0;
    for kernel in kernels {
        c_dev.fill(gpu, T::from_f64(POISON)).unwrap();
        spmm_kernel(gpu, &a_dev, &b_dev, &mut c_dev, &kernel).unwrap_or_else(|e| panic!("{kernel}: {e}"));
        oracle.check_kernel(&format!("{what} with {kernel}"), &c_dev.download(gpu).unwrap(), &kernel);
        ran += 1;
    }
    ran
}

/// Every compiled variant of T that can run (m, k, n) on A ([`check_kernels`]).
fn check_all_variants<T: Scalar>(gpu: &Gpu, what: &str, a: &CsMat<f32>, n: usize, seed: u64) -> usize {
    let runnable = compiled_spmm_variants_for(T::DTYPE)
        .filter(|config| check_config(config, T::DTYPE, a.rows(), a.cols(), n).is_ok())
        .map(|config| SpmmKernel::Tiled(*config));
    check_kernels::<T>(gpu, what, a, n, seed, runnable)
}

#[test]
fn every_variant_matches_the_oracle_on_sputniks_problem_list() {
    let Some(gpu) = gpu_or_skip("every_variant_matches_the_oracle_on_sputniks_problem_list") else { return };
    // (m, k, n, nnz) as in Sputnik's tests, then its benchmark shapes at 75% sparsity.
    let mut problems: Vec<(String, CsMat<f32>, usize)> = vec![
        ("7x96x40 nnz 333".into(), gen::uniform_random_nnz(7, 96, 333, 1), 40),
        ("11x55x8 nnz 293".into(), gen::uniform_random_nnz(11, 55, 293, 2), 8),
    ];
    for n in [512, 256, 128] {
        problems.push((format!("1024x1024x{n}"), gen::uniform_random(1024, 1024, 0.25, 3 + n as u64), n));
    }
    for m in [2048, 6144, 8192] {
        problems.push((format!("{m}x2048x128"), gen::uniform_random(m, 2048, 0.25, m as u64), 128));
    }
    let total = compiled_spmm_variants_for(DType::F32).count();
    assert!(total > 0);
    for (i, (what, a, n)) in problems.iter().enumerate() {
        let ran = check_all_variants::<f32>(&gpu, what, a, *n, 100 + i as u64);
        assert!(ran > 0, "{what}: no variant ran");
    }
}

#[test]
fn every_variant_handles_awkward_shapes() {
    let Some(gpu) = gpu_or_skip("every_variant_handles_awkward_shapes") else { return };
    let mut cases: Vec<(String, CsMat<f32>)> = Vec::new();
    // Row lengths around the tile size and misaligned row starts exercise the aligner and the residue.
    cases.push(("power-law 300x257".into(), gen::power_law(300, 257, 20.0, 1.5, 11)));
    cases.push(("empty rows".into(), gen::with_empty_rows(&gen::uniform_random(97, 130, 0.3, 12), 0.4, 13)));
    cases.push(("one dense row".into(), gen::with_dense_row(&gen::uniform_random(50, 333, 0.05, 14), 17)));
    cases.push(("nnz = 0".into(), CsMat::zero((33, 40))));
    cases.push(("m = 1".into(), gen::uniform_random(1, 200, 0.5, 15)));
    cases.push(("k = 1".into(), gen::uniform_random(64, 1, 0.7, 16)));
    cases.push(("tall 1000x3".into(), gen::uniform_random(1000, 3, 0.6, 17)));
    cases.push(("wide 5x3000".into(), gen::uniform_random(5, 3000, 0.2, 18)));
    cases.push(("banded 211x211".into(), gen::banded(211, 211, 20, 19)));
    for (what, a) in &cases {
        for n in [1usize, 2, 3, 4, 7, 8, 12, 16, 18, 33, 34, 64, 66, 100, 129] {
            check_all_variants::<f32>(&gpu, &format!("{what}, n = {n}"), a, n, 7 * n as u64);
        }
    }
}

/// Both block orders of the tile kernel (`spmm::column_tiles_first`): a grid within one wave goes column tiles
/// first, one of many waves row blocks first; the same tile, eight column tiles with a partial last one.
#[test]
fn both_block_orders_match_the_oracle() {
    let Some(gpu) = gpu_or_skip("both_block_orders_match_the_oracle") else { return };
    let config: SpmmConfig = "spmm_f32_s1d4_y1k32x128w32_u4_pred".parse().unwrap();
    let sms = gpu.info().sm_count;
    let (n, tiles) = (1000, 8);
    // Whatever the tile's occupancy (an SM holds at most 32 blocks), 10 rows are one wave and 16 x SMs rows at
    // least four, for even or uneven rows.
    for (rows, columns_first) in [(10, true), (16 * sms, false)] {
        for (blocks_per_sm, cv) in [(1, 0.0), (12, 0.2), (32, 2.0)] {
            let order = column_tiles_first(rows, tiles, blocks_per_sm, sms, cv);
            assert_eq!(order, columns_first, "{rows} rows on {sms} SMs, {blocks_per_sm} blocks per SM, cv {cv}");
        }
        let a = gen::uniform_random(rows, 300, 0.1, rows as u64);
        let what = format!("{rows} rows, column tiles first: {columns_first}");
        assert_eq!(check_kernels::<f32>(&gpu, &what, &a, n, 61, [SpmmKernel::Tiled(config)]), 1);
    }
}

/// Every compiled variant of T in every block order it runs (`spmm_in_order`; the SM-affine order on the
/// launch-bounded variants, a typed error on the others) against the oracle, each twice in a row (the SM-affine
/// order's counters must be back at zero for the second launch), on A with `n` columns; the orders must give the
/// same bits. Returns how many launches ran.
fn check_every_order<T: Scalar>(gpu: &Gpu, what: &str, a: &CsMat<f32>, n: usize, seed: u64) -> usize {
    let (oracle, a_dev, b_dev, mut c_dev) = upload_problem::<T>(gpu, a, n, seed);
    let mut ran = 0;
    for config in compiled_spmm_variants_for(T::DTYPE) {
        if check_config(config, T::DTYPE, a.rows(), a.cols(), n).is_err() {
            continue;
        }
        let mut first: Option<Vec<T>> = None;
        for order in BlockOrder::ALL {
            if order == BlockOrder::SmAffine && !config.claims_blocks() {
                let err = spmm_in_order(gpu, &a_dev, &b_dev, &mut c_dev, config, order).unwrap_err();
                assert!(matches!(err, Error::Unsupported { .. }), "{what}: {config} {order:?}: {err}");
                continue;
            }
            for launch in 0..2 {
                c_dev.fill(gpu, T::from_f64(POISON)).unwrap();
                spmm_in_order(gpu, &a_dev, &b_dev, &mut c_dev, config, order)
                    .unwrap_or_else(|e| panic!("{what}: {config} {order:?}: {e}"));
                let c = c_dev.download(gpu).unwrap();
                let label = format!("{what} with {config}, {order:?}, launch {launch}");
                oracle.check_kernel(&label, &c, &SpmmKernel::Tiled(*config));
                match &first {
                    None => first = Some(c),
                    Some(f) => assert!(
                        f.iter().zip(&c).all(|(x, y)| x.to_f64().to_bits() == y.to_f64().to_bits()),
                        "{label}: bits differ from {:?}",
                        BlockOrder::ALL[0]
                    ),
                }
                ran += 1;
            }
        }
    }
    ran
}

/// The SM-affine block order (`cuda/spmm/block_order.cuh`) and the other two on every compiled variant of each
/// dtype: several column tiles with a partial last one, odd m, empty rows, split rows (the variants that walk
/// pieces, in the two grid orders), and shapes whose counter counts differ from one launch to the next. The
/// library's own choice takes the SM-affine order for two weight-like problems and matches the oracle.
#[test]
fn every_block_order_matches_the_oracle() {
    let Some(gpu) = gpu_or_skip("every_block_order_matches_the_oracle") else { return };
    let cases: Vec<(String, CsMat<f32>, usize)> = vec![
        ("uniform 301x200".into(), gen::uniform_random(301, 200, 0.1, 91), 520),
        ("empty rows 97x130".into(), gen::with_empty_rows(&gen::uniform_random(97, 130, 0.3, 92), 0.4, 93), 136),
        ("one tile 40x64".into(), gen::uniform_random(40, 64, 0.3, 94), 32),
        ("split rows 3000x5000".into(), skewed_matrix(3000, 5000, 95), 128),
    ];
    let mut ran = 0;
    for (what, a, n) in &cases {
        ran += check_every_order::<f32>(&gpu, what, a, *n, 96);
        ran += check_every_order::<f16>(&gpu, &format!("{what} f16"), a, *n, 97);
        ran += check_every_order::<bf16>(&gpu, &format!("{what} bf16"), a, *n, 98);
    }
    assert!(ran > 0);

    // Rows of 30 and 150 entries (cv 0.67): the two-row tile. A third of the rows 600 long, the rest 60 (cv
    // 1.06): the eight-row tile.
    automatic_sm_affine(
        &gpu,
        (1024, 768, 1024),
        |r| if r % 2 == 0 { 30 } else { 150 },
        "spmm_f32_s1d4_y2k16x128w16_u4_nopred_lb16",
        99,
    );
    automatic_sm_affine(
        &gpu,
        (896, 2048, 1024),
        |r| if r % 3 == 0 { 600 } else { 60 },
        "spmm_f32_s1d2_y8k32x64w32_u4_nopred_lb2",
        101,
    );
}

/// The library's own choice for a weight-like m x k matrix with rows of `len(r)` entries at n columns is
/// `expected`, in the SM-affine order, and it matches the oracle three launches in a row.
fn automatic_sm_affine(
    gpu: &Gpu,
    (m, k, n): (usize, usize, usize),
    len: impl Fn(usize) -> usize,
    expected: &str,
    seed: u64,
) {
    let mut rng = gen::Rng::new(seed);
    let mut entries = Vec::new();
    for r in 0..m {
        let len = len(r);
        let start = (r * 37) % (k - len);
        entries.extend((0..len).map(|j| (r, start + j, rng.range(-1.0, 1.0) as f32)));
    }
    let a = from_triplets(m, k, &entries);
    let stats = RowStats::from_indptr(&a.indptr().to_proper());
    let config: SpmmConfig = expected.parse().unwrap();
    assert_eq!(SpmmConfig::select_with_stats(m, k, n, &stats, DType::F32), config);
    // Both tiles are launch-bounded: their blocks per SM are their min_occupancy.
    let order = block_order(&config, &stats, m, n, config.min_occupancy as usize, gpu.info().sm_count);
    assert_eq!(order, BlockOrder::SmAffine, "{expected}: cv {:.2}, mean {:.0}", stats.cv, stats.mean);
    for launch in 0..3 {
        assert_eq!(
            check_kernels::<f32>(
                gpu,
                &format!("SM-affine {expected}, launch {launch}"),
                &a,
                n,
                seed + 1,
                [SpmmKernel::Tiled(config)]
            ),
            1
        );
    }
}

#[test]
fn a_real_matrix_matches_the_oracle() {
    let Some(gpu) = gpu_or_skip("a_real_matrix_matches_the_oracle") else { return };
    for file in ["utm300.mtx.gz", "west0479.mtx.gz", "well1850.mtx.gz"] {
        let path = common::data_path(file);
        let a = tilesparse::suite::load_matrix(&path).unwrap();
        for n in [32, 100] {
            check_all_variants::<f32>(&gpu, &format!("{file}, n = {n}"), &a, n, 5);
        }
    }
}

/// NaN and Inf propagate, and the entries the memory aligner masks never touch B.
fn nan_and_inf_case<T: Scalar>(gpu: &Gpu) {
    let (k, n) = (300, 32);
    // Row 0 touches column 0 only; row 1 starts at offset 1 (misaligned for vector widths 2 and 4) and has
    // 70 entries (two full tiles plus residue) that avoid columns 0 and 1. Row 2 holds a NaN value.
    let mut entries = vec![(0, 0, 0.5f32)];
    entries.extend((0..70).map(|j| (1, 2 + 3 * j, 0.25f32 * (j % 5) as f32 - 0.5)));
    entries.extend((0..40).map(|j| (2, 1 + 2 * j, if j == 13 { f32::NAN } else { 1.0 })));
    entries.extend((0..45).map(|j| (3, 1 + 6 * j, 1.0f32)));
    let a: CsMat<T> = gen::convert(&from_triplets(4, k, &entries));
    let mut b = dense::<T>(k, n, 3);
    b[..n].fill(T::from_f32(f32::NAN)); // B row 0: only row 0 of C may become NaN
    b[n + 5] = T::from_f32(f32::INFINITY); // B row 1, column 5: C[3][5] is +Inf, C[2][5] is NaN
    let oracle = SpmmOracle::new(a.view(), &b, n);
    for config in compiled_spmm_variants_for(T::DTYPE) {
        if check_config(config, T::DTYPE, 4, k, n).is_err() {
            continue;
        }
        let c: Vec<f64> = run(gpu, &a, &b, n, config).iter().map(|v| v.to_f64()).collect();
        oracle.check(&format!("NaN/Inf with {config}"), &c);
        assert!(c[..n].iter().all(|v| v.is_nan()), "{config}: row 0 must be NaN");
        assert!(
            c[n..2 * n].iter().all(|v| v.is_finite()),
            "{config}: row 1 picked up a masked entry: {:?}",
            &c[n..2 * n]
        );
        assert!(c[2 * n..3 * n].iter().all(|v| v.is_nan()), "{config}: the NaN in row 2 must propagate");
        assert_eq!(c[3 * n + 5], f64::INFINITY, "{config}: Inf must propagate");
    }
}

#[test]
fn nan_and_inf_propagate_and_masked_entries_do_not_leak() {
    let Some(gpu) = gpu_or_skip("nan_and_inf_propagate_and_masked_entries_do_not_leak") else { return };
    nan_and_inf_case::<f32>(&gpu);
    nan_and_inf_case::<f16>(&gpu);
    nan_and_inf_case::<bf16>(&gpu);
}

#[test]
fn bias_relu_epilogue_matches_and_keeps_nan() {
    let Some(gpu) = gpu_or_skip("bias_relu_epilogue_matches_and_keeps_nan") else { return };
    let (m, k, n) = (64, 128, 48);
    let mut a = gen::uniform_random(m, k, 0.2, 21);
    a.data_mut()[0] = f32::NAN; // first entry of row 0 (row 0 is not empty at this density)
    let b = gen::dense_matrix(k, n, 22);
    let bias: Vec<f32> = (0..m).map(|i| (i as f32 - 32.0) * 0.05).collect();
    let want_pre = tilesparse::cpu::oracle::spmm(a.view(), &b, n);
    let a_dev = DeviceCsr::upload(&gpu, a.view()).unwrap();
    let b_dev = DeviceDense::upload(&gpu, k, n, &b).unwrap();
    let bias_dev = gpu.stream().clone_htod(&bias).unwrap();
    for config in compiled_spmm_variants_for(DType::F32) {
        if check_config(config, DType::F32, m, k, n).is_err() {
            continue;
        }
        let mut c_dev = DeviceDense::<f32>::zeros(&gpu, m, n).unwrap();
        c_dev.fill(&gpu, POISON as f32).unwrap();
        spmm_bias_relu(&gpu, &a_dev, &b_dev, &bias_dev, &mut c_dev, config).unwrap();
        check_bias_relu(&config.to_string(), &want_pre, &bias, n, &c_dev.download(&gpu).unwrap());
    }
}

/// C = ReLU(A B + bias) against the f64 oracle of A B (`want_pre`): NaN stays NaN, Inf must match exactly,
/// finite values within 1e-4 relative.
fn check_bias_relu(what: &str, want_pre: &[f64], bias: &[f32], n: usize, got: &[f32]) {
    for (idx, (&pre, &got)) in want_pre.iter().zip(got).enumerate() {
        let (i, j) = (idx / n, idx % n);
        let want = pre + bias[i] as f64;
        let got = got as f64;
        if want.is_nan() {
            assert!(got.is_nan(), "{what}: bias ({i},{j}) NaN became {got}");
        } else {
            let want = want.max(0.0);
            assert!(
                got == want || (got - want).abs() <= 1e-4 * (1.0 + want.abs()),
                "{what}: bias + ReLU ({i},{j}) got {got} want {want}"
            );
        }
    }
}

#[test]
fn auto_picks_a_runnable_config_for_every_n() {
    let Some(gpu) = gpu_or_skip("auto_picks_a_runnable_config_for_every_n") else { return };
    let a = gen::uniform_random(77, 90, 0.3, 31);
    let a_dev = DeviceCsr::upload(&gpu, a.view()).unwrap();
    for n in 1..=70 {
        let b = gen::dense_matrix(90, n, n as u64);
        let b_dev = DeviceDense::upload(&gpu, 90, n, &b).unwrap();
        let mut c_dev = DeviceDense::<f32>::zeros(&gpu, 77, n).unwrap();
        c_dev.fill(&gpu, POISON as f32).unwrap();
        let used = spmm_auto(&gpu, &a_dev, &b_dev, &mut c_dev).unwrap();
        check_spmm(&format!("auto n = {n} ({used})"), a.view(), &b, n, &c_dev.download(&gpu).unwrap());
    }
}

#[test]
fn bad_problems_get_typed_errors() {
    let Some(gpu) = gpu_or_skip("bad_problems_get_typed_errors") else { return };
    let a = gen::uniform_random(16, 24, 0.3, 41);
    let a_dev = DeviceCsr::upload(&gpu, a.view()).unwrap();
    let b18 = DeviceDense::upload(&gpu, 24, 18, &gen::dense_matrix(24, 18, 1)).unwrap();
    let mut c18 = DeviceDense::<f32>::zeros(&gpu, 16, 18).unwrap();
    let float4: SpmmConfig = "spmm_f32_s4d4_y4k32x32w8_u4_pred".parse().unwrap();
    // n = 18: float4 rows of B would be misaligned; the error names a narrower config.
    match spmm(&gpu, &a_dev, &b18, &mut c18, &float4) {
        Err(Error::Unsupported { reason, .. }) => assert!(reason.contains("d2"), "{reason}"),
        other => panic!("expected Unsupported, got {other:?}"),
    }
    // No predicates with n % block_items_x != 0.
    let nopred: SpmmConfig = "spmm_f32_s1d1_y1k32x32w32_u4_nopred".parse().unwrap();
    assert!(matches!(spmm(&gpu, &a_dev, &b18, &mut c18, &nopred), Err(Error::Unsupported { .. })));
    // Shapes that do not fit.
    let b_wrong = DeviceDense::upload(&gpu, 23, 18, &gen::dense_matrix(23, 18, 2)).unwrap();
    assert!(matches!(spmm(&gpu, &a_dev, &b_wrong, &mut c18, &nopred), Err(Error::ShapeMismatch(_))));
    let mut c_wrong = DeviceDense::<f32>::zeros(&gpu, 15, 18).unwrap();
    assert!(matches!(spmm(&gpu, &a_dev, &b18, &mut c_wrong, &nopred), Err(Error::ShapeMismatch(_))));
    // Valid but not compiled: the error lists compiled neighbours.
    let odd = SpmmConfig { residue_unroll: 2, ..float4 };
    match spmm(&gpu, &a_dev, &b18, &mut c18, &odd) {
        Err(Error::NotCompiled { nearest, .. }) => assert!(nearest.contains("spmm_f32_"), "{nearest}"),
        other => panic!("expected NotCompiled, got {other:?}"),
    }
    // Invalid: block_width 3.
    let invalid = SpmmConfig { block_width: 3, ..float4 };
    assert!(matches!(spmm(&gpu, &a_dev, &b18, &mut c18, &invalid), Err(Error::InvalidConfig { .. })));
    // Bad CSR never reaches the device.
    let bad = DeviceCsr::<f32>::from_parts(&gpu, 2, 4, &[0, 2, 3], &[3, 1, 0], &[1.0, 2.0, 3.0]);
    assert!(matches!(bad, Err(Error::InvalidCsr(tilesparse::CsrError::Unsorted { .. }))));
    let oob = DeviceCsr::<f32>::from_parts(&gpu, 2, 4, &[0, 1, 2], &[1, 4], &[1.0, 2.0]);
    assert!(matches!(oob, Err(Error::InvalidCsr(tilesparse::CsrError::ColumnOutOfRange { .. }))));
}

/// Small enough to run under compute-sanitizer (memcheck, racecheck) in run-all.sh --sanitize: every variant,
/// misaligned row starts, full tiles plus residues, predicated columns.
#[test]
fn sanitizer_spmm_every_variant_small() {
    let Some(gpu) = gpu_or_skip("sanitizer_spmm_every_variant_small") else { return };
    let a = gen::power_law(40, 150, 30.0, 1.5, 51);
    for n in [36, 64, 264] {
        check_all_variants::<f32>(&gpu, &format!("sanitizer n = {n}"), &a, n, 52);
        check_all_variants::<f16>(&gpu, &format!("sanitizer f16 n = {n}"), &a, n, 53);
        check_all_variants::<bf16>(&gpu, &format!("sanitizer bf16 n = {n}"), &a, n, 54);
    }
    // The row split (pieces, partial rows, fix-up) under the sanitizer too.
    let skewed = skewed_matrix(300, 2500, 55);
    check_all_split::<f32>(&gpu, "sanitizer split", &skewed, 36, 56);
    check_all_split::<f16>(&gpu, "sanitizer split f16", &skewed, 36, 57);
    check_all_split::<bf16>(&gpu, "sanitizer split bf16", &skewed, 36, 58);
    // Every block order, the SM-affine one's claims and counter reset included.
    check_every_order::<f32>(&gpu, "sanitizer orders", &a, 264, 59);
    check_every_order::<f16>(&gpu, "sanitizer orders f16", &skewed, 136, 60);
}

/// A graph-like m x k matrix: rows of 0-4 entries, and every 50th row long (136 to ~k/2 entries, from one
/// piece plus a residue up to many pieces), so that `spmm` splits the long rows into pieces.
fn skewed_matrix(m: usize, k: usize, seed: u64) -> CsMat<f32> {
    let mut rng = gen::Rng::new(seed);
    let mut entries = Vec::new();
    for r in 0..m {
        if r % 50 == 7 {
            let len = (136 + (r / 50) * 450).min(k / 2);
            entries.extend((0..len).map(|j| (r, 2 * j + r % 2, rng.range(-1.0, 1.0) as f32)));
        } else {
            entries.extend((0..r % 5).map(|j| (r, (r * 13 + j * 101) % k, rng.range(-1.0, 1.0) as f32)));
        }
    }
    from_triplets(m, k, &entries)
}

/// Like `check_all_variants`, and asserts that every variant it ran split the rows if it walks pieces, and
/// did not if it does not (the launch-bounded ones, `SpmmConfig::walks_pieces`), and that some did.
fn check_all_split<T: Scalar>(gpu: &Gpu, what: &str, a: &CsMat<f32>, n: usize, seed: u64) -> usize {
    let a_t: CsMat<T> = gen::convert(a);
    let a_dev = DeviceCsr::upload(gpu, a_t.view()).unwrap();
    let mut split = 0;
    for config in compiled_spmm_variants_for(T::DTYPE) {
        if check_config(config, T::DTYPE, a.rows(), a.cols(), n).is_ok() {
            let splits = splits_rows(gpu, &a_dev, n, config).unwrap();
            assert_eq!(splits, config.walks_pieces(), "{what}: {config} split the rows: {splits}");
            split += usize::from(splits);
        }
    }
    assert!(split > 0, "{what}: no variant split the rows");
    let ran = check_all_variants::<T>(gpu, what, a, n, seed);
    assert!(ran > 0, "{what}: no variant ran");
    ran
}

/// The row split (src/spmm/split.rs) on every variant: pieces of long rows write partial rows that the fix-up
/// adds in order; misaligned piece starts, a NaN in a middle piece, an Inf in B reached only through long rows,
/// bias + ReLU applied once (by the fix-up) on split rows, and the same bits on a second run.
#[test]
fn split_rows_match_the_oracle_on_every_variant() {
    let Some(gpu) = gpu_or_skip("split_rows_match_the_oracle_on_every_variant") else { return };
    let (m, k) = (3000, 5000);
    let a = skewed_matrix(m, k, 71);
    for n in [40, 128] {
        check_all_split::<f32>(&gpu, &format!("split n = {n}"), &a, n, 72);
        check_all_split::<f16>(&gpu, &format!("split f16 n = {n}"), &a, n, 73);
        check_all_split::<bf16>(&gpu, &format!("split bf16 n = {n}"), &a, n, 74);
    }

    // A NaN in the third piece of the first long row; an Inf in B at (c, 5) for a column c that only long rows
    // use (odd columns past the short rows' reach), so it reaches C only through partial rows.
    let mut a = a;
    let lens: Vec<usize> = a.outer_iterator().map(|r| r.nnz()).collect();
    let nan_row = (0..m).find(|&r| lens[r] > 3 * 128).unwrap();
    let nan_at = a.indptr().outer_inds_sz(nan_row).start + 2 * 128 + 5;
    a.data_mut()[nan_at] = f32::NAN;
    let n = 40;
    let users =
        |c: usize| -> Vec<usize> { (0..m).filter(|&r| a.outer_view(r).unwrap().indices().contains(&c)).collect() };
    let inf_col = (1..k).step_by(2).rev().find(|&c| {
        let u = users(c);
        !u.is_empty() && u.iter().all(|&r| lens[r] > 128)
    });
    let inf_col = inf_col.expect("a column used by long rows only");
    let mut b = dense::<f32>(k, n, 75);
    b[inf_col * n + 5] = f32::INFINITY;
    let inf_rows: Vec<usize> = users(inf_col).into_iter().filter(|&r| r != nan_row).collect();
    assert!(!inf_rows.is_empty());
    let oracle = SpmmOracle::new(a.view(), &b, n);
    let bias: Vec<f32> = (0..m).map(|i| ((i % 7) as f32 - 3.0) * 0.25).collect();
    let want_pre = tilesparse::cpu::oracle::spmm(a.view(), &b, n);
    let a_dev = DeviceCsr::upload(&gpu, a.view()).unwrap();
    let b_dev = DeviceDense::upload(&gpu, k, n, &b).unwrap();
    let bias_dev = gpu.stream().clone_htod(&bias).unwrap();
    let mut c_dev = DeviceDense::<f32>::zeros(&gpu, m, n).unwrap();
    for config in compiled_spmm_variants_for(DType::F32) {
        if check_config(config, DType::F32, m, k, n).is_err() {
            continue;
        }
        assert_eq!(splits_rows(&gpu, &a_dev, n, config).unwrap(), config.walks_pieces(), "{config}");
        c_dev.fill(&gpu, POISON as f32).unwrap();
        spmm(&gpu, &a_dev, &b_dev, &mut c_dev, config).unwrap();
        let c = c_dev.download(&gpu).unwrap();
        oracle.check(&format!("split NaN/Inf with {config}"), &c);
        assert!(c[nan_row * n..(nan_row + 1) * n].iter().all(|v| v.is_nan()), "{config}: the NaN must propagate");
        assert!(inf_rows.iter().all(|&r| c[r * n + 5].is_infinite()), "{config}: the Inf must propagate");
        c_dev.fill(&gpu, POISON as f32).unwrap();
        spmm(&gpu, &a_dev, &b_dev, &mut c_dev, config).unwrap();
        let again = c_dev.download(&gpu).unwrap();
        assert!(
            c.iter().zip(&again).all(|(x, y)| x.to_bits() == y.to_bits()),
            "{config}: a second run gave different bits"
        );

        c_dev.fill(&gpu, POISON as f32).unwrap();
        spmm_bias_relu(&gpu, &a_dev, &b_dev, &bias_dev, &mut c_dev, config).unwrap();
        check_bias_relu(&format!("split {config}"), &want_pre, &bias, n, &c_dev.download(&gpu).unwrap());
    }
}

/// Every compiled f16 and bf16 variant against the oracle on the rounded inputs, over Sputnik's shapes and the
/// awkward ones.
fn half_variants_case<T: Scalar>(gpu: &Gpu) {
    let what = T::DTYPE;
    let total = compiled_spmm_variants_for(what).count();
    assert!(total > 0, "no {what} variants compiled");
    let problems: Vec<(String, CsMat<f32>, usize)> = vec![
        ("7x96x40 nnz 333".into(), gen::uniform_random_nnz(7, 96, 333, 1), 40),
        ("11x55x8 nnz 293".into(), gen::uniform_random_nnz(11, 55, 293, 2), 8),
        ("1024x1024x256".into(), gen::uniform_random(1024, 1024, 0.25, 3), 256),
        ("2048x2048x128".into(), gen::uniform_random(2048, 2048, 0.25, 4), 128),
        ("power-law 300x257".into(), gen::power_law(300, 257, 20.0, 1.5, 11), 0),
        ("empty rows".into(), gen::with_empty_rows(&gen::uniform_random(97, 130, 0.3, 12), 0.4, 13), 0),
        ("one dense row".into(), gen::with_dense_row(&gen::uniform_random(50, 333, 0.05, 14), 17), 0),
        ("nnz = 0".into(), CsMat::zero((33, 40)), 0),
        ("m = 1".into(), gen::uniform_random(1, 200, 0.5, 15), 0),
        ("k = 1".into(), gen::uniform_random(64, 1, 0.7, 16), 0),
    ];
    for (i, (name, a, n)) in problems.iter().enumerate() {
        let ns: Vec<usize> = if *n > 0 { vec![*n] } else { vec![1, 3, 8, 18, 34, 66, 100, 256] };
        for n in ns {
            check_all_variants::<T>(gpu, &format!("{what} {name}, n = {n}"), a, n, 200 + i as u64);
        }
    }
}

#[test]
fn every_half_variant_matches_the_oracle() {
    let Some(gpu) = gpu_or_skip("every_half_variant_matches_the_oracle") else { return };
    half_variants_case::<f16>(&gpu);
    half_variants_case::<bf16>(&gpu);
}

/// Sputnik's hidden fp16 limits, each of which this test would trip: column indices past 32767 (Sputnik
/// stores 16-bit indices), odd row lengths (Sputnik needs even ones), and n = 18, 34, 66 (Sputnik faults with
/// a misaligned address): here auto selection narrows the vector width, and an explicit wide config is a
/// typed error, never a fault.
fn sputnik_limits_case<T: Scalar>(gpu: &Gpu) {
    let a = gen::uniform_random(24, 40_000, 0.0030125, 61); // 120 or 121 per row, columns up to 39999
    assert!(a.indices().iter().any(|&c| c > 32_767));
    assert!(a.outer_iterator().any(|r| r.nnz() % 2 == 1), "want odd row lengths");
    check_all_variants::<T>(gpu, &format!("{} k = 40000", T::DTYPE), &a, 64, 62);
    let a: CsMat<T> = gen::convert(&a);
    let a_dev = DeviceCsr::upload(gpu, a.view()).unwrap();
    for n in [18usize, 34, 66] {
        let b = dense::<T>(40_000, n, n as u64);
        let b_dev = DeviceDense::upload(gpu, 40_000, n, &b).unwrap();
        let mut c_dev = DeviceDense::<T>::zeros(gpu, 24, n).unwrap();
        c_dev.fill(gpu, T::from_f64(POISON)).unwrap();
        let used = spmm_auto(gpu, &a_dev, &b_dev, &mut c_dev).unwrap();
        match used {
            SpmmKernel::Tiled(c) => assert!(n % c.dense_vector_width as usize == 0, "{used} for n = {n}"),
            SpmmKernel::TensorCore(_) => assert!(n % 8 == 0, "{used} for n = {n}"),
        }
        SpmmOracle::new(a.view(), &b, n).check_kernel(
            &format!("auto n = {n} ({used})"),
            &c_dev.download(gpu).unwrap(),
            &used,
        );
        let wide = compiled_spmm_variants_for(T::DTYPE).find(|c| c.dense_vector_width == 8).expect("an 8-wide variant");
        assert!(
            matches!(spmm(gpu, &a_dev, &b_dev, &mut c_dev, wide), Err(Error::Unsupported { .. })),
            "{wide}, n = {n}"
        );
    }
}

#[test]
fn half_lifts_sputniks_limits() {
    let Some(gpu) = gpu_or_skip("half_lifts_sputniks_limits") else { return };
    sputnik_limits_case::<f16>(&gpu);
    sputnik_limits_case::<bf16>(&gpu);
}

/// Every tensor-core variant of T on A ([`check_kernels`]).
fn check_tensor_core<T: Scalar>(gpu: &Gpu, what: &str, a: &CsMat<f32>, n: usize, seed: u64) -> usize {
    check_kernels::<T>(gpu, what, a, n, seed, TensorCoreConfig::all(T::DTYPE).into_iter().map(SpmmKernel::TensorCore))
}

/// A with the rows in `cleared` emptied.
fn rows_cleared(a: &CsMat<f32>, cleared: std::ops::Range<usize>) -> CsMat<f32> {
    let entries: Vec<(usize, usize, f32)> =
        a.iter().filter(|&(_, (r, _))| !cleared.contains(&r)).map(|(&v, (r, c))| (r, c, v)).collect();
    from_triplets(a.rows(), a.cols(), &entries)
}

/// The tensor-core SpMM (f16, bf16: both window heights; f32 in 3xTF32: the wide kernel), on awkward shapes: m
/// not a multiple of 16 or 64, empty rows, 16-row tiles of a 64-row window with no entries, a whole 64-row
/// window without entries (no k-blocks) between full ones, one dense row (a window of many k-blocks), nnz = 0,
/// m = 1, k = 1, tall and wide, banded, power law; n from 8 (one tile, most of a warp's columns past n) to 264
/// (column blocks partly past n).
#[test]
fn tensor_core_matches_the_oracle_on_awkward_shapes() {
    let Some(gpu) = gpu_or_skip("tensor_core_matches_the_oracle_on_awkward_shapes") else { return };
    let cases: Vec<(&str, CsMat<f32>)> = vec![
        ("uniform 100x300", gen::uniform_random(100, 300, 0.1, 61)),
        ("power-law 300x257", gen::power_law(300, 257, 20.0, 1.5, 62)),
        ("empty rows", gen::with_empty_rows(&gen::uniform_random(97, 130, 0.3, 63), 0.4, 64)),
        ("one dense row", gen::with_dense_row(&gen::uniform_random(50, 2000, 0.01, 65), 17)),
        ("nnz = 0", CsMat::zero((33, 40))),
        ("m = 1", gen::uniform_random(1, 200, 0.5, 66)),
        ("k = 1", gen::uniform_random(64, 1, 0.7, 67)),
        ("tall 1000x3", gen::uniform_random(1000, 3, 0.6, 68)),
        ("wide 5x3000", gen::uniform_random(5, 3000, 0.2, 69)),
        ("banded 211x211", gen::banded(211, 211, 20, 70)),
        ("dense 48x64", gen::uniform_random(48, 64, 1.0, 71)),
        ("130 rows, rows 16-47 empty", rows_cleared(&gen::uniform_random(130, 500, 0.2, 72), 16..48)),
        ("300 rows, rows 128-191 empty", rows_cleared(&gen::uniform_random(300, 700, 0.1, 73), 128..192)),
    ];
    for (what, a) in &cases {
        for n in [8usize, 16, 40, 64, 136, 264] {
            let variants = TensorCoreConfig::all(DType::F16).len();
            assert_eq!(check_tensor_core::<f16>(&gpu, &format!("{what}, n = {n}"), a, n, 3 * n as u64), variants);
            assert_eq!(check_tensor_core::<bf16>(&gpu, &format!("{what}, n = {n}"), a, n, 5 * n as u64), variants);
            let f32_variants = TensorCoreConfig::all(DType::F32).len();
            assert_eq!(check_tensor_core::<f32>(&gpu, &format!("{what}, n = {n}"), a, n, 7 * n as u64), f32_variants);
        }
    }
}

/// NaN and Inf in the tensor-core SpMM: a NaN value of A reaches its row only; NaN and Inf in B reach exactly
/// the rows that store their column, although the other rows of the same window multiply the same B rows by
/// padding zeros on the tensor cores (a warp that sees them redoes its tile exactly); a stored zero times Inf is
/// NaN, as in the sparse product. Row 39's 600 entries give the 64-row window enough k-blocks that the wide
/// kernels split them into ranges (partial tiles added in clusters or by the fix-up), so NaN and Inf also cross
/// that path; a second run, with the fix-up, gives the same bits.
fn tensor_core_nan_inf_case<T: Scalar>(gpu: &Gpu) {
    let (m, k, n) = (40, 1000, 72);
    let mut entries = vec![(0, 0, 0.5f32)];
    entries.extend((0..70).map(|j| (1, 2 + 3 * j, 0.25f32 * (j % 5) as f32 - 0.5)));
    entries.extend((0..40).map(|j| (2, 1 + 2 * j, if j == 13 { f32::NAN } else { 1.0 })));
    entries.extend((0..45).map(|j| (3, 1 + 6 * j, 1.0f32)));
    entries.push((4, 7, 0.0)); // a stored zero: times B's Inf at (7, 9) it is NaN
    entries.extend((5..m).flat_map(|r| (0..6).map(move |j| (r, 10 + (r * 11 + j * 29) % 280, 0.75f32))));
    entries.extend((300..900).map(|c| (m - 1, c, 0.5f32)));
    let a = from_triplets(m, k, &entries);
    let mut b = gen::dense_matrix(k, n, 72);
    b[..n].fill(f32::NAN); // B row 0: only row 0 of C becomes NaN
    b[n + 5] = f32::INFINITY; // B row 1, column 5: C[3][5] is +Inf, C[2][5] is NaN
    b[7 * n + 9] = f32::INFINITY;
    let a_t: CsMat<T> = gen::convert(&a);
    let b_t: Vec<T> = b.iter().map(|&v| T::from_f32(v)).collect();
    let oracle = SpmmOracle::new(a_t.view(), &b_t, n);
    let a_dev = DeviceCsr::upload(gpu, a_t.view()).unwrap();
    let b_dev = DeviceDense::upload(gpu, k, n, &b_t).unwrap();
    let mut c_dev = DeviceDense::<T>::zeros(gpu, m, n).unwrap();
    for config in TensorCoreConfig::all(T::DTYPE) {
        c_dev.fill(gpu, T::from_f64(POISON)).unwrap();
        spmm_tensor_core(gpu, &a_dev, &b_dev, &mut c_dev, &config).unwrap();
        let c: Vec<f64> = c_dev.download(gpu).unwrap().iter().map(|v| v.to_f64()).collect();
        oracle.check_kernel(&format!("tensor-core NaN/Inf with {config}"), &c, &SpmmKernel::TensorCore(config));
        assert!(c[..n].iter().all(|v| v.is_nan()), "{config}: row 0 must be NaN");
        assert!(c[n..2 * n].iter().all(|v| v.is_finite()), "{config}: row 1 picked up B's NaN row");
        assert!(c[2 * n..3 * n].iter().all(|v| v.is_nan()), "{config}: the NaN in row 2 must propagate");
        assert_eq!(c[3 * n + 5], f64::INFINITY, "{config}: Inf must propagate");
        assert!(c[4 * n + 9].is_nan(), "{config}: a stored zero times Inf is NaN");
        assert!(c[5 * n..].iter().all(|v| v.is_finite()), "{config}: rows 5.. store no column of B's NaN/Inf");
        // Again with the split ranges added by the fix-up launch (the first run added them in clusters where
        // the device has them): the same bits.
        c_dev.fill(gpu, T::from_f64(POISON)).unwrap();
        spmm_tensor_core_with(gpu, &a_dev, &b_dev, &mut c_dev, &config, RangeSum::FixUp).unwrap();
        let again: Vec<f64> = c_dev.download(gpu).unwrap().iter().map(|v| v.to_f64()).collect();
        assert!(c.iter().zip(&again).all(|(x, y)| x.to_bits() == y.to_bits()), "{config}: a second run differs");
    }
}

#[test]
fn tensor_core_propagates_nan_and_inf_exactly() {
    let Some(gpu) = gpu_or_skip("tensor_core_propagates_nan_and_inf_exactly") else { return };
    tensor_core_nan_inf_case::<f16>(&gpu);
    tensor_core_nan_inf_case::<bf16>(&gpu);
    tensor_core_nan_inf_case::<f32>(&gpu);
}

#[test]
fn tensor_core_refuses_what_it_cannot_run() {
    let Some(gpu) = gpu_or_skip("tensor_core_refuses_what_it_cannot_run") else { return };
    let a = gen::uniform_random(20, 30, 0.3, 81);
    let a16: CsMat<f16> = gen::convert(&a);
    let a_dev = DeviceCsr::upload(&gpu, a16.view()).unwrap();
    let config = TensorCoreConfig { dtype: DType::F16, window: 16, tiles_n: 4 };
    // n = 60 is not a multiple of 8.
    let b = DeviceDense::upload(&gpu, 30, 60, &dense::<f16>(30, 60, 82)).unwrap();
    let mut c = DeviceDense::<f16>::zeros(&gpu, 20, 60).unwrap();
    let r = spmm_tensor_core(&gpu, &a_dev, &b, &mut c, &config);
    assert!(matches!(r, Err(Error::Unsupported { .. })), "n = 60: {r:?}");
    // Shapes that do not match.
    let b = DeviceDense::upload(&gpu, 31, 64, &dense::<f16>(31, 64, 83)).unwrap();
    let mut c = DeviceDense::<f16>::zeros(&gpu, 20, 64).unwrap();
    let r = spmm_tensor_core(&gpu, &a_dev, &b, &mut c, &config);
    assert!(matches!(r, Err(Error::ShapeMismatch(_))), "k mismatch: {r:?}");
    // f32 has the wide 64-column kernel only; a bf16 config on f16 operands is invalid.
    let a32 = DeviceCsr::upload(&gpu, a.view()).unwrap();
    let b32 = DeviceDense::upload(&gpu, 30, 64, &dense::<f32>(30, 64, 84)).unwrap();
    let mut c32 = DeviceDense::<f32>::zeros(&gpu, 20, 64).unwrap();
    for (window, tiles_n) in [(16, 4), (16, 8), (64, 16)] {
        let f32_config = TensorCoreConfig { dtype: DType::F32, window, tiles_n };
        let r = spmm_tensor_core(&gpu, &a32, &b32, &mut c32, &f32_config);
        assert!(matches!(r, Err(Error::InvalidConfig { .. })), "{f32_config}: {r:?}");
    }
    let b32_odd = DeviceDense::upload(&gpu, 30, 60, &dense::<f32>(30, 60, 86)).unwrap();
    let mut c32_odd = DeviceDense::<f32>::zeros(&gpu, 20, 60).unwrap();
    let f32_wide = TensorCoreConfig { dtype: DType::F32, window: 64, tiles_n: 8 };
    let r = spmm_tensor_core(&gpu, &a32, &b32_odd, &mut c32_odd, &f32_wide);
    assert!(matches!(r, Err(Error::Unsupported { .. })), "f32, n = 60: {r:?}");
    let b = DeviceDense::upload(&gpu, 30, 64, &dense::<f16>(30, 64, 85)).unwrap();
    let bf = TensorCoreConfig { dtype: DType::Bf16, window: 16, tiles_n: 4 };
    let r = spmm_tensor_core(&gpu, &a_dev, &b, &mut c, &bf);
    assert!(matches!(r, Err(Error::InvalidConfig { .. })), "bf16 config, f16 operands: {r:?}");
    // Windows of a height no kernel has.
    let odd = TensorCoreConfig { dtype: DType::F16, window: 32, tiles_n: 8 };
    let r = spmm_tensor_core(&gpu, &a_dev, &b, &mut c, &odd);
    assert!(matches!(r, Err(Error::InvalidConfig { .. })), "32-row windows: {r:?}");
    let r = tilesparse::spmm::tensor_core::block_fill(&gpu, &a_dev, 32);
    assert!(matches!(r, Err(Error::InvalidConfig { .. })), "block fill of 32-row windows: {r:?}");
    assert!(tilesparse::spmm::tensor_core::block_fill(&gpu, &a_dev, 64).unwrap() > 0.0);
}

/// The wide kernels split a window's k-blocks into 2 to 8 ranges when the grid is small (`wide_splits`); the
/// ranges' partial tiles are added in range order either within a thread block cluster (sm_90 and up) or by a
/// fix-up launch. Both must match the oracle and each other bit for bit, for every number of ranges, a partial
/// last window and a partial last column slice; `RangeSum::Auto` gives the same bits; below sm_90
/// `RangeSum::Cluster` is a typed error.
fn split_ranges_case<T: Scalar>(gpu: &Gpu, ranges: impl IntoIterator<Item = usize>) {
    let clusters = gpu.info().has_clusters();
    for splits in ranges {
        // 190 rows (three 64-row windows, the last partial), every window's union all of k (a column is
        // missing from 62 rows at density 0.4 with probability 0.6^62): ceil(k / 16) = 16 splits + 2 k-blocks
        // per window, so `wide_splits` gives `splits` ranges (the grid has at most 9 blocks).
        let (m, k, n) = (190, 256 * splits + 17, 136);
        let a = gen::uniform_random(m, k, 0.4, 200 + splits as u64);
        let a: CsMat<T> = gen::convert(&a);
        let b = dense::<T>(k, n, 300 + splits as u64);
        let oracle = SpmmOracle::new(a.view(), &b, n);
        let a_dev = DeviceCsr::upload(gpu, a.view()).unwrap();
        let b_dev = DeviceDense::upload(gpu, k, n, &b).unwrap();
        let mut c_dev = DeviceDense::<T>::zeros(gpu, m, n).unwrap();
        for config in TensorCoreConfig::all(T::DTYPE).into_iter().filter(|c| c.is_wide()) {
            let slices = n.div_ceil(config.columns_per_block());
            let blocks = m.div_ceil(64) * k.div_ceil(16);
            assert_eq!(tilesparse::spmm::tensor_core::wide_splits(3 * slices, 3, blocks), splits, "{config}");
            let mut run = |sum: RangeSum| -> Result<Vec<T>, Error> {
                c_dev.fill(gpu, T::from_f64(POISON)).unwrap();
                spmm_tensor_core_with(gpu, &a_dev, &b_dev, &mut c_dev, &config, sum)?;
                Ok(c_dev.download(gpu).unwrap())
            };
            let what = format!("{} ranges with {config}", splits);
            let fix_up = run(RangeSum::FixUp).unwrap();
            oracle.check_kernel(&format!("{what}, fix-up"), &fix_up, &SpmmKernel::TensorCore(config));
            let auto = run(RangeSum::Auto).unwrap();
            let same_bits =
                |x: &[T], y: &[T]| x.iter().zip(y).all(|(x, y)| x.to_f64().to_bits() == y.to_f64().to_bits());
            assert!(same_bits(&auto, &fix_up), "{what}: auto differs");
            match run(RangeSum::Cluster) {
                Ok(cluster) => {
                    assert!(clusters, "{what}: clusters ran below sm_90");
                    oracle.check_kernel(&format!("{what}, cluster"), &cluster, &SpmmKernel::TensorCore(config));
                    assert!(same_bits(&cluster, &fix_up), "{what}: the cluster sum differs from the fix-up's");
                }
                Err(e) => assert!(!clusters && matches!(e, Error::Unsupported { .. }), "{what}: {e}"),
            }
        }
    }
}

#[test]
fn tensor_core_split_ranges_add_the_same_in_clusters_and_by_fix_up() {
    let Some(gpu) = gpu_or_skip("tensor_core_split_ranges_add_the_same_in_clusters_and_by_fix_up") else { return };
    split_ranges_case::<f16>(&gpu, 2..=8);
    split_ranges_case::<bf16>(&gpu, 2..=8);
    split_ranges_case::<f32>(&gpu, 2..=8);
}

/// The tensor-core kernels under compute-sanitizer (run-all.sh --sanitize): every width and type, a partial
/// window, columns past n, the exact path for B's Inf/NaN, split ranges added in clusters and by the fix-up.
#[test]
fn sanitizer_spmm_tensor_core() {
    let Some(gpu) = gpu_or_skip("sanitizer_spmm_tensor_core") else { return };
    let a = gen::power_law(40, 150, 30.0, 1.5, 91);
    for n in [8, 72] {
        check_tensor_core::<f16>(&gpu, &format!("sanitizer tc f16 n = {n}"), &a, n, 92);
        check_tensor_core::<bf16>(&gpu, &format!("sanitizer tc bf16 n = {n}"), &a, n, 93);
        check_tensor_core::<f32>(&gpu, &format!("sanitizer tc f32 n = {n}"), &a, n, 94);
    }
    tensor_core_nan_inf_case::<f16>(&gpu);
    tensor_core_nan_inf_case::<f32>(&gpu);
    split_ranges_case::<f16>(&gpu, [3, 8]);
    split_ranges_case::<f32>(&gpu, [3, 8]);
}

/// spmm_auto picks the tensor cores for a half-full f16/bf16/f32 matrix and (f16) for a small C (SpmmKernel::select),
/// and a CUDA-core tile for a large C at 95% sparsity; every result matches the oracle.
#[test]
fn auto_uses_the_tensor_cores_where_they_win() {
    let Some(gpu) = gpu_or_skip("auto_uses_the_tensor_cores_where_they_win") else { return };
    fn case<T: Scalar>(gpu: &Gpu, m: usize, density: f64, want_tc: bool) {
        let (k, n) = (300, 64);
        let a: CsMat<T> = gen::convert(&gen::uniform_random(m, k, density, 95));
        let b = dense::<T>(k, n, 96);
        let a_dev = DeviceCsr::upload(gpu, a.view()).unwrap();
        let b_dev = DeviceDense::upload(gpu, k, n, &b).unwrap();
        let mut c_dev = DeviceDense::<T>::zeros(gpu, m, n).unwrap();
        c_dev.fill(gpu, T::from_f64(POISON)).unwrap();
        let used = spmm_auto(gpu, &a_dev, &b_dev, &mut c_dev).unwrap();
        assert_eq!(matches!(used, SpmmKernel::TensorCore(_)), want_tc, "m = {m}, density {density}: {used}");
        SpmmOracle::new(a.view(), &b, n).check_kernel(&format!("auto {used}"), &c_dev.download(gpu).unwrap(), &used);
    }
    case::<f16>(&gpu, 9000, 0.5, true);
    case::<bf16>(&gpu, 9000, 0.5, true);
    case::<f32>(&gpu, 9000, 0.5, true); // 3xTF32, its own bound (check_kernel)
    case::<f32>(&gpu, 9000, 0.05, false);
    case::<f16>(&gpu, 200, 0.05, true); // C of 12 800 elements
    case::<f16>(&gpu, 9000, 0.05, false); // blocks 8% full, C of 576 000
}

/// The bench timing (tilesparse::timing::time_op, used for every table) measures device time: a run whose host
/// side sleeps 2 ms before it launches 50 us of GPU work times about 50 us, because the runs are enqueued
/// behind a stream hold and execute back to back (without it each run's events would bracket the sleep).
#[test]
fn timing_brackets_device_time_not_host_time() {
    let Some(gpu) = gpu_or_skip("timing_brackets_device_time_not_host_time") else { return };
    let work = std::time::Duration::from_micros(50);
    let t = tilesparse::timing::time_op(&gpu, 2, 5, || {
        std::thread::sleep(std::time::Duration::from_millis(2));
        gpu.hold_stream(work)
    })
    .unwrap();
    let ms = t.median_ms();
    assert!((0.045..1.0).contains(&ms), "median {ms} ms for 0.05 ms of device work behind 2 ms of host time");
}
