//! SpMM on the GPU: every compiled variant against the f64 oracle, awkward shapes, NaN/Inf, bias + ReLU,
//! and the typed errors. Each run's output is poisoned first.

mod common;

use std::collections::BTreeSet;

use common::{check_spmm, from_triplets, gpu_or_skip, seed, seed_note, SpmmOracle, POISON};
use half::{bf16, f16};
use sprs::{CsMat, CsMatView};
use tilesparse::cpu::oracle;
use tilesparse::kernels::{compiled_spmm_variants_for, spmm_table};
use tilesparse::spmm::tensor_core::BlockCounts;
use tilesparse::spmm::tune::tune_candidates;
use tilesparse::spmm::{
    block_order, check_config, column_tiles_first, rows_longest_first, skipped_empty_rows, skips_empty_rows, split,
    splits_rows, spmm_bias_relu, spmm_leaving_out_empty_rows, spmm_with,
};
use tilesparse::{
    gen, spmm, spmm_auto, spmm_bias_relu_auto, spmm_in_order, spmm_kernel, spmm_kernel_bias_relu, spmm_kernel_with,
    spmm_tensor_core, spmm_tensor_core_bias_relu, spmm_tensor_core_empty_windows, spmm_tensor_core_paths,
    spmm_tensor_core_with, spmm_tune, spmm_tune_bias_relu, spmm_tune_with, BlockOrder, CsrError, DType, DeviceCsr,
    DeviceDense, Error, Gpu, RangeSum, RowStats, Scalar, SpmmConfig, SpmmEpilogue, SpmmKernel, TensorCoreConfig,
    TuneOptions,
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

/// Whether two results hold the same bits.
fn same_bits<T: Scalar>(x: &[T], y: &[T]) -> bool {
    x.len() == y.len() && x.iter().zip(y).all(|(x, y)| x.to_f64().to_bits() == y.to_f64().to_bits())
}

/// `kernel` on A times B into C, poisoned first; returns C.
fn run_poisoned<T: Scalar>(
    gpu: &Gpu,
    a: &DeviceCsr<T>,
    b: &DeviceDense<T>,
    c: &mut DeviceDense<T>,
    kernel: &SpmmKernel,
) -> Vec<T> {
    c.fill(gpu, T::from_f64(POISON)).unwrap();
    spmm_kernel(gpu, a, b, c, kernel).unwrap_or_else(|e| panic!("{kernel}: {e}"));
    c.download(gpu).unwrap()
}

/// Every tensor-core kernel this device runs for T, then the tile `SpmmConfig::select` takes for (m, k, n, nnz).
fn tensor_cores_and_a_tile<T: Scalar>(gpu: &Gpu, (m, k, n): (usize, usize, usize), nnz: usize) -> Vec<SpmmKernel> {
    let mut kernels: Vec<SpmmKernel> =
        tensor_cores_here(gpu, T::DTYPE).into_iter().map(SpmmKernel::TensorCore).collect();
    kernels.push(SpmmKernel::Tiled(SpmmConfig::select(m, k, n, nnz, T::DTYPE)));
    kernels
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
        let got = run_poisoned(gpu, &a_dev, &b_dev, &mut c_dev, &kernel);
        oracle.check_kernel(&format!("{what} with {kernel}"), &got, &kernel);
        ran += 1;
    }
    ran
}

/// `spmm_auto` on A (rounded to T) times a random B ([`upload_problem`]), C poisoned first, checked against the
/// oracle with the bound of the kernel it chose; returns that kernel.
fn check_auto<T: Scalar>(gpu: &Gpu, what: &str, a: &CsMat<f32>, n: usize, seed: u64) -> SpmmKernel {
    let (oracle, a_dev, b_dev, mut c_dev) = upload_problem::<T>(gpu, a, n, seed);
    c_dev.fill(gpu, T::from_f64(POISON)).unwrap();
    let used = spmm_auto(gpu, &a_dev, &b_dev, &mut c_dev).unwrap_or_else(|e| panic!("{what}: {e}"));
    oracle.check_kernel(&format!("{what} ({used})"), &c_dev.download(gpu).unwrap(), &used);
    used
}

/// Every compiled variant of T that can run (m, k, n) on A ([`check_kernels`]); at least one must. Returns the
/// names of the variants that ran.
fn check_all_variants<T: Scalar>(gpu: &Gpu, what: &str, a: &CsMat<f32>, n: usize, seed: u64) -> Vec<String> {
    let runnable: Vec<SpmmConfig> = compiled_spmm_variants_for(T::DTYPE)
        .filter(|config| check_config(config, T::DTYPE, a.rows(), a.cols(), n).is_ok())
        .copied()
        .collect();
    let ran = check_kernels::<T>(gpu, what, a, n, seed, runnable.iter().map(|config| SpmmKernel::Tiled(*config)));
    assert_eq!(ran, runnable.len(), "{what}");
    assert!(ran > 0, "{what}: no {} variant can run this problem ({})", T::DTYPE, seed_note());
    runnable.iter().map(|config| config.kernel_name()).collect()
}

/// The names of every compiled variant of `dtype`.
fn compiled_names(dtype: DType) -> BTreeSet<String> {
    compiled_spmm_variants_for(dtype).map(|config| config.kernel_name()).collect()
}

/// Asserts that the variants that ran over a test's cases are all of `dtype`'s compiled ones.
fn assert_all_ran(test: &str, dtype: DType, ran: &BTreeSet<String>) {
    let compiled = compiled_names(dtype);
    assert!(!compiled.is_empty(), "{test}: no {dtype} variant compiled");
    let missing: Vec<&String> = compiled.difference(ran).collect();
    assert!(
        missing.is_empty(),
        "{test}: {} of {} {dtype} variants never ran: {missing:?}",
        missing.len(),
        compiled.len()
    );
    assert_eq!(ran, &compiled, "{test}: variants ran that are not compiled for {dtype}");
}

#[test]
fn every_variant_matches_the_oracle_on_sputniks_problem_list() {
    let Some(gpu) = gpu_or_skip("every_variant_matches_the_oracle_on_sputniks_problem_list") else { return };
    // (m, k, n, nnz) as in Sputnik's tests, then its benchmark shapes at 75% sparsity.
    let mut problems: Vec<(String, CsMat<f32>, usize)> = vec![
        ("7x96x40 nnz 333".into(), gen::uniform_random_nnz(7, 96, 333, seed(1)), 40),
        ("11x55x8 nnz 293".into(), gen::uniform_random_nnz(11, 55, 293, seed(2)), 8),
    ];
    for n in [512, 256, 128] {
        problems.push((format!("1024x1024x{n}"), gen::uniform_random(1024, 1024, 0.25, seed(3 + n as u64)), n));
    }
    for m in [2048, 6144, 8192] {
        problems.push((format!("{m}x2048x128"), gen::uniform_random(m, 2048, 0.25, seed(m as u64)), 128));
    }
    let total = compiled_spmm_variants_for(DType::F32).count();
    assert!(total > 0);
    for (i, (what, a, n)) in problems.iter().enumerate() {
        // check_all_variants asserts that at least one variant ran.
        check_all_variants::<f32>(&gpu, what, a, *n, seed(100 + i as u64));
    }
}

/// Many even rows (`spmm::rows_longest_first` false for f32): the kernel reads rows in their own order, with no
/// row swizzle, on every compiled f32 variant; empty rows and a partial last row block included.
#[test]
fn every_variant_in_row_order_on_many_even_rows() {
    let Some(gpu) = gpu_or_skip("every_variant_in_row_order_on_many_even_rows") else { return };
    let a = gen::with_empty_rows(&gen::uniform_random(4099, 96, 0.3, seed(21)), 0.01, seed(22));
    let stats = RowStats::from_indptr(&a.indptr().to_proper());
    assert!(!rows_longest_first(&stats, a.rows(), DType::F32), "cv {:.2}: the case must take row order", stats.cv);
    assert!(stats.empty_rows > 0);
    // check_all_variants asserts that every variant that accepts the shape ran, at least one.
    for n in [40, 128] {
        check_all_variants::<f32>(&gpu, &format!("row order, n = {n}"), &a, n, seed(23));
    }
}

#[test]
fn every_variant_handles_awkward_shapes() {
    let Some(gpu) = gpu_or_skip("every_variant_handles_awkward_shapes") else { return };
    let cases: Vec<(&str, CsMat<f32>)> = vec![
        // Row lengths around the tile size and misaligned row starts exercise the aligner and the residue.
        ("power-law 300x257", gen::power_law(300, 257, 20.0, 1.5, seed(11))),
        ("empty rows", gen::with_empty_rows(&gen::uniform_random(97, 130, 0.3, seed(12)), 0.4, seed(13))),
        ("one dense row", gen::with_dense_row(&gen::uniform_random(50, 333, 0.05, seed(14)), 17)),
        ("nnz = 0", CsMat::zero((33, 40))),
        ("m = 1", gen::uniform_random(1, 200, 0.5, seed(15))),
        ("k = 1", gen::uniform_random(64, 1, 0.7, seed(16))),
        ("tall 1000x3", gen::uniform_random(1000, 3, 0.6, seed(17))),
        ("wide 5x3000", gen::uniform_random(5, 3000, 0.2, seed(18))),
        ("banded 211x211", gen::banded(211, 211, 20, seed(19))),
        // Degenerate shapes: no rows (a no-op), no columns of A (C is all zeros, over poison).
        ("m = 0", CsMat::zero((0, 40))),
        ("k = 0", CsMat::zero((33, 0))),
    ];
    // n = 0 is a no-op; n = 128 is the one n > 0 here that the 128-wide variants without predicates accept.
    // Only the runs with work (m > 0 and n > 0) count towards the variants that ran.
    let mut ran = BTreeSet::new();
    for (what, a) in &cases {
        for n in [0usize, 1, 2, 3, 4, 7, 8, 12, 16, 18, 33, 34, 64, 66, 100, 128, 129] {
            let names = check_all_variants::<f32>(&gpu, &format!("{what}, n = {n}"), a, n, seed(7 * n as u64));
            if a.rows() > 0 && n > 0 {
                ran.extend(names);
            }
        }
    }
    assert_all_ran("every_variant_handles_awkward_shapes", DType::F32, &ran);
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
        let a = gen::uniform_random(rows, 300, 0.1, seed(rows as u64));
        let what = format!("{rows} rows, column tiles first: {columns_first}");
        assert_eq!(check_kernels::<f32>(&gpu, &what, &a, n, seed(61), [SpmmKernel::Tiled(config)]), 1);
    }
}

/// Every compiled variant of T in every block order it runs (`spmm_in_order`; the SM-affine order on the
/// launch-bounded variants, a typed error on the others) against the oracle, each twice in a row (the SM-affine
/// order's counters must be back at zero for the second launch), on A with `n` columns; the orders must give the
/// same bits. Returns how many launches ran, at least one.
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
                    Some(f) => assert!(same_bits(f, &c), "{label}: bits differ from {:?}", BlockOrder::ALL[0]),
                }
                ran += 1;
            }
        }
    }
    assert!(ran > 0, "{what}: no {} variant ran in any block order ({})", T::DTYPE, seed_note());
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
        ("uniform 301x200".into(), gen::uniform_random(301, 200, 0.1, seed(91)), 520),
        (
            "empty rows 97x130".into(),
            gen::with_empty_rows(&gen::uniform_random(97, 130, 0.3, seed(92)), 0.4, seed(93)),
            136,
        ),
        ("one tile 40x64".into(), gen::uniform_random(40, 64, 0.3, seed(94)), 32),
        ("split rows 3000x5000".into(), skewed_matrix(3000, 5000, seed(95)), 128),
    ];
    // check_every_order asserts that each case ran at least one launch.
    for (what, a, n) in &cases {
        check_every_order::<f32>(&gpu, what, a, *n, seed(96));
        check_every_order::<f16>(&gpu, &format!("{what} f16"), a, *n, seed(97));
        check_every_order::<bf16>(&gpu, &format!("{what} bf16"), a, *n, seed(98));
    }

    // Rows of 30 and 150 entries (cv 0.67): the two-row tile. A third of the rows 600 long, the rest 60 (cv
    // 1.06): the eight-row tile. Then the four-row tile.
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
    // Past 1024 rows over k >= 2048, a third of the rows 600 long and the rest 100 (cv 0.88): the four-row tile.
    automatic_sm_affine(
        &gpu,
        (2048, 3072, 1024),
        |r| if r % 3 == 0 { 600 } else { 100 },
        "spmm_f32_s2d4_y4k16x64w8_u4_nopred_lb8",
        103,
    );
}

/// An m x k matrix whose row r holds `len(r)` consecutive columns from (37 r) mod (k - len(r)): a fixed structure
/// (and so a fixed choice of kernel), its values drawn from `common::seed(seed)`.
fn rows_of_lengths(m: usize, k: usize, len: impl Fn(usize) -> usize, seed: u64) -> CsMat<f32> {
    let mut rng = gen::Rng::new(common::seed(seed));
    let mut entries = Vec::new();
    for r in 0..m {
        let len = len(r);
        let start = (r * 37) % (k - len);
        entries.extend((0..len).map(|j| (r, start + j, rng.range(-1.0, 1.0) as f32)));
    }
    from_triplets(m, k, &entries)
}

/// The row split (`SpmmConfig::row_split`; NOTES.md, "SpMM step 29"), on every compiled variant that has one: rows of
/// every length from 0 to five rounds of tiles and a tile and three entries more, so that each subwarp's share of full
/// tiles and the residue comes in every combination, in a row count that leaves the last block part empty; then a NaN
/// in the second subwarp's first tile and an Inf of B reached through a residue that the second subwarp owns, both of
/// which must reach C through the block's sum; the bias + ReLU epilogue after that sum. Then the selection's own
/// choice at few rows and n = 20-256 (`select`'s row_split_tile). Small enough for compute-sanitizer (run-all.sh
/// --sanitize).
#[test]
fn sanitizer_row_split_shares_rows_of_every_length() {
    assert!(
        spmm_table().iter().any(|c| c.dtype == DType::F32 && c.row_split > 1),
        "no row-split variant in variants.txt"
    );
    let Some(gpu) = gpu_or_skip("sanitizer_row_split_shares_rows_of_every_length") else { return };
    let variants: Vec<SpmmConfig> =
        compiled_spmm_variants_for(DType::F32).filter(|c| c.row_split > 1).copied().collect();
    for config in &variants {
        // A predicated twin at an n that ends inside a column tile (the r2 and r4 twins guard every column tile:
        // `kSplitGuards` in cuda/spmm/spmm.cu).
        let n = if config.predicate_loads { 132 } else { 128 };
        let tile = config.block_items_k as usize;
        let longest = 5 * tile * config.row_split as usize + tile + 3;
        let m = longest + 1 + usize::from((longest + 1) % config.rows_per_block() as usize == 0);
        let a = rows_of_lengths(m, 2 * longest + 64, |r| r % (longest + 1), seed(120));
        let what = format!("row split, rows of 0-{longest}");
        assert_eq!(check_kernels::<f32>(&gpu, &what, &a, n, seed(121), [SpmmKernel::Tiled(*config)]), 1);
        // The bias and ReLU come after the block's sum, in part 0.
        let b = dense::<f32>(a.cols(), n, seed(125));
        let bias: Vec<f32> = (0..m).map(|i| ((i % 9) as f32 - 4.0) * 0.5).collect();
        let oracle = BiasReluOracle::new(a.view(), &b, &bias, n);
        let (a_dev, b_dev) =
            (DeviceCsr::upload(&gpu, a.view()).unwrap(), DeviceDense::upload(&gpu, a.cols(), n, &b).unwrap());
        let bias_dev = gpu.stream().clone_htod(&bias).unwrap();
        let mut c_dev = DeviceDense::<f32>::zeros(&gpu, m, n).unwrap();
        c_dev.fill(&gpu, POISON as f32).unwrap();
        spmm_bias_relu(&gpu, &a_dev, &b_dev, &bias_dev, &mut c_dev, config).unwrap();
        oracle.check(&format!("row split bias + ReLU with {config}"), &c_dev.download(&gpu).unwrap());

        // Row `longest` has 5 row_split + 1 full tiles and a residue of 3: the residue is the second subwarp's.
        // Its last entry (value 1) meets an Inf of B; row `longest - 1` holds a NaN in its second tile.
        let mut a = a;
        let (inf_row, nan_row) = (longest, longest - 1);
        let last = a.indptr().outer_inds_sz(inf_row).end - 1;
        a.data_mut()[last] = 1.0;
        let inf_col = a.indices()[last];
        let nan_at = a.indptr().outer_inds_sz(nan_row).start + tile + 1;
        a.data_mut()[nan_at] = f32::NAN;
        let mut b = dense::<f32>(a.cols(), n, seed(122));
        b[inf_col * n + 7] = f32::INFINITY;
        let oracle = SpmmOracle::new(a.view(), &b, n);
        let c: Vec<f64> = run(&gpu, &a, &b, n, config).iter().map(|v| v.to_f64()).collect();
        oracle.check(&format!("row split NaN/Inf with {config}"), &c);
        assert!(c[nan_row * n..(nan_row + 1) * n].iter().all(|v| v.is_nan()), "{config}: the NaN must reach C");
        assert_eq!(c[inf_row * n + 7], f64::INFINITY, "{config}: the Inf must reach C");
    }
    // The selection's choice: rows like the pruned 384 x 384 at 90% (mean 38, longest 154), alternating 20 and 60
    // entries, at n = 32, 64, 96 and 128 (up to 384 blocks: four subwarps per row over one to four column tiles)
    // and n = 256 (768 blocks; still four subwarps per row on rows this short at k = 384); n = 20, 48 and 100 take
    // the choice at 32, 64 and 128, n = 200 that at 256, guarded in n where n cuts a column tile. Rows like the
    // same weight at 70% (mean 115, alternating 80 and 150 entries) take two warps per row at n = 200 and 256.
    let short = rows_of_lengths(384, 384, |r| if r % 2 == 0 { 20 } else { 60 }, seed(123));
    let long = rows_of_lengths(384, 384, |r| if r % 2 == 0 { 80 } else { 150 }, seed(128));
    let cases = [(20, 4), (32, 4), (48, 4), (64, 4), (96, 4), (100, 4), (128, 4), (200, 4), (256, 4)]
        .map(|(n, split)| (&short, n, split))
        .into_iter()
        .chain([(&long, 128, 4), (&long, 200, 2), (&long, 256, 2)]);
    for (a, n, row_split) in cases {
        let stats = RowStats::from_indptr(&a.indptr().to_proper());
        let chosen = SpmmConfig::select_with_stats(384, 384, n, &stats, DType::F32);
        assert_eq!(chosen.row_split, row_split, "n = {n}, mean {}: {chosen}", stats.mean);
        assert_eq!(chosen.predicate_loads, n % chosen.block_items_x as usize != 0, "n = {n}: {chosen}");
        let label = format!("row split chosen at n = {n}, mean {}", stats.mean);
        assert_eq!(check_kernels::<f32>(&gpu, &label, a, n, seed(124), [SpmmKernel::Tiled(chosen)]), 1);
    }
}

/// The rows A leaves empty, left out of the tile kernel's grid and written by `spmm_zero_rows_<dtype>`
/// (`spmm::skips_empty_rows`). First every compiled variant of every dtype with them left out however few
/// (`spmm_leaving_out_empty_rows`): at an n whose rows the fill writes 16 bytes a lane (128) and one it writes an
/// element a lane (130), on a matrix whose rows go to subwarps through the swizzle and on one whose long row is
/// split (the empty rows are then the last pieces), against the oracle on a poisoned C; with bias + ReLU the
/// empty rows hold ReLU(bias) exactly, 0 for a negative bias and NaN for a NaN one. Then the automatic rule on
/// enough empty rows that some variants leave them out and some do not. Small enough for compute-sanitizer.
#[test]
fn sanitizer_empty_rows_left_to_a_second_kernel() {
    let Some(gpu) = gpu_or_skip("sanitizer_empty_rows_left_to_a_second_kernel") else { return };
    // 2400 rows, 2100 empty (the first and the last among them); the rest of 1-40 entries, and in the second
    // matrix row 1403 of 1500, which every variant that walks pieces splits.
    let (m, k) = (2400, 2000);
    let stored = |r: usize| if r % 8 == 3 { 1 + r % 40 } else { 0 };
    let plain = rows_of_lengths(m, k, stored, seed(130));
    let skewed = rows_of_lengths(m, k, |r| if r == 1403 { 1500 } else { stored(r) }, seed(131));
    let (mut split_runs, mut runs) = (0, 0);
    fn each<T: Scalar>(gpu: &Gpu, what: &str, a: &CsMat<f32>, n: usize, runs: &mut usize, splits: &mut usize) {
        let (oracle, a_dev, b_dev, mut c_dev) = upload_problem::<T>(gpu, a, n, seed(132));
        for config in compiled_spmm_variants_for(T::DTYPE) {
            if check_config(config, T::DTYPE, a.rows(), a.cols(), n).is_err() {
                continue;
            }
            *splits += usize::from(splits_rows(gpu, &a_dev, n, config).unwrap());
            c_dev.fill(gpu, T::from_f64(POISON)).unwrap();
            let left_out =
                spmm_leaving_out_empty_rows(gpu, &a_dev, &b_dev, SpmmEpilogue::default(), &mut c_dev, config)
                    .unwrap_or_else(|e| panic!("{config}: {e}"));
            assert_eq!(left_out, 2100, "{what}, n = {n}, {config}: the grid must leave the empty rows out");
            let label = format!("{what} empty rows left out, n = {n}, {config}");
            oracle.check_kernel(&label, &c_dev.download(gpu).unwrap(), &SpmmKernel::Tiled(*config));
            *runs += 1;
        }
    }
    for (what, a) in [("swizzled", &plain), ("split", &skewed)] {
        assert_eq!(RowStats::from_indptr(&a.indptr().to_proper()).empty_rows, 2100, "{what}");
        for n in [128, 130] {
            each::<f32>(&gpu, what, a, n, &mut runs, &mut split_runs);
            each::<f16>(&gpu, what, a, n, &mut runs, &mut split_runs);
            each::<bf16>(&gpu, what, a, n, &mut runs, &mut split_runs);
        }
    }
    assert!(runs > 200, "only {runs} runs");
    assert!(split_runs > 0, "no variant split the 1500-entry row");

    // Bias + ReLU: row 0 (empty) a negative bias, row 1 (empty) NaN, row 2 (empty) positive.
    let n = 128;
    let b = dense::<f32>(k, n, seed(133));
    let mut bias: Vec<f32> = (0..m).map(|i| ((i % 7) as f32 - 3.0) * 0.25).collect();
    bias[..3].copy_from_slice(&[-0.5, f32::NAN, 0.75]);
    let bias_dev = gpu.stream().clone_htod(&bias).unwrap();
    for (what, a) in [("swizzled", &plain), ("split", &skewed)] {
        let oracle = BiasReluOracle::new(a.view(), &b, &bias, n);
        let (a_dev, b_dev) = (DeviceCsr::upload(&gpu, a.view()).unwrap(), DeviceDense::upload(&gpu, k, n, &b).unwrap());
        for config in compiled_spmm_variants_for(DType::F32) {
            if check_config(config, DType::F32, m, k, n).is_err() {
                continue;
            }
            let mut c_dev = DeviceDense::<f32>::zeros(&gpu, m, n).unwrap();
            c_dev.fill(&gpu, POISON as f32).unwrap();
            let left_out = spmm_leaving_out_empty_rows(
                &gpu,
                &a_dev,
                &b_dev,
                SpmmEpilogue::bias_relu(&bias_dev),
                &mut c_dev,
                config,
            )
            .unwrap();
            assert_eq!(left_out, 2100, "{what} bias + ReLU, {config}");
            let c = c_dev.download(&gpu).unwrap();
            oracle.check(&format!("{what} empty rows, bias + ReLU, {config}"), &c);
            assert!(c[..n].iter().all(|v| v.to_bits() == 0), "{config}: ReLU(-0.5) of an empty row must be +0");
            assert!(c[n..2 * n].iter().all(|v| v.is_nan()), "{config}: a NaN bias must reach its empty row");
            assert!(c[2 * n..3 * n].iter().all(|&v| v == 0.75), "{config}: ReLU(0.75) of an empty row");
        }
    }

    // The rule: 14000 rows, 12500 empty, at n = 128. The warp per row over 128 columns spends 12,500 blocks on
    // them and leaves them out; the thirty-two-row block 782 (391 row blocks x 2 column tiles) and keeps them.
    let (m, k) = (14000, 2000);
    let a = rows_of_lengths(m, k, |r| if r % 28 < 3 { 1 + r % 40 } else { 0 }, seed(134));
    let stats = RowStats::from_indptr(&a.indptr().to_proper());
    assert_eq!(stats.empty_rows, 12500);
    let warp: SpmmConfig = "spmm_f32_s1d4_y1k32x128w32_u4_nopred".parse().unwrap();
    assert!(skips_empty_rows(&stats, &warp, 128) && !skips_empty_rows(&stats, &thirty_two_row_block(), 128));
    let (oracle, a_dev, b_dev, mut c_dev) = upload_problem::<f32>(&gpu, &a, n, seed(135));
    let (mut left, mut kept) = (0, 0);
    for config in compiled_spmm_variants_for(DType::F32) {
        if check_config(config, DType::F32, m, k, n).is_err() {
            continue;
        }
        let skipped = skipped_empty_rows(&gpu, &a_dev, n, config).unwrap();
        let blocks = 12500usize.div_ceil(config.rows_per_block() as usize)
            * (n.div_ceil(config.block_items_x as usize)).div_ceil(config.column_tiles as usize);
        assert_eq!(skipped, if blocks >= 12_288 { 12500 } else { 0 }, "{config}: {blocks} blocks");
        (left, kept) = if skipped > 0 { (left + 1, kept) } else { (left, kept + 1) };
        c_dev.fill(&gpu, POISON as f32).unwrap();
        spmm(&gpu, &a_dev, &b_dev, &mut c_dev, config).unwrap();
        let label = format!("the rule's empty rows, {config} ({skipped} left out)");
        oracle.check_kernel(&label, &c_dev.download(&gpu).unwrap(), &SpmmKernel::Tiled(*config));
    }
    assert!(left > 0 && kept > 0, "{left} variants left the empty rows out, {kept} kept them");
}

/// A tall banded matrix (22,534 x 1,052, half-bandwidth 9: 21,473 rows empty) at n = 1024: `spmm_auto` takes the
/// tile chosen for its 1,061 other rows, which leaves the empty rows to the second kernel (NOTES.md, "SpMM step
/// 75"; over all rows f32 took a warp per row over 128 columns and f16/bf16 the 64-row windows), and matches the
/// oracle on a poisoned C.
#[test]
fn automatic_choice_on_mostly_empty_rows() {
    let Some(gpu) = gpu_or_skip("automatic_choice_on_mostly_empty_rows") else { return };
    let a = gen::banded(22534, 1052, 9, seed(140));
    let stats = RowStats::from_indptr(&a.indptr().to_proper());
    assert_eq!(stats.empty_rows, 21473);
    fn case<T: Scalar>(gpu: &Gpu, a: &CsMat<f32>, expect: &str) {
        let n = 1024;
        let used = check_auto::<T>(gpu, &format!("mostly empty rows, {}", T::DTYPE), a, n, seed(141));
        assert_eq!(used.to_string(), expect);
        let SpmmKernel::Tiled(config) = used else { unreachable!() };
        let a_dev = DeviceCsr::upload(gpu, gen::convert::<T>(a).view()).unwrap();
        assert_eq!(skipped_empty_rows(gpu, &a_dev, n, &config).unwrap(), 21473, "{expect}");
    }
    case::<f32>(&gpu, &a, "spmm_f32_s1d4_y2k16x128w16_u4_nopred_lb16");
    case::<f16>(&gpu, &a, "spmm_f16_s1d8_y4k8x64w8_u4_nopred");
    case::<bf16>(&gpu, &a, "spmm_bf16_s1d8_y4k8x64w8_u4_nopred");
}

/// The thirty-two-row block (32 rows of one warp over 64 columns).
fn thirty_two_row_block() -> SpmmConfig {
    compiled_spmm_variants_for(DType::F32)
        .find(|c| c.block_items_y == 32 && c.row_split == 1)
        .copied()
        .expect("a thirty-two-row f32 variant")
}

/// Short rows in a mid-sized matrix take the two-row tile (`select`'s short_rows; NOTES.md, "SpMM step
/// 30"): 5000 x 5000 with rows of 3-11 entries (mean 7, as the meshes 4elt and wrld_1deg) chooses it at n = 128
/// and 384, and it matches the oracle.
#[test]
fn automatic_two_rows_on_short_rows_of_mid_sized_matrices() {
    let a = rows_of_lengths(5000, 5000, |r| 3 + r % 9, seed(126));
    let stats = RowStats::from_indptr(&a.indptr().to_proper());
    let chosen: Vec<SpmmConfig> =
        [128, 384].iter().map(|&n| SpmmConfig::select_with_stats(5000, 5000, n, &stats, DType::F32)).collect();
    for config in &chosen {
        assert_eq!(config.kernel_name(), "spmm_f32_s1d4_y2k16x128w16_u4_nopred_lb16");
    }
    let Some(gpu) = gpu_or_skip("automatic_two_rows_on_short_rows_of_mid_sized_matrices") else { return };
    for (n, config) in [128, 384].into_iter().zip(chosen) {
        let label = format!("two-row tile chosen for short rows at n = {n}");
        assert_eq!(check_kernels::<f32>(&gpu, &label, &a, n, seed(127), [SpmmKernel::Tiled(config)]), 1);
    }
}

/// The library's own choice for a weight-like m x k matrix with rows of `len(r)` entries at n columns is
/// `expected`, in the SM-affine order, and it matches the oracle three launches in a row. The structure (and so
/// the choice) is fixed; the values are drawn from `common::seed(seed)`.
fn automatic_sm_affine(
    gpu: &Gpu,
    (m, k, n): (usize, usize, usize),
    len: impl Fn(usize) -> usize,
    expected: &str,
    seed: u64,
) {
    let a = rows_of_lengths(m, k, len, seed);
    let stats = RowStats::from_indptr(&a.indptr().to_proper());
    let config: SpmmConfig = expected.parse().unwrap();
    assert_eq!(SpmmConfig::select_with_stats(m, k, n, &stats, DType::F32), config);
    // The tiles are launch-bounded: their blocks per SM are their min_occupancy.
    let order = block_order(&config, &stats, m, n, config.min_occupancy as usize, gpu.info().sm_count);
    assert_eq!(order, BlockOrder::SmAffine, "{expected}: cv {:.2}, mean {:.0}", stats.cv, stats.mean);
    for launch in 0..3 {
        assert_eq!(
            check_kernels::<f32>(
                gpu,
                &format!("SM-affine {expected}, launch {launch}"),
                &a,
                n,
                common::seed(seed + 1),
                [SpmmKernel::Tiled(config)]
            ),
            1
        );
    }
}

/// At n = 768, uneven long rows in 384-640 rows take the sixteen-row block (`select`'s n = 768 clause; NOTES.md,
/// "SpMM step 20"): a 448 x 2560 matrix whose rows alternate 400 and 60 entries (cv 0.74, mean 230) chooses it,
/// and it matches the oracle; the same matrix at n = 832 does not choose it.
#[test]
fn automatic_sixteen_rows_at_n768() {
    let (m, k) = (448, 2560);
    let a = rows_of_lengths(m, k, |r| if r % 2 == 0 { 400 } else { 60 }, 107);
    let stats = RowStats::from_indptr(&a.indptr().to_proper());
    let sixteen: SpmmConfig = "spmm_f32_s1d2_y16k32x64w32_u4_nopred".parse().unwrap();
    assert_eq!(SpmmConfig::select_with_stats(m, k, 768, &stats, DType::F32), sixteen, "cv {:.2}", stats.cv);
    assert_ne!(SpmmConfig::select_with_stats(m, k, 832, &stats, DType::F32), sixteen);
    let Some(gpu) = gpu_or_skip("automatic_sixteen_rows_at_n768") else { return };
    let label = "sixteen rows chosen at n = 768";
    assert_eq!(check_kernels::<f32>(&gpu, label, &a, 768, seed(108), [SpmmKernel::Tiled(sixteen)]), 1);
}

/// The thirty-two-row tile (`select`'s thirty_two_row_rows; NOTES.md, "SpMM step 21"), chosen by the tile
/// selection: a 384 x 1536 matrix whose rows alternate 190 and 118 entries (mean 154, cv 0.23, like the pruned 384
/// x 1536 at 90%) at n = 1024, run column tiles first; and even rows of 51 in 256 x 1024 at n = 2048, run row
/// blocks first. Both match the oracle in the order the library picks; the first does not choose the tile at
/// n = 640.
#[test]
fn automatic_thirty_two_rows() {
    let thirty_two: SpmmConfig = "spmm_f32_s1d4_y32k16x64w16_u4_nopred".parse().unwrap();
    let cases = [
        ((384, 1536, 1024), rows_of_lengths(384, 1536, |r| if r % 2 == 0 { 190 } else { 118 }, 109)),
        ((256, 1024, 2048), rows_of_lengths(256, 1024, |_| 51, 111)),
    ];
    let orders = [BlockOrder::ColumnTilesFirst, BlockOrder::RowBlocksFirst];
    let stats: Vec<RowStats> = cases.iter().map(|(_, a)| RowStats::from_indptr(&a.indptr().to_proper())).collect();
    for (((m, k, n), _), (stats, order)) in cases.iter().zip(stats.iter().zip(orders)) {
        assert_eq!(SpmmConfig::select_with_stats(*m, *k, *n, stats, DType::F32), thirty_two, "cv {:.2}", stats.cv);
        // The tile is not launch-bounded: one block of 512 threads per SM at 106 registers.
        assert_eq!(block_order(&thirty_two, stats, *m, *n, 1, 132), order);
    }
    // Not at n = 640; n = 704 takes the choice at 768 (whose column tiles of 64 it fills).
    assert_ne!(SpmmConfig::select_with_stats(384, 1536, 640, &stats[0], DType::F32), thirty_two);
    assert_eq!(SpmmConfig::select_with_stats(384, 1536, 704, &stats[0], DType::F32), thirty_two);
    let Some(gpu) = gpu_or_skip("automatic_thirty_two_rows") else { return };
    for (((m, _, n), a), s) in cases.iter().zip([110, 112]) {
        let label = format!("thirty-two rows chosen for {m} rows at n = {n}");
        assert_eq!(check_kernels::<f32>(&gpu, &label, a, *n, seed(s), [SpmmKernel::Tiled(thirty_two)]), 1);
    }
}

/// The thirty-two-row block where its launch is one full wave (`select`'s thirty_two_rows_one_wave; NOTES.md, "SpMM
/// step 51"): uniform 1024 x 4096 at 40 per row, n = 256, and 512 x 2048 at 20 per row, n = 512, choose it through
/// `spmm_auto`, and it matches the oracle on a poisoned C.
#[test]
fn automatic_thirty_two_rows_one_wave() {
    let thirty_two = "spmm_f32_s1d4_y32k16x64w16_u4_nopred";
    let cases: Vec<(CsMat<f32>, usize)> = [(1024, 4096, 40.0, 256), (512, 2048, 20.0, 512)]
        .into_iter()
        .map(|(m, k, mean, n)| (gen::uniform_random(m, k, mean / k as f64, seed(160 + m as u64)), n))
        .collect();
    for (a, n) in &cases {
        let stats = RowStats::from_indptr(&a.indptr().to_proper());
        assert_eq!(SpmmConfig::select_with_stats(a.rows(), a.cols(), *n, &stats, DType::F32).kernel_name(), thirty_two);
    }
    let Some(gpu) = gpu_or_skip("automatic_thirty_two_rows_one_wave") else { return };
    for (a, n) in &cases {
        let what = format!("{} x {}, n = {n}", a.rows(), a.cols());
        let used = check_auto::<f32>(&gpu, &what, a, *n, seed(170 + a.rows() as u64));
        assert_eq!(used.to_string(), thirty_two, "{what}");
    }
}

/// f32 power-law rows in 512 rows, the longest past 256 entries but not skewed: `spmm_auto` runs two warps per row at
/// n = 256 and one at n = 1024 (src/spmm/select.rs, `uneven_few_rows`, `power_law_few_rows_wide_n`; NOTES.md, "SpMM
/// step 52") and matches the oracle.
#[test]
fn automatic_warps_for_uneven_few_rows() {
    let split = "spmm_f32_s1d4_y2k32x128w32_u4_nopred_r2";
    let warp = "spmm_f32_s1d4_y1k32x128w32_u4_nopred";
    // Fresh matrices until one has such rows (about one in two has: the others' longest rows are skewed). Both
    // rules hold for a longest row of 257-1024 entries, cv 0.6 or more and a mean of 40-139.
    let (a, stats) = (0..64)
        .map(|i| {
            let a = gen::power_law(512, 32768, 110.0, 2.0, seed(180 + i));
            let stats = RowStats::from_indptr(&a.indptr().to_proper());
            (a, stats)
        })
        .find(|(_, stats)| (257..=1024).contains(&stats.max) && stats.cv >= 0.6 && (40.0..139.0).contains(&stats.mean))
        .unwrap_or_else(|| panic!("no power-law matrix with a longest row of 257-1024 entries ({})", seed_note()));
    let cases = [(256, split), (1024, warp)];
    for (n, expected) in cases {
        assert_eq!(SpmmConfig::select_with_stats(512, 32768, n, &stats, DType::F32).kernel_name(), expected);
    }
    let Some(gpu) = gpu_or_skip("automatic_warps_for_uneven_few_rows") else { return };
    for (n, expected) in cases {
        let what = format!("512 x 32768 power-law, longest {}, n = {n}", stats.max);
        let used = check_auto::<f32>(&gpu, &what, &a, n, seed(190 + n as u64));
        assert_eq!(used.to_string(), expected, "{what}");
    }
}

/// f16/bf16 uniform rows over a wide k, whose 16-row tensor-core windows are less than 8% full (src/spmm/select.rs,
/// `sparse_windows_half`; NOTES.md, "SpMM step 51"): `spmm_auto` runs the tile that replaces the windows, and it
/// matches the oracle on a poisoned C; rows of 12 entries in 2048 rows keep the windows.
///
/// At n = 32 in 4096 rows or more windows up to 14% full give way too, the 64-row ones as well, and n = 32 and 96
/// off the tensor cores take the k = 8 tile over 32 columns (NOTES.md, "SpMM step 52"); there rows of 8-31 entries
/// take the tile too (step 77).
fn automatic_tiles_for_sparse_windows_case<T: Scalar>(gpu: &Gpu) {
    let k8 = "s1d4_y4k8x32w8_u4_pred";
    let long_rows_at_32 = if T::DTYPE == DType::F16 { "s4d4_y4k32x32w8_u4_nopred" } else { k8 };
    let cases = [
        (1024, 16384, 120.0, 32, Some("s1d1_y1k32x32w32_u4_pred")),
        (4096, 8192, 40.0, 64, Some("s1d8_y4k8x64w8_u4_nopred")),
        (2048, 8192, 120.0, 64, Some("s4d4_y4k32x32w8_u4_nopred")),
        (1024, 8192, 40.0, 128, Some(k8)),
        (2048, 4096, 12.0, 32, None),
        (16384, 1024, 40.0, 32, Some(k8)),
        (16384, 1024, 120.0, 32, Some(long_rows_at_32)),
        (16384, 4096, 24.0, 96, Some(k8)),
        (16385, 4096, 8.0, 32, Some(k8)),
        (8192, 2048, 20.0, 32, Some(k8)),
    ];
    for (i, (m, k, mean, n, expected)) in cases.into_iter().enumerate() {
        let a = gen::uniform_random(m, k, mean / k as f64, seed(140 + i as u64));
        let what = format!("{} {m} x {k}, mean {mean}, n = {n}", T::DTYPE);
        let used = check_auto::<T>(gpu, &what, &a, n, seed(150 + i as u64));
        match expected {
            Some(tile) => assert_eq!(used.to_string(), format!("spmm_{}_{tile}", T::DTYPE.name()), "{what}"),
            None => assert!(matches!(used, SpmmKernel::TensorCore(_)), "{what}: {used}"),
        }
    }
}

#[test]
fn automatic_tiles_for_sparse_windows() {
    let Some(gpu) = gpu_or_skip("automatic_tiles_for_sparse_windows") else { return };
    automatic_tiles_for_sparse_windows_case::<f16>(&gpu);
    automatic_tiles_for_sparse_windows_case::<bf16>(&gpu);
}

/// f16/bf16 block-sparse rows (`gen::block_sparse`), whose 16-row windows are 3.4-3.5 times as full as the 64-row
/// ones (src/spmm/tensor_core.rs, `narrow_windows_fuller`; NOTES.md, "SpMM step 80"): `spmm_auto` runs the 16-row
/// windows, and they match the oracle on a poisoned C; 4096 rows at n = 1024 with 6.2 k-blocks per 16-row window keep
/// the 64-row ones.
fn automatic_narrow_windows_on_blocks_case<T: Scalar>(gpu: &Gpu) {
    let cases = [
        (4096, 1024, 16, 128, "spmm_tc_{}_n8"),
        (4096, 1024, 16, 1024, "spmm_tc_{}_w64_n16"),
        (2048, 4096, 16, 1024, "spmm_tc_{}_n8"),
        (768, 1536, 16, 1024, "spmm_tc_{}_n8"),
    ];
    for (i, (m, k, side, n, expected)) in cases.into_iter().enumerate() {
        let a = gen::block_sparse(m, k, side, side, 0.1, seed(170 + i as u64));
        let what = format!("{} {m} x {k} in {side} x {side} blocks at 10%, n = {n}", T::DTYPE);
        let used = check_auto::<T>(gpu, &what, &a, n, seed(180 + i as u64));
        assert_eq!(used.to_string(), expected.replace("{}", T::DTYPE.name()), "{what}");
    }
}

#[test]
fn automatic_narrow_windows_on_blocks() {
    let Some(gpu) = gpu_or_skip("automatic_narrow_windows_on_blocks") else { return };
    automatic_narrow_windows_on_blocks_case::<f16>(&gpu);
    automatic_narrow_windows_on_blocks_case::<bf16>(&gpu);
}

/// f32 block-sparse rows (`gen::block_sparse`) take the 16-row 3xTF32 windows (src/spmm/tensor_core.rs,
/// `f32_narrow_windows`; NOTES.md, "SpMM steps 81 and 86"): 32 x 32 blocks in 1024 rows at n = 128 and at n = 130 (B
/// and C padded to 136 around the product), 16 x 16 blocks (3.4 times as full as the 64-row windows) at n = 1024, 64 x
/// 64 blocks (every window height full, short windows, a small 64-row launch) at n = 128 and 200; `spmm_auto` runs them
/// and they match the oracle on a poisoned C. Uniform rows at 10% do not take them.
#[test]
fn automatic_f32_narrow_windows_on_blocks() {
    let Some(gpu) = gpu_or_skip("automatic_f32_narrow_windows_on_blocks") else { return };
    let narrow = "spmm_tc_f32_n4";
    for (i, (m, k, side, density, n)) in [
        (1024, 4096, 32, 0.05, 128),
        (1024, 4096, 32, 0.05, 130),
        (2048, 2048, 16, 0.1, 1024),
        (1024, 4096, 64, 0.05, 128),
        (2048, 2048, 64, 0.1, 200),
    ]
    .into_iter()
    .enumerate()
    {
        let a = gen::block_sparse(m, k, side, side, density, seed(190 + i as u64));
        let what = format!("f32 {m} x {k} in {side} x {side} blocks at {density}, n = {n}");
        assert_eq!(check_auto::<f32>(&gpu, &what, &a, n, seed(370 + i as u64)).to_string(), narrow, "{what}");
    }
    let a = gen::uniform_random(2048, 2048, 0.1, seed(199));
    let used = check_auto::<f32>(&gpu, "f32 uniform 2048 x 2048 at 10%, n = 1024", &a, 1024, seed(200));
    assert_ne!(used.to_string(), narrow, "uniform rows");
}

/// Rows that share their columns in runs of 32 (32 x 32 and 32 x 16 blocks: the 32-row windows as full as the 16-row
/// ones, the 64-row ones half full) take the 32-row windows where the choice had been the 64-row ones
/// (src/spmm/tensor_core.rs, `mid_windows`; NOTES.md, "SpMM step 85"), in every type: `spmm_auto` runs them and they
/// match the oracle on a poisoned C, also at n = 130 (B and C padded to 136 around the product).
fn automatic_mid_windows_case<T: Scalar>(gpu: &Gpu) {
    let f32 = T::DTYPE == DType::F32;
    let cases = [
        (4096, 4096, 32, 32, 0.2, 128, if f32 { 8 } else { 16 }),
        (8192, 2048, 32, 32, 0.05, 128, 8),
        (8192, 2048, 32, 32, 0.05, 130, if f32 { 8 } else { 16 }),
        (2048, 4096, 32, 16, 0.2, 1024, if f32 { 8 } else { 16 }),
    ];
    for (i, (m, k, r, c, density, n, tiles)) in cases.into_iter().enumerate() {
        let a = gen::block_sparse(m, k, r, c, density, seed(330 + i as u64));
        let what = format!("{} {m} x {k} in {r} x {c} blocks at {density}, n = {n}", T::DTYPE);
        let used = check_auto::<T>(gpu, &what, &a, n, seed(340 + i as u64));
        assert_eq!(used.to_string(), format!("spmm_tc_{}_w32_n{tiles}", T::DTYPE.name()), "{what}");
    }
}

#[test]
fn automatic_mid_windows_on_rows_of_32() {
    let Some(gpu) = gpu_or_skip("automatic_mid_windows_on_rows_of_32") else { return };
    automatic_mid_windows_case::<f16>(&gpu);
    automatic_mid_windows_case::<bf16>(&gpu);
    automatic_mid_windows_case::<f32>(&gpu);
}

/// The cuSPARSE BSR baseline (`CusparseSpmm::new_bsr`, beside the CSR algorithms in `bench spmm`) computes A * B: f32
/// block-sparse rows read as blocks of their own size and of half of it, uniform rows as blocks of 4, n = 40 and 129,
/// against the oracle (the FMA bound: cuSPARSE sums in f32 in its own order) on a poisoned C. A BSR whose columns do
/// not match B is a typed error.
#[test]
fn cusparse_bsr_baseline_matches_the_oracle() {
    use tilesparse::baseline::cusparse::{Cusparse, CusparseSpmm, HostBsr};
    let Some(gpu) = gpu_or_skip("cusparse_bsr_baseline_matches_the_oracle") else { return };
    let lib = Cusparse::new(&gpu).unwrap();
    let cases = [
        (gen::block_sparse(256, 384, 16, 16, 0.2, seed(250)), 16),
        (gen::block_sparse(256, 384, 16, 16, 0.2, seed(251)), 8),
        (gen::uniform_random(96, 160, 0.6, seed(252)), 4),
    ];
    for (i, (a, block)) in cases.iter().enumerate() {
        for n in [40, 129] {
            let what = format!("BSR b{block}, {} x {} ({} entries), n = {n}", a.rows(), a.cols(), a.nnz());
            let (oracle, _a_dev, b_dev, mut c_dev) = upload_problem::<f32>(&gpu, a, n, seed(255 + i as u64));
            let bsr = HostBsr::from_csr(a.view(), *block).unwrap();
            c_dev.fill(&gpu, POISON as f32).unwrap();
            CusparseSpmm::new_bsr(&gpu, &lib, &bsr, &b_dev, &mut c_dev)
                .and_then(|mut op| op.run(&gpu))
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            oracle.check(&what, &c_dev.download(&gpu).unwrap());
        }
    }
    let (a, block) = &cases[0];
    let bsr = HostBsr::from_csr(a.view(), *block).unwrap();
    let b = DeviceDense::<f32>::zeros(&gpu, a.cols() + 16, 8).unwrap();
    let mut c = DeviceDense::<f32>::zeros(&gpu, a.rows(), 8).unwrap();
    let r = CusparseSpmm::new_bsr(&gpu, &lib, &bsr, &b, &mut c).map(|_| ());
    assert!(matches!(r, Err(Error::ShapeMismatch(_))), "{r:?}");
}

/// The bias + ReLU pass over C (`baseline::epilogue::bias_relu_pass`, the unfused epilogue `bench spmm --bias-relu`
/// times cuSPARSE with) in every type: each element is T(ReLU(f32(c) + bias[row])), bit for bit, on shapes from 1 x 1
/// to 1100 x 1024 (past one grid's four elements per thread, so the kernel's unrolled loop and its tail both run),
/// with NaN, +Inf and -Inf in C and in the bias (a NaN stays NaN, -Inf becomes 0); a bias of the wrong length is a
/// typed error and C is left as it was, as is an f64 C; an empty C passes. Then cuSPARSE's SpMM followed by the pass
/// (`CusparseSpmm::run_bias_relu`), f32, against the oracle's ReLU(A * B + bias) on a poisoned C.
#[test]
fn bias_relu_pass_matches_its_definition() {
    use tilesparse::baseline::cusparse::{Cusparse, CusparseSpmm, SpmmAlg};
    use tilesparse::baseline::epilogue::bias_relu_pass;
    let Some(gpu) = gpu_or_skip("bias_relu_pass_matches_its_definition") else { return };
    fn case<T: Scalar>(gpu: &Gpu) {
        for (i, (m, n)) in [(1, 1), (7, 33), (130, 517), (1100, 1024)].into_iter().enumerate() {
            let what = format!("{} {m} x {n}", T::DTYPE);
            let mut c: Vec<T> = dense::<T>(m, n, seed(400 + i as u64));
            for (at, v) in [(0, f32::NAN), (n / 2, f32::INFINITY), (m * n - 1, f32::NEG_INFINITY)] {
                c[at] = T::from_f32(v);
            }
            let special = [(0, 0.25), (m / 2, f32::NAN), (m - 1, f32::NEG_INFINITY)];
            let mut bias = bias_with(m, &special);
            if m > 3 {
                bias[1] = f32::INFINITY;
            }
            let want: Vec<T> = c
                .iter()
                .enumerate()
                .map(|(at, v)| {
                    let y = v.to_f32() + bias[at / n];
                    T::from_f32(if y < 0.0 { 0.0 } else { y })
                })
                .collect();
            let mut c_dev = DeviceDense::upload(gpu, m, n, &c).unwrap();
            let bias_dev = gpu.stream().clone_htod(&bias).unwrap();
            bias_relu_pass(gpu, &mut c_dev, &bias_dev).unwrap_or_else(|e| panic!("{what}: {e}"));
            let got = c_dev.download(gpu).unwrap();
            let mismatch = got.iter().zip(&want).position(|(g, w)| {
                let (g, w) = (g.to_f64(), w.to_f64());
                !(g.to_bits() == w.to_bits() || g.is_nan() && w.is_nan())
            });
            if let Some(at) = mismatch {
                panic!("{what}: C[{}][{}] = {:?}, want {:?}", at / n, at % n, got[at], want[at]);
            }
            let zeros = got.iter().filter(|v| v.to_f64() == 0.0).count();
            assert!(zeros > 0 && zeros < got.len() || m * n == 1, "{what}: the ReLU cleared {zeros} elements");
            for len in [m + 1, if m > 1 { m - 1 } else { m + 2 }] {
                let wrong = gpu.stream().clone_htod(&vec![-1.0f32; len]).unwrap();
                let r = bias_relu_pass(gpu, &mut c_dev, &wrong);
                assert!(matches!(r, Err(Error::ShapeMismatch(_))), "{what}: a bias of {len}: {r:?}");
            }
            assert!(same_bits(&c_dev.download(gpu).unwrap(), &got), "{what}: a refused pass changed C");
        }
        for (m, n) in [(0, 5), (5, 0)] {
            let mut empty = DeviceDense::<T>::zeros(gpu, m, n).unwrap();
            let bias = gpu.stream().clone_htod(&vec![1.0f32; m.max(1)]).unwrap();
            bias_relu_pass(gpu, &mut empty, &bias).unwrap_or_else(|e| panic!("{} {m} x {n}: {e}", T::DTYPE));
        }
    }
    case::<f32>(&gpu);
    case::<f16>(&gpu);
    case::<bf16>(&gpu);
    // f64 has no pass: a typed error, C untouched.
    let mut c64 = DeviceDense::upload(&gpu, 2, 3, &[-1.0f64; 6]).unwrap();
    let bias = gpu.stream().clone_htod(&[1.0f32; 2]).unwrap();
    let r = bias_relu_pass(&gpu, &mut c64, &bias);
    assert!(matches!(r, Err(Error::UnsupportedDtype { .. })), "f64: {r:?}");
    assert_eq!(c64.download(&gpu).unwrap(), vec![-1.0f64; 6], "f64: a refused pass changed C");

    let lib = Cusparse::new(&gpu).unwrap();
    let a = gen::power_law(700, 900, 12.0, 1.5, seed(410));
    for n in [40, 129] {
        let (oracle, a_dev, b_dev, mut c_dev) = upload_problem::<f32>(&gpu, &a, n, seed(411));
        let spread = (a.nnz() as f32 / a.rows() as f32).sqrt() / 3.0;
        let bias: Vec<f32> = bias_with(a.rows(), &[(3, f32::NAN)]).iter().map(|v| v * spread).collect();
        let bias_dev = gpu.stream().clone_htod(&bias).unwrap();
        let oracle = oracle.bias_relu::<f32>(&bias, n);
        for alg in SpmmAlg::ALL {
            let what = format!("cuSPARSE {} + the pass, n = {n}", alg.name());
            c_dev.fill(&gpu, POISON as f32).unwrap();
            CusparseSpmm::new(&gpu, &lib, &a_dev, &b_dev, &mut c_dev, alg)
                .and_then(|mut op| op.run_bias_relu(&gpu, &bias_dev))
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            oracle.check(&what, &c_dev.download(&gpu).unwrap());
        }
        let short = gpu.stream().clone_htod(&bias[1..]).unwrap();
        let r = CusparseSpmm::new(&gpu, &lib, &a_dev, &b_dev, &mut c_dev, SpmmAlg::CsrAlg3)
            .and_then(|mut op| op.run_bias_relu(&gpu, &short));
        assert!(matches!(r, Err(Error::ShapeMismatch(_))), "a bias one short: {r:?}");
    }
}

/// C = A * B (f32) against the f64 oracle with a bound for one pass of TF32 on the tensor cores, what cuSPARSE's f32
/// Blocked-ELL SpMM computes (its errors are of 2^-11 relative, not f32's 2^-24): each input cut to tf32 (10 fraction
/// bits, truncated: |x - x'| < 2^-10 |x|), so each product is off by less than (2^-9 + 2^-20) |a b|, and the sum of
/// a row of l products, however the tensor cores order and truncate it, by gamma(l + 64, 2^-23) S (S = |A||B|).
fn check_tf32(what: &str, a: CsMatView<f32>, b: &[f32], n: usize, got: &[f32]) {
    let (want, abs) = (oracle::spmm(a, b, n), oracle::spmm_abs(a, b, n));
    let bound: Vec<f64> = (0..a.rows())
        .flat_map(|i| {
            let l = (a.outer_view(i).map_or(0, |r| r.nnz()) + 64) as f64 * 2f64.powi(-23);
            let coef = 2f64.powi(-9) + 2f64.powi(-20) + l / (1.0 - l);
            abs[i * n..(i + 1) * n].iter().map(move |s| coef * s + 1e-30).collect::<Vec<f64>>()
        })
        .collect();
    let got: Vec<f64> = got.iter().map(|&v| v as f64).collect();
    let cmp = oracle::compare(&got, &want, &bound);
    assert_eq!(cmp.mismatches, 0, "{what}: first (index, got, want) = {:?} ({})", cmp.first_mismatch, seed_note());
}

/// The cuSPARSE Blocked-ELL baseline (`CusparseSpmm::new_blocked_ell`, beside the CSR algorithms in `bench spmm`)
/// computes A * B: block-sparse rows of different block counts (padded to the longest) read as blocks of 16 and 8,
/// uniform rows as blocks of 4, n = 40 and 129, against the oracle on a poisoned C: f16 and bf16 with the bound of
/// our own tensor-core kernels (products exact in f32, sums in f32), f32 with a one-pass TF32 bound ([`check_tf32`]:
/// cuSPARSE computes f32 Blocked-ELL in TF32, and fails the f32 FMA bound, measured on the H200). A Blocked-ELL whose
/// columns do not match B is a typed error.
fn cusparse_blocked_ell_case<T: Scalar>(gpu: &Gpu) {
    use tilesparse::baseline::cusparse::{Cusparse, CusparseSpmm, HostBlockedEll, HostBsr};
    let lib = Cusparse::new(gpu).unwrap();
    let cases = [
        (gen::block_sparse(256, 384, 16, 16, 0.2, seed(260)), 16),
        (gen::block_sparse(256, 384, 16, 16, 0.2, seed(261)), 8),
        (gen::uniform_random(96, 160, 0.6, seed(262)), 4),
    ];
    for (i, (a, block)) in cases.iter().enumerate() {
        for n in [40, 129] {
            let what = format!(
                "{} Blocked-ELL b{block}, {} x {} ({} entries), n = {n}",
                T::DTYPE,
                a.rows(),
                a.cols(),
                a.nnz()
            );
            let (oracle, _a_dev, b_dev, mut c_dev) = upload_problem::<T>(gpu, a, n, seed(265 + i as u64));
            let a_t: CsMat<T> = gen::convert(a);
            let ell = HostBlockedEll::from_bsr(&HostBsr::from_csr(a_t.view(), *block).unwrap()).unwrap();
            c_dev.fill(gpu, T::from_f64(POISON)).unwrap();
            CusparseSpmm::new_blocked_ell(gpu, &lib, &ell, &b_dev, &mut c_dev)
                .and_then(|mut op| op.run(gpu))
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            let got = c_dev.download(gpu).unwrap();
            if T::DTYPE == DType::F32 {
                let got: Vec<f32> = got.iter().map(|v| v.to_f64() as f32).collect();
                check_tf32(
                    &what,
                    gen::convert::<f32>(a).view(),
                    &dense::<f32>(a.cols(), n, seed(265 + i as u64)),
                    n,
                    &got,
                );
            } else {
                oracle.check_summation(&what, &got, oracle::Summation::TensorCoreHalf);
            }
        }
    }
    let (a, block) = &cases[0];
    let a_t: CsMat<T> = gen::convert(a);
    let ell = HostBlockedEll::from_bsr(&HostBsr::from_csr(a_t.view(), *block).unwrap()).unwrap();
    let b = DeviceDense::<T>::zeros(gpu, a.cols() + 16, 8).unwrap();
    let mut c = DeviceDense::<T>::zeros(gpu, a.rows(), 8).unwrap();
    let r = CusparseSpmm::new_blocked_ell(gpu, &lib, &ell, &b, &mut c).map(|_| ());
    assert!(matches!(r, Err(Error::ShapeMismatch(_))), "{r:?}");
}

#[test]
fn cusparse_blocked_ell_baseline_matches_the_oracle() {
    let Some(gpu) = gpu_or_skip("cusparse_blocked_ell_baseline_matches_the_oracle") else { return };
    cusparse_blocked_ell_case::<f32>(&gpu);
    cusparse_blocked_ell_case::<f16>(&gpu);
    cusparse_blocked_ell_case::<bf16>(&gpu);
}

/// `spmm_tune` on fresh matrices of type T, awkward shapes included. C, poisoned first, holds A * B by the chosen
/// kernel (checked against the oracle with that kernel's bound, and bit for bit against another run of it), and the
/// report holds together: the automatic choice is `spmm_auto`'s and one of the candidates, every candidate was
/// timed or skipped, the finalists include the automatic choice, and the choice replaced it only where a finalist
/// was faster by the margin. Then `spmm_tune_bias_relu` on one of them, with a bias, and `spmm_tune_with` with the
/// scalars and a bias on a C that is read.
fn tuned_kernels_case<T: Scalar>(gpu: &Gpu) {
    let cases: Vec<(String, CsMat<f32>, usize)> = vec![
        ("uniform 4096 x 4096 at 5%".into(), gen::uniform_random(4096, 4096, 0.05, seed(200)), 128),
        ("power-law 1000 x 3000".into(), gen::power_law(1000, 3000, 40.0, 2.0, seed(201)), 33),
        ("7 x 96, nnz 333".into(), gen::uniform_random_nnz(7, 96, 333, seed(202)), 40),
        ("one row".into(), gen::uniform_random(1, 500, 0.3, seed(203)), 64),
        ("no entries".into(), gen::uniform_random_nnz(64, 80, 0, seed(204)), 16),
    ];
    let opts = TuneOptions::default();
    for (i, (what, a, n)) in cases.into_iter().enumerate() {
        // Every other case with the first round's cutoff at any size (by default only from 1 ms per run).
        let cut = i % 2 == 1;
        let opts = if cut { TuneOptions { cutoff_from_ms: 0.0, ..opts.clone() } } else { opts.clone() };
        let what = format!("{} {what}, n = {n}{}", T::DTYPE, if cut { ", screen cutoff" } else { "" });
        let (oracle, a_dev, b_dev, mut c_dev) = upload_problem::<T>(gpu, &a, n, seed(210 + i as u64));
        c_dev.fill(gpu, T::from_f64(POISON)).unwrap();
        let t = spmm_tune(gpu, &a_dev, &b_dev, &mut c_dev, &opts).unwrap_or_else(|e| panic!("{what}: {e}"));
        let tuned_c = c_dev.download(gpu).unwrap();
        oracle.check_kernel(&format!("{what}, tuned ({})", t.kernel), &tuned_c, &t.kernel);
        c_dev.fill(gpu, T::from_f64(POISON)).unwrap();
        spmm_kernel(gpu, &a_dev, &b_dev, &mut c_dev, &t.kernel).unwrap();
        let again = c_dev.download(gpu).unwrap();
        assert!(same_bits(&tuned_c, &again), "{what}: a second run of {} gave other bits", t.kernel);
        c_dev.fill(gpu, T::from_f64(POISON)).unwrap();
        let auto = spmm_auto(gpu, &a_dev, &b_dev, &mut c_dev).unwrap();
        assert_eq!(t.automatic, auto, "{what}");
        let candidates = tune_candidates(gpu.info(), T::DTYPE, a.rows(), a.cols(), n);
        assert!(candidates.contains(&t.automatic), "{what}: {} is not a candidate", t.automatic);
        assert!(candidates.contains(&t.kernel), "{what}: {} is not a candidate", t.kernel);
        assert_eq!(t.screened + t.skipped.len(), candidates.len(), "{what}: {:?}", t.skipped);
        assert!(t.screened > 1, "{what}: only {} kernels timed", t.screened);
        assert!(t.finalists.len() <= opts.finalists + 1, "{what}");
        assert!(t.finalists.windows(2).all(|w| w[0].ms <= w[1].ms), "{what}: finalists not fastest first");
        let time_of = |k: SpmmKernel| t.finalists.iter().find(|f| f.kernel == k).map(|f| f.ms);
        assert_eq!(time_of(t.automatic), Some(t.automatic_ms), "{what}: the automatic choice is a finalist");
        assert_eq!(time_of(t.kernel), Some(t.ms), "{what}: the choice is a finalist");
        assert!(t.finalists.iter().all(|f| f.ms.is_finite() && f.ms > 0.0), "{what}: {:?}", t.finalists);
        let beaten = t.automatic_ms * (1.0 - opts.margin);
        if t.kernel == t.automatic {
            assert!(t.finalists.iter().all(|f| f.ms > beaten), "{what}: a finalist beat the margin: {:?}", t.finalists);
        } else {
            assert!(
                t.ms <= beaten,
                "{what}: {} at {} ms replaced {} at {} ms",
                t.kernel,
                t.ms,
                t.automatic,
                t.automatic_ms
            );
            assert_eq!(t.finalists[0].kernel, t.kernel, "{what}: the fastest finalist is chosen");
        }
        println!(
            "{what}: {} ({:.4} ms) over the automatic {} ({:.4} ms), {} timed in {:?}",
            t.kernel, t.ms, t.automatic, t.automatic_ms, t.screened, t.elapsed
        );
    }
    // C = ReLU(A * B + bias) tuned with the epilogue (`spmm_tune_bias_relu`): C holds it by the chosen kernel, the
    // same bits as that kernel's own run with the bias; a bias one short is refused.
    let a = gen::power_law(1000, 3000, 40.0, 2.0, seed(205));
    let (oracle, a_dev, b_dev, mut c_dev) = upload_problem::<T>(gpu, &a, 72, seed(215));
    let spread = (a.nnz() as f32 / a.rows() as f32).sqrt() / 3.0;
    let bias: Vec<f32> = bias_with(a.rows(), &[(2, f32::NAN)]).iter().map(|v| v * spread).collect();
    let bias_dev = gpu.stream().clone_htod(&bias).unwrap();
    let what = format!("{} power-law 1000 x 3000, n = 72, bias + ReLU", T::DTYPE);
    c_dev.fill(gpu, T::from_f64(POISON)).unwrap();
    let t = spmm_tune_bias_relu(gpu, &a_dev, &b_dev, &bias_dev, &mut c_dev, &opts)
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let tuned_c = c_dev.download(gpu).unwrap();
    oracle.bias_relu::<T>(&bias, 72).check_kernel(&format!("{what}, tuned ({})", t.kernel), &tuned_c, &t.kernel);
    c_dev.fill(gpu, T::from_f64(POISON)).unwrap();
    spmm_kernel_bias_relu(gpu, &a_dev, &b_dev, &bias_dev, &mut c_dev, &t.kernel).unwrap();
    assert!(same_bits(&c_dev.download(gpu).unwrap(), &tuned_c), "{what}: {} run again", t.kernel);
    assert!(t.screened > 1 && t.finalists.iter().any(|f| f.kernel == t.kernel), "{what}: {t:?}");
    let short = gpu.stream().clone_htod(&bias[1..]).unwrap();
    let r = spmm_tune_bias_relu(gpu, &a_dev, &b_dev, &short, &mut c_dev, &opts);
    assert!(matches!(r, Err(Error::ShapeMismatch(_))), "{what}: a bias one short: {:?}", r.map(|t| t.kernel));
    // C = ReLU(-1.5 A * B + 0.75 C + bias) tuned with the whole epilogue (`spmm_tune_with`): every timed run reads
    // the last one's C, yet C ends as one run of the chosen kernel on C's starting values (its own run's bits), and
    // the NaN and Inf there reach C.
    let epilogue = SpmmEpilogue { alpha: -1.5, beta: 0.75, bias: Some(&bias_dev) };
    let what = format!("{} power-law 1000 x 3000, n = 72, alpha -1.5, beta 0.75, bias + ReLU", T::DTYPE);
    let mut old: Vec<T> = gen::dense_matrix(1000, 72, seed(216)).into_iter().map(T::from_f32).collect();
    (old[72 * 5 + 3], old[72 * 700 + 70]) = (T::from_f32(f32::NAN), T::from_f32(f32::INFINITY));
    let mut c_dev = DeviceDense::upload(gpu, 1000, 72, &old).unwrap();
    let t = spmm_tune_with(gpu, &a_dev, &b_dev, &mut c_dev, epilogue, &opts).unwrap_or_else(|e| panic!("{what}: {e}"));
    let tuned_c = c_dev.download(gpu).unwrap();
    let scaled = oracle.epilogue::<T>(-1.5, 0.75, &old, Some(&bias), 72);
    scaled.check_kernel(&format!("{what}, tuned ({})", t.kernel), &tuned_c, &t.kernel);
    assert!(tuned_c[72 * 5 + 3].to_f64().is_nan(), "{what}: C's NaN must reach C");
    let mut c_dev = DeviceDense::upload(gpu, 1000, 72, &old).unwrap();
    spmm_kernel_with(gpu, &a_dev, &b_dev, &mut c_dev, &t.kernel, epilogue).unwrap();
    assert!(same_bits(&c_dev.download(gpu).unwrap(), &tuned_c), "{what}: {} run again", t.kernel);
    assert!(t.screened > 1 && t.finalists.iter().any(|f| f.kernel == t.kernel), "{what}: {t:?}");
    // Options that cannot measure are refused before anything runs.
    let (_, a_dev, b_dev, mut c_dev) = upload_problem::<T>(gpu, &gen::uniform_random(8, 8, 0.5, seed(220)), 8, 1);
    for bad in [
        TuneOptions { margin: 1.0, ..opts.clone() },
        TuneOptions { iters: 0, ..opts.clone() },
        TuneOptions { screen_cutoff: 0.99, ..opts.clone() },
        TuneOptions { screen_cutoff: f64::NAN, ..opts.clone() },
        TuneOptions { cutoff_from_ms: f64::NAN, ..opts.clone() },
    ] {
        let e = spmm_tune(gpu, &a_dev, &b_dev, &mut c_dev, &bad).unwrap_err();
        assert!(matches!(e, Error::Usage(_)), "{bad:?}: {e}");
    }
}

#[test]
fn tuned_kernels_match_the_oracle() {
    let Some(gpu) = gpu_or_skip("tuned_kernels_match_the_oracle") else { return };
    tuned_kernels_case::<f32>(&gpu);
    tuned_kernels_case::<f16>(&gpu);
    tuned_kernels_case::<bf16>(&gpu);
}

/// f16/bf16 short rows at a wide n (src/spmm/select.rs, `very_short_rows_wide_n_half`,
/// `short_rows_many_rows_wide_n_half`; NOTES.md, "SpMM step 54"): `spmm_auto` runs the 256-column tile on rows of
/// 5 over k = 3000 at n = 512, and the bounded k = 8 tile on 20000 rows of 10 at n = 768 and (step 65) on 6000 rows
/// of 10 at n = 1024; each matches the oracle on a poisoned C.
fn automatic_tiles_for_short_rows_at_wide_n_case<T: Scalar>(gpu: &Gpu) {
    let cases = [
        (12000, 3000, 5.0, 512, "s1d8_y2k16x256w16_u4_nopred"),
        (20000, 5000, 10.0, 768, "s1d8_y4k8x64w8_u4_nopred_lb32"),
        (6000, 6000, 10.0, 1024, "s1d8_y4k8x64w8_u4_nopred_lb32"),
    ];
    for (i, (m, k, mean, n, tile)) in cases.into_iter().enumerate() {
        let a = gen::uniform_random(m, k, mean / k as f64, seed(250 + i as u64));
        let what = format!("{} {m} x {k}, mean {mean}, n = {n}", T::DTYPE);
        let used = check_auto::<T>(gpu, &what, &a, n, seed(260 + i as u64));
        assert_eq!(used.to_string(), format!("spmm_{}_{tile}", T::DTYPE.name()), "{what}");
    }
}

#[test]
fn automatic_tiles_for_short_rows_at_wide_n() {
    let Some(gpu) = gpu_or_skip("automatic_tiles_for_short_rows_at_wide_n") else { return };
    automatic_tiles_for_short_rows_at_wide_n_case::<f16>(&gpu);
    automatic_tiles_for_short_rows_at_wide_n_case::<bf16>(&gpu);
}

/// Step 55's choices through `spmm_auto`, against the oracle on a poisoned C: f16/bf16 power-law rows take the
/// 16-row windows where C is small and the 64-row ones from 7% full; f32 rows of 400 over k = 16384 the
/// thirty-two-row block at n = 256, many rows of 8 the two-row tile at n = 512.
fn automatic_choices_of_step_55_case<T: Scalar>(gpu: &Gpu) {
    let half = T::DTYPE.size() == 2;
    // (generator, m, k, mean, n, kernel, rows): "uneven" rows of cv 0.8-2.0 neither skewed nor long for their mean,
    // "long" rows (longest past 256 and 16 times the mean, not skewed), or "any".
    let cases: &[(&str, usize, usize, f64, usize, &str, &str)] = if half {
        &[
            ("powerlaw", 2048, 8192, 4.0, 512, "tc_{t}_n8", "uneven"),
            ("powerlaw", 1024, 2048, 12.0, 512, "tc_{t}_n8", "long"),
            ("powerlaw", 4096, 512, 40.0, 512, "tc_{t}_w64_n8", "uneven"),
        ]
    } else {
        &[
            ("uniform", 2048, 16384, 400.0, 256, "{t}_s1d4_y32k16x64w16_u4_nopred", "any"),
            ("uniform", 20000, 2048, 8.0, 512, "{t}_s1d4_y2k16x128w16_u4_nopred_lb16", "any"),
        ]
    };
    for (i, &(generator, m, k, mean, n, expect, rows)) in cases.iter().enumerate() {
        // The power-law generator's tail draws a row long for the mean now and then (1 draw in 8 for the first
        // shape), or none: the rows must be of the kind the case is for, whose bounds the unit tests check on both
        // sides.
        let in_range = |a: &CsMat<f32>| {
            let s = RowStats::from_indptr(a.indptr().raw_storage());
            let (long, skewed) = (split::has_long_rows(&s), split::is_skewed(&s));
            match rows {
                "uneven" => (0.8..=2.0).contains(&s.cv) && !long && !skewed,
                "long" => long && !skewed,
                _ => true,
            }
        };
        let draw = Draw { generator, m, k, mean, rows, draws: 20, seeds: 270 + 10 * i as u64 };
        check_auto_on_a_draw::<T>(gpu, &draw, in_range, n, expect, seed(280 + i as u64));
    }
}

/// Matrices drawn by [`check_auto_on_a_draw`]: `generator`'s m x k at `mean` entries a row, seeds from `seeds`, up
/// to `draws` times, until the rows are of the kind `rows` names.
struct Draw<'a> {
    generator: &'a str,
    m: usize,
    k: usize,
    mean: f64,
    rows: &'a str,
    draws: u64,
    seeds: u64,
}

/// Draws A until `in_range` holds (the generators draw rows of each kind with some probability), runs `spmm_auto`
/// on it at width n against the oracle on a poisoned C, and asserts that the kernel's name starts with `spmm_` and
/// `expect` ("{t}" standing for T's name); returns the kernel's name.
fn check_auto_on_a_draw<T: Scalar>(
    gpu: &Gpu,
    d: &Draw,
    in_range: impl Fn(&CsMat<f32>) -> bool,
    n: usize,
    expect: &str,
    b_seed: u64,
) -> String {
    let (generator, m, k, mean, rows) = (d.generator, d.m, d.k, d.mean, d.rows);
    let a = (0..d.draws)
        .map(|t| gen::by_name(generator, m, k, mean / k as f64, seed(d.seeds + t)).unwrap())
        .find(|a| in_range(a))
        .unwrap_or_else(|| panic!("{generator} {m} x {k}: no {rows} rows in {} draws ({})", d.draws, seed_note()));
    let what = format!("{} {generator} {m} x {k}, mean {mean}, {rows} rows, n = {n} ({})", T::DTYPE, seed_note());
    let used = check_auto::<T>(gpu, &what, &a, n, b_seed).to_string();
    let expect = expect_for(T::DTYPE.name(), expect);
    assert!(used.starts_with(&expect), "{what}: {used}, not {expect}");
    used
}

#[test]
fn automatic_choices_of_step_55() {
    let Some(gpu) = gpu_or_skip("automatic_choices_of_step_55") else { return };
    automatic_choices_of_step_55_case::<f32>(&gpu);
    automatic_choices_of_step_55_case::<f16>(&gpu);
    automatic_choices_of_step_55_case::<bf16>(&gpu);
}

/// Step 56's choices through `spmm_auto`, against the oracle on a poisoned C (f16 and bf16): skewed power-law rows
/// whose longest row passes 3072 entries take tiles (a warp per row up to 2^18 entries at n <= 32, the k = 8 tile
/// past that and at n = 64), those up to 3072 the 16-row windows with 32 columns per warp at n = 64; rows long for
/// their mean in 1024 rows too; uneven rows in 8192 rows at n = 64 the 16-row windows with 64 columns per warp.
fn automatic_choices_of_step_56_case<T: Scalar>(gpu: &Gpu) {
    // (m, k, mean, n, kernel, rows): "skewed+ small" skewed with a longest row past 3072 and at most 2^18 entries,
    // "skewed+ large" the same past 2^18 entries, "skewed" skewed up to 3072, "long" long for the mean and not
    // skewed, "uneven" cv 0.8-2.0 and neither, with the 64-row windows under 8% full (else step 42's rule applies).
    let cases: &[(usize, usize, f64, usize, &str, &str)] = &[
        (2048, 16384, 85.0, 16, "{t}_s1d1_y1k32x32w32_u4_pred", "skewed+ small"),
        (4096, 32768, 80.0, 32, "{t}_s1d4_y4k8x32w8_u4_pred", "skewed+ large"),
        (4096, 32768, 80.0, 64, "{t}_s1d8_y4k8x64w8_u4_nopred", "skewed+ large"),
        (2048, 2048, 40.0, 64, "tc_{t}_n4", "skewed"),
        (1024, 8192, 12.0, 64, "tc_{t}_n4", "long"),
        (8192, 512, 39.0, 64, "tc_{t}_n8", "uneven"),
    ];
    for (i, &(m, k, mean, n, expect, rows)) in cases.iter().enumerate() {
        // Rows of each kind come 1 draw in 3 or more (the first shape); the unit tests check the bounds on both sides.
        let in_range = |a: &CsMat<f32>| {
            let s = RowStats::from_indptr(a.indptr().raw_storage());
            let (long, skewed) = (split::has_long_rows(&s), split::is_skewed(&s));
            let wide_fill = || {
                let counts = BlockCounts::of(k, a.indptr().raw_storage(), a.indices());
                a.nnz() as f64 / (counts.wide * 64 * 16) as f64
            };
            match rows {
                "skewed+ small" => skewed && s.max > 3072 && a.nnz() <= 1 << 18,
                "skewed+ large" => skewed && s.max > 3072 && a.nnz() > 1 << 18,
                "skewed" => skewed && s.max <= 3072,
                "long" => long && !skewed,
                _ => (0.8..=2.0).contains(&s.cv) && !long && !skewed && wide_fill() < 0.08,
            }
        };
        let draw = Draw { generator: "powerlaw", m, k, mean, rows, draws: 60, seeds: 300 + 100 * i as u64 };
        check_auto_on_a_draw::<T>(gpu, &draw, in_range, n, expect, seed(290 + i as u64));
    }
}

#[test]
fn automatic_choices_of_step_56() {
    let Some(gpu) = gpu_or_skip("automatic_choices_of_step_56") else { return };
    automatic_choices_of_step_56_case::<f16>(&gpu);
    automatic_choices_of_step_56_case::<bf16>(&gpu);
}

/// Step 66's choices through `spmm_auto` (f32), against the oracle on a poisoned C: power-law rows (cv >= 0.9) in
/// 2048-8192 rows take the 32-entry tiles at n = 32, 64 and 128 (guarded at n = 60, rounded to 64); the two-row tile
/// takes even rows of 12 over k <= 1024 in 16384 rows, and rows of 5 in 4096 rows at n = 1024.
#[test]
fn automatic_choices_of_step_66() {
    let Some(gpu) = gpu_or_skip("automatic_choices_of_step_66") else { return };
    let cases: &[(&str, usize, usize, f64, usize, &str)] = &[
        ("powerlaw", 4096, 2048, 10.0, 32, "{t}_s1d2_y2k32x32w16_u4_nopred"),
        ("powerlaw", 3072, 1024, 16.0, 64, "{t}_s1d4_y2k32x64w16_u4_nopred"),
        ("powerlaw", 2048, 8192, 4.0, 128, "{t}_s1d4_y1k32x128w32_u4_nopred"),
        ("powerlaw", 4096, 512, 40.0, 60, "{t}_s1d4_y2k32x64w16_u4_pred"),
        ("uniform", 16384, 1024, 12.0, 768, "{t}_s1d4_y2k16x128w16_u4_nopred_lb16"),
        ("uniform", 4096, 4096, 5.0, 1024, "{t}_s1d4_y2k16x128w16_u4_nopred_lb16"),
    ];
    for (i, &(generator, m, k, mean, n, expect)) in cases.iter().enumerate() {
        let rows = if generator == "powerlaw" { "power-law" } else { "even" };
        // The power-law generator's rows have cv 0.9-2.8 at these shapes (NOTES.md, "SpMM step 66"), the uniform
        // one's exactly the mean; the unit tests check the bounds on both sides.
        let in_range = |a: &CsMat<f32>| {
            let s = RowStats::from_indptr(a.indptr().raw_storage());
            if generator == "powerlaw" {
                s.cv >= 0.9 && s.mean <= 50.0
            } else {
                s.cv <= 0.5
            }
        };
        let draw = Draw { generator, m, k, mean, rows, draws: 20, seeds: 400 + 30 * i as u64 };
        check_auto_on_a_draw::<f32>(&gpu, &draw, in_range, n, expect, seed(390 + i as u64));
    }
}

/// Step 67's f32 choices through `spmm_auto`, against the oracle on a poisoned C: power-law rows in 8193-16384 rows at
/// n = 32 take four rows of 8 threads taking 16 entries a step (guarded at n = 28, rounded to 32), and so do skewed
/// power-law rows of 90 or more on average in 2048-4096 rows at n = 512-2048 (split into pieces; rows of 400 over k =
/// 8192 at n = 1024 had the four-row tile over 64 columns, which walks the longest row whole); rows long for their
/// mean in 12288 rows at n = 256 take the split two-row tile, not the one held to 128 registers; rows whose longest
/// passes 8 times the mean but is not split, in 1536-2048 rows, two warps per row at n = 512 and one at n = 1024.
#[test]
fn automatic_choices_of_step_67() {
    let Some(gpu) = gpu_or_skip("automatic_choices_of_step_67") else { return };
    // (m, k, mean, n, kernel, rows): "power-law" cv >= 0.9 and mean <= 50; "skewed" longest past 1024 entries and
    // eight times the mean (`split::is_skewed`); "long" longest past 256 entries and sixteen
    // times the mean, not skewed, with more than 350 times the longest row's entries in all; "neither" neither of
    // these, with a longest row past 256 entries and 8 times the mean.
    let cases: &[(usize, usize, f64, usize, &str, &str)] = &[
        (10240, 2048, 6.0, 32, "{t}_s2d4_y4k16x32w8_u4_nopred", "power-law"),
        (14336, 8192, 20.0, 28, "{t}_s2d4_y4k16x32w8_u4_pred", "power-law"),
        (2048, 4096, 100.0, 512, "{t}_s2d4_y4k16x32w8_u4_nopred", "skewed"),
        (3072, 8192, 120.0, 1024, "{t}_s2d4_y4k16x32w8_u4_nopred", "skewed"),
        (2048, 8192, 400.0, 1024, "{t}_s2d4_y4k16x32w8_u4_nopred", "skewed"),
        (12288, 1024, 40.0, 256, "{t}_s1d4_y2k16x128w16_u4_nopred", "long"),
        (2048, 4096, 60.0, 512, "{t}_s1d4_y2k32x128w32_u4_nopred_r2", "neither"),
        (1536, 16384, 30.0, 1024, "{t}_s1d4_y1k32x128w32_u4_nopred", "neither"),
    ];
    for (i, &(m, k, mean, n, expect, rows)) in cases.iter().enumerate() {
        let in_range = |a: &CsMat<f32>| {
            let s = RowStats::from_indptr(a.indptr().raw_storage());
            match rows {
                "power-law" => s.cv >= 0.9 && s.mean <= 50.0,
                "skewed" => split::is_skewed(&s) && s.mean >= 90.0,
                "long" => split::has_long_rows(&s) && !split::is_skewed(&s) && a.nnz() as f64 > 350.0 * s.max as f64,
                _ => {
                    let unsplit = !split::has_long_rows(&s) && !split::is_skewed(&s);
                    unsplit && s.max > 256 && s.max as f64 > 8.0 * s.mean
                }
            }
        };
        // One draw in 5-8 has "neither" rows at these shapes (checked on the host), hence 100 draws.
        let draw = Draw { generator: "powerlaw", m, k, mean, rows, draws: 100, seeds: 700 + 100 * i as u64 };
        check_auto_on_a_draw::<f32>(&gpu, &draw, in_range, n, expect, seed(690 + i as u64));
    }
}

/// Rows neither skewed nor long for their mean (`split`), of cv up to 2 (past it an earlier rule takes a warp per
/// row at n = 1024), the longest within [lo, hi]: the rows of steps 68 and 69's GPU tests.
fn unsplit_with_longest((lo, hi): (usize, usize)) -> impl Fn(&CsMat<f32>) -> bool + Copy {
    move |a: &CsMat<f32>| {
        let s = RowStats::from_indptr(a.indptr().raw_storage());
        !split::is_skewed(&s) && !split::has_long_rows(&s) && s.cv <= 2.0 && (lo..=hi).contains(&s.max)
    }
}

/// Step 68's f32 choices through `spmm_auto`, against the oracle on a poisoned C: power-law rows whose longest row,
/// walked whole by the tile the other rules give, takes 3 times a resident subwarp's share of the launch or more
/// (`select::longest_row_tile`) take 32-entry tiles: four 8-thread subwarps per row at n = 32 in up to 8192 rows of
/// more than 50, two rows of 16 threads over 32 columns at n = 64 past 8192 rows, two warps per row at n = 128 on rows
/// of 40 or more, a warp per row on shorter ones at n = 256, the thirty-two-row block at n = 1024; a warp per row over
/// 256 columns in f16 at n = 256, 512 and 2048, in bf16 at n = 256.
#[test]
fn automatic_choices_of_step_68() {
    let Some(gpu) = gpu_or_skip("automatic_choices_of_step_68") else { return };
    // (m, k, mean, n, kernel, longest): rows neither skewed nor long for their mean (`split`), of cv up to 2, the
    // longest within the range given (host-checked: 11-100 of 100 draws in range; the first draw in range chose the
    // named kernel under each of 1500 base seeds).
    type Case<'a> = (usize, usize, f64, usize, &'a str, (usize, usize));
    let cases: &[Case] = &[
        (3934, 880, 145.0, 32, "{t}_s1d4_y8k8x32w8_u4_nopred_r4", (600, usize::MAX)),
        (8287, 761, 65.0, 64, "{t}_s1d2_y2k32x32w16_u4_nopred", (500, usize::MAX)),
        (2442, 904, 132.0, 128, "{t}_s1d4_y2k32x128w32_u4_nopred_r2", (600, usize::MAX)),
        (4096, 4096, 5.0, 256, "{t}_s1d4_y1k32x128w32_u4_nopred", (120, 200)),
        (2114, 1187, 3.1, 1024, "{t}_s1d4_y32k16x64w16_u4_nopred", (140, 230)),
    ];
    let draw = |i: usize, m, k, mean, seeds: u64| Draw {
        generator: "powerlaw",
        m,
        k,
        mean,
        rows: "unsplit",
        draws: 100,
        seeds: seeds + 100 * i as u64,
    };
    for (i, &(m, k, mean, n, expect, longest)) in cases.iter().enumerate() {
        let in_range = unsplit_with_longest(longest);
        check_auto_on_a_draw::<f32>(&gpu, &draw(i, m, k, mean, 1700), in_range, n, expect, seed(1690 + i as u64));
    }
    // f16 and bf16 (`select::longest_row_tile_half`): the k = 8 tile over 64 columns walking such rows gives way to a
    // warp per row over 256 columns, in f16 at n = 256-2048, in bf16 at n = 256 (host-checked the same way, 1500 base
    // seeds per case and type).
    let half: &[(bool, Case)] = &[
        (false, (611, 22714, 27.5, 2048, "{t}_s1d8_y1k32x256w32_u4_nopred", (250, 420))),
        (false, (3024, 4986, 11.7, 512, "{t}_s1d8_y1k32x256w32_u4_nopred", (150, 260))),
        (true, (4589, 14691, 6.3, 256, "{t}_s1d8_y1k32x256w32_u4_nopred", (120, 250))),
    ];
    for (i, &(with_bf16, (m, k, mean, n, expect, longest))) in half.iter().enumerate() {
        let (draw, in_range) = (draw(i, m, k, mean, 1800), unsplit_with_longest(longest));
        check_auto_on_a_draw::<f16>(&gpu, &draw, in_range, n, expect, seed(1790 + i as u64));
        if with_bf16 {
            check_auto_on_a_draw::<bf16>(&gpu, &draw, in_range, n, expect, seed(1795 + i as u64));
        }
    }
}

/// Step 69's choices through `spmm_auto`, against the oracle on a poisoned C. f16 and bf16 power-law rows of 2 in
/// 20000 rows whose longest row the k = 8 tile would walk on the launch's critical path (`select::
/// longest_row_windows_half`, `select::longest_row_tile_half`): the 16-row windows with 32 columns a warp at n = 32,
/// the k = 16 tile at n = 64, the 64-row windows over 128 columns at n = 96 (5% full: under the windows' own
/// bounds). f32 on the same rows the k = 16 tile at n = 32 and the unbounded two-row tile at n = 128; four subwarps
/// per row in 1630 rows of 6.7 at n = 32, 64 and 96; two warps per row on 3049 rows of 66 at n = 384. Whole names.
#[test]
fn automatic_choices_of_step_69() {
    let Some(gpu) = gpu_or_skip("automatic_choices_of_step_69") else { return };
    // Host-checked: the first draw in range chose the named kernel under 1500 base seeds for every case.
    let draw = |m, k, mean, seeds| Draw { generator: "powerlaw", m, k, mean, rows: "unsplit", draws: 100, seeds };
    // At n = 64 a longest row of 60-128 keeps the k = 16 tile under step 70's windows (a ratio of 7 on it).
    let rows_of_2 = draw(20000, 2000, 2.0, 1900);
    for (n, longest, expect) in [
        (32, (100, 240), "tc_{t}_n4"),
        (64, (60, 128), "{t}_s2d8_y4k16x64w8_u4_nopred"),
        (96, (100, 240), "tc_{t}_w64_n16"),
    ] {
        let in_range = unsplit_with_longest(longest);
        let f16 = check_auto_on_a_draw::<f16>(&gpu, &rows_of_2, in_range, n, expect, seed(1910 + n as u64));
        let bf16 = check_auto_on_a_draw::<bf16>(&gpu, &rows_of_2, in_range, n, expect, seed(1920 + n as u64));
        assert_eq!(
            (f16.as_str(), bf16.as_str()),
            (expect_for("f16", expect).as_str(), expect_for("bf16", expect).as_str())
        );
    }
    // f32 (`select::longest_row_tile`): the k = 16 tile at n = 32 and the unbounded two-row tile at n = 128 on the same
    // rows (a longest row of 140 or more at n = 128); four subwarps per row in 1630 rows of 6.7 at n = 32, 64 and
    // 96; two warps per row on 3049 rows of 66 at n = 384.
    let rows_of_7 = draw(1630, 1222, 6.7, 1940);
    let f32_cases: &[(&Draw, (usize, usize), usize, &str)] = &[
        (&rows_of_2, (100, 240), 32, "{t}_s2d4_y4k16x32w8_u4_nopred"),
        (&rows_of_2, (140, 240), 128, "{t}_s1d4_y2k16x128w16_u4_nopred"),
        (&rows_of_7, (50, 240), 32, "{t}_s1d4_y8k8x32w8_u4_nopred_r4"),
        (&rows_of_7, (50, 240), 64, "{t}_s1d4_y8k8x32w8_u4_nopred_r4"),
        (&rows_of_7, (50, 240), 96, "{t}_s1d4_y8k8x32w8_u4_nopred_r4"),
        (&draw(3049, 711, 66.0, 1950), (600, usize::MAX), 384, "{t}_s1d4_y2k32x128w32_u4_nopred_r2"),
    ];
    for (i, &(d, longest, n, expect)) in f32_cases.iter().enumerate() {
        let used =
            check_auto_on_a_draw::<f32>(&gpu, d, unsplit_with_longest(longest), n, expect, seed(1960 + i as u64));
        assert_eq!(used, expect_for("f32", expect));
    }
}

/// Step 70's choices through `spmm_auto`, against the oracle on a poisoned C (`select::longest_row_windows_half`,
/// `select::longest_row_tile_half`, `select::longest_row_tile`): f16 and bf16 power-law rows of 2 in 20000 rows at n = 64 whose longest row (160-240)
/// the k = 16 tile walks for 7 times a resident subwarp's share or more take the 16-row windows, 64 columns a warp,
/// at n = 128 and 192 the k = 8 tile over 64 columns without its bound of 64 registers, at n = 256 a warp per row over
/// 256 columns (f16) or two rows of 16 threads (bf16), and the same in 9500 rows at n = 512;
/// f32 rows of 2 in 2600 rows at n = 384, where the k = 8 tile walked the longest row on the critical path, the
/// unbounded two-row tile; rows of 7.8 in 2144 rows at n = 192 (the rounded width) and 640, the thirty-two-row block.
/// Host-checked: the first draw in range chose the named kernel under 1500 base seeds.
#[test]
fn automatic_choices_of_step_70() {
    let Some(gpu) = gpu_or_skip("automatic_choices_of_step_70") else { return };
    let draw = |m, k, mean, seeds| Draw { generator: "powerlaw", m, k, mean, rows: "unsplit", draws: 100, seeds };
    let (rows_of_2, in_range) = (draw(20000, 2000, 2.0, 1900), unsplit_with_longest((160, 240)));
    let f16 = check_auto_on_a_draw::<f16>(&gpu, &rows_of_2, in_range, 64, "tc_{t}_n8", seed(2010));
    let bf16 = check_auto_on_a_draw::<bf16>(&gpu, &rows_of_2, in_range, 64, "tc_{t}_n8", seed(2020));
    assert_eq!((f16.as_str(), bf16.as_str()), ("spmm_tc_f16_n8", "spmm_tc_bf16_n8"));
    let k8 = "{t}_s1d8_y4k8x64w8_u4_nopred";
    for n in [128, 192] {
        let f16 = check_auto_on_a_draw::<f16>(&gpu, &rows_of_2, in_range, n, k8, seed(2011 + n as u64));
        let bf16 = check_auto_on_a_draw::<bf16>(&gpu, &rows_of_2, in_range, n, k8, seed(2021 + n as u64));
        assert_eq!((f16.as_str(), bf16.as_str()), (expect_for("f16", k8).as_str(), expect_for("bf16", k8).as_str()));
    }
    let (warp, two_rows_256) = ("{t}_s1d8_y1k32x256w32_u4_nopred", "{t}_s1d8_y2k16x256w16_u4_nopred");
    let f16 = check_auto_on_a_draw::<f16>(&gpu, &rows_of_2, in_range, 256, warp, seed(2050));
    let bf16 = check_auto_on_a_draw::<bf16>(&gpu, &rows_of_2, in_range, 256, two_rows_256, seed(2051));
    assert_eq!((f16, bf16), (expect_for("f16", warp), expect_for("bf16", two_rows_256)));
    let (rows_of_2_in_9500, in_range) = (draw(9500, 2000, 2.0, 1990), unsplit_with_longest((150, 400)));
    let f16 = check_auto_on_a_draw::<f16>(&gpu, &rows_of_2_in_9500, in_range, 512, warp, seed(2052));
    let bf16 = check_auto_on_a_draw::<bf16>(&gpu, &rows_of_2_in_9500, in_range, 512, two_rows_256, seed(2053));
    assert_eq!((f16, bf16), (expect_for("f16", warp), expect_for("bf16", two_rows_256)));
    let two_rows = "{t}_s1d4_y2k16x128w16_u4_nopred";
    let used = check_auto_on_a_draw::<f32>(
        &gpu,
        &draw(2600, 2046, 2.0, 1970),
        unsplit_with_longest((60, 240)),
        384,
        two_rows,
        seed(2030),
    );
    assert_eq!(used, expect_for("f32", two_rows));
    let (rows_of_8, block) = (draw(2144, 16099, 7.8, 1980), "{t}_s1d4_y32k16x64w16_u4_nopred");
    for n in [192, 640] {
        let used = check_auto_on_a_draw::<f32>(
            &gpu,
            &rows_of_8,
            unsplit_with_longest((150, 400)),
            n,
            block,
            seed(2040 + n as u64),
        );
        assert_eq!(used, expect_for("f32", block));
    }
}

/// Step 71's f32 choices through `spmm_auto`, against the oracle on a poisoned C (`select::longest_row_tile`), where
/// the k = 8 tile walked the longest row on the critical path: rows of 2 in 20000 rows at n = 64 (longest 100-240),
/// the k = 16 tile over 64 columns held to 8 blocks per SM, and at n = 96 (longest 140-240) the unbounded two-row
/// tile over 128 columns, predicated; rows of 3 in 6000 rows over k = 4000 at n = 96 (longest 120-240, 8 or more
/// times a resident subwarp's share) and over k = 16000 at n = 32 (longest 100-240), the k = 16 tile over 32 columns;
/// and step 72's: rows of 3 in 8000 rows over k = 12000 at n = 48 (longest 140-240), two rows of 16 threads over 64
/// columns taking 32 entries a step, guarded; rows of 7.8 in 2144 rows at n = 176 (longest 150-400), the
/// thirty-two-row block, guarded.
/// Host-checked: the first draw in range chose the named kernel under 1500 base seeds.
#[test]
fn automatic_choices_of_step_71() {
    let Some(gpu) = gpu_or_skip("automatic_choices_of_step_71") else { return };
    let draw = |m, k, mean, seeds| Draw { generator: "powerlaw", m, k, mean, rows: "unsplit", draws: 100, seeds };
    let (four_rows, k16) = ("{t}_s2d4_y4k16x64w8_u4_nopred_lb8", "{t}_s2d4_y4k16x32w8_u4_nopred");
    let cases = [
        (draw(20000, 2000, 2.0, 2100), (100, 240), 64, four_rows),
        (draw(20000, 2000, 2.0, 2140), (140, 240), 96, "{t}_s1d4_y2k16x128w16_u4_pred"),
        (draw(6000, 4000, 3.0, 2110), (120, 240), 96, k16),
        (draw(6000, 16000, 3.0, 2120), (100, 240), 32, k16),
        (draw(8000, 12000, 3.0, 2150), (140, 240), 48, "{t}_s2d4_y2k32x64w16_u4_pred"),
        (draw(2144, 16099, 7.8, 2160), (150, 400), 176, "{t}_s1d4_y32k16x64w16_u4_pred"),
    ];
    for (i, (d, longest, n, expect)) in cases.iter().enumerate() {
        let used =
            check_auto_on_a_draw::<f32>(&gpu, d, unsplit_with_longest(*longest), *n, expect, seed(2130 + i as u64));
        assert_eq!(used, expect_for("f32", expect));
    }
}

/// Step 73's f16/bf16 choices through `spmm_auto`, against the oracle on a poisoned C
/// (`select::longest_row_windows_half`, `select::longest_row_tile_half`): power-law rows of 2 in 20000 rows whose
/// longest row (180-240) the k = 8 tile over 64 columns walks on the critical path take the 64-row windows over 128
/// columns at n = 80 and the 16-row windows, 32 columns a warp, at n = 160; f16 at n = 224 a warp per row over 256
/// columns, guarded; step 74's n = 112, the 64-row windows. Host-checked: the first draw in range chose the named
/// kernel under 1500 base seeds.
#[test]
fn automatic_choices_of_step_73() {
    let Some(gpu) = gpu_or_skip("automatic_choices_of_step_73") else { return };
    let d = Draw { generator: "powerlaw", m: 20000, k: 2000, mean: 2.0, rows: "unsplit", draws: 100, seeds: 2200 };
    let in_range = unsplit_with_longest((180, 240));
    let cases = [(80, "tc_{t}_w64_n16"), (160, "tc_{t}_n4"), (112, "tc_{t}_w64_n16")];
    for (i, (n, expect)) in cases.into_iter().enumerate() {
        let f16 = check_auto_on_a_draw::<f16>(&gpu, &d, in_range, n, expect, seed(2300 + i as u64));
        let bf16 = check_auto_on_a_draw::<bf16>(&gpu, &d, in_range, n, expect, seed(2310 + i as u64));
        assert_eq!((f16, bf16), (expect_for("f16", expect), expect_for("bf16", expect)));
    }
    let warp = "{t}_s1d8_y1k32x256w32_u4_pred";
    let used = check_auto_on_a_draw::<f16>(&gpu, &d, in_range, 224, warp, seed(2320));
    assert_eq!(used, expect_for("f16", warp));
}

/// `expect` of [`check_auto_on_a_draw`] for the type named `t`, as the kernel's whole name.
fn expect_for(t: &str, expect: &str) -> String {
    format!("spmm_{}", expect.replace("{t}", t))
}

/// An A that stores Inf or NaN keeps `spmm_auto` off the tensor cores, whose warps would redo every tile it reaches
/// exactly (`auto_kernel`; NOTES.md, "SpMM steps 53-54"): the real matrices whose values pass f16's range, and a
/// generated one with one Inf or NaN. The tile taken matches the oracle (Inf and NaN where they belong) on a poisoned
/// C; the same matrices in bf16 (finite) and the generated one without its bad value keep the tensor cores.
#[test]
fn automatic_choice_leaves_the_tensor_cores_where_a_holds_inf_or_nan() {
    let Some(gpu) = gpu_or_skip("automatic_choice_leaves_the_tensor_cores_where_a_holds_inf_or_nan") else { return };
    fn case<T: Scalar>(gpu: &Gpu, what: &str, a: &CsMat<f32>, n: usize, non_finite: bool) {
        let (oracle, a_dev, b_dev, mut c_dev) = upload_problem::<T>(gpu, a, n, seed(230 + n as u64));
        let what = format!("{} {what}, n = {n}", T::DTYPE);
        assert_eq!(a_dev.holds_non_finite(), Some(non_finite), "{what}");
        // Without the rule the choice would be the tensor cores, so that the rule is what this test sees.
        let (m, k) = (a.rows(), a.cols());
        let stats = a_dev.stats(gpu).unwrap();
        let blocks = a_dev.tensor_core_block_count();
        let unruled = SpmmKernel::select_for(gpu.info(), m, k, n, a.nnz(), stats, T::DTYPE, blocks);
        assert!(matches!(unruled, SpmmKernel::TensorCore(_)), "{what}: {unruled}");
        c_dev.fill(gpu, T::from_f64(POISON)).unwrap();
        let used = spmm_auto(gpu, &a_dev, &b_dev, &mut c_dev).unwrap_or_else(|e| panic!("{what}: {e}"));
        oracle.check_kernel(&format!("{what} ({used})"), &c_dev.download(gpu).unwrap(), &used);
        assert_eq!(matches!(used, SpmmKernel::Tiled(_)), non_finite, "{what}: {used}");
        if !non_finite {
            assert_eq!(used, unruled, "{what}");
        }
    }
    for file in ["west0479.mtx.gz", "pores_1.mtx.gz", "lund_a.mtx.gz"] {
        let a = tilesparse::suite::load_matrix(&common::data_path(file)).unwrap();
        assert!(a.data().iter().any(|v| v.abs() > 65504.0), "{file} has no value past f16's range");
        for n in [32, 128] {
            case::<f16>(&gpu, file, &a, n, true);
            case::<bf16>(&gpu, file, &a, n, false);
        }
    }
    let a = gen::uniform_random(4096, 4096, 0.3, seed(240));
    case::<f16>(&gpu, "uniform 4096^2 at 30%", &a, 256, false);
    for (bad, name) in [(f32::INFINITY, "Inf"), (f32::NAN, "NaN")] {
        let mut with_bad = a.clone();
        with_bad.data_mut()[123_456] = bad;
        let what = format!("uniform 4096^2 at 30% with one {name}");
        case::<f16>(&gpu, &what, &with_bad, 256, true);
        case::<f32>(&gpu, &what, &with_bad, 256, true);
    }
}

#[test]
fn a_real_matrix_matches_the_oracle() {
    let Some(gpu) = gpu_or_skip("a_real_matrix_matches_the_oracle") else { return };
    for file in ["utm300.mtx.gz", "west0479.mtx.gz", "well1850.mtx.gz"] {
        let path = common::data_path(file);
        let a = tilesparse::suite::load_matrix(&path).unwrap();
        for n in [32, 100] {
            // The matrix is the file's; B is fresh. check_all_variants asserts that at least one variant ran.
            check_all_variants::<f32>(&gpu, &format!("{file}, n = {n}"), &a, n, seed(5 + n as u64));
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
    let mut b = dense::<T>(k, n, seed(3));
    b[..n].fill(T::from_f32(f32::NAN)); // B row 0: only row 0 of C may become NaN
    b[n + 5] = T::from_f32(f32::INFINITY); // B row 1, column 5: C[3][5] is +Inf, C[2][5] is NaN
    let oracle = SpmmOracle::new(a.view(), &b, n);
    let mut ran = 0;
    for config in compiled_spmm_variants_for(T::DTYPE) {
        if check_config(config, T::DTYPE, 4, k, n).is_err() {
            continue;
        }
        ran += 1;
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
    assert!(ran > 0, "NaN/Inf: no {} variant ran", T::DTYPE);
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
    // Random rows, but rows 1-3 fixed to meet the Inf and -Inf of B rows 1 and 2 (below): row 1 gets +Inf in
    // column 3 and -Inf in column 7 (ReLU: 0), row 2 +Inf and NaN (-Inf + Inf), row 3 -Inf (ReLU: 0) and +Inf.
    let random = rows_cleared(&gen::uniform_random(m, k, 0.2, seed(21)), 1..4);
    let mut entries: Vec<(usize, usize, f32)> = random.iter().map(|(&v, (r, c))| (r, c, v)).collect();
    entries.extend([(1, 1, 0.5), (1, 5, 0.25), (2, 1, 0.5), (2, 2, 0.5), (3, 1, -0.5), (3, 2, 0.5)]);
    let mut a = from_triplets(m, k, &entries);
    assert!(a.outer_view(0).unwrap().nnz() > 0, "row 0 is empty ({})", seed_note());
    a.data_mut()[0] = f32::NAN; // first entry of row 0
    let mut b = gen::dense_matrix(k, n, seed(22));
    b[n + 3] = f32::INFINITY;
    b[n + 7] = f32::NEG_INFINITY;
    b[2 * n + 7] = f32::INFINITY;
    let bias: Vec<f32> = (0..m).map(|i| (i as f32 - 32.0) * 0.05).collect();
    let oracle = BiasReluOracle::new(a.view(), &b, &bias, n);
    assert_eq!((oracle.want[n + 3], oracle.want[n + 7]), (f64::INFINITY, 0.0));
    assert!(
        oracle.want[2 * n + 7].is_nan() && oracle.want[3 * n + 3] == 0.0 && oracle.want[3 * n + 7] == f64::INFINITY
    );
    assert!(oracle.infinite_pre.contains(&(n + 7)) && oracle.infinite_pre.contains(&(3 * n + 3)));
    let a_dev = DeviceCsr::upload(&gpu, a.view()).unwrap();
    let b_dev = DeviceDense::upload(&gpu, k, n, &b).unwrap();
    let bias_dev = gpu.stream().clone_htod(&bias).unwrap();
    let mut ran = 0;
    for config in compiled_spmm_variants_for(DType::F32) {
        if check_config(config, DType::F32, m, k, n).is_err() {
            continue;
        }
        ran += 1;
        let mut c_dev = DeviceDense::<f32>::zeros(&gpu, m, n).unwrap();
        c_dev.fill(&gpu, POISON as f32).unwrap();
        spmm_bias_relu(&gpu, &a_dev, &b_dev, &bias_dev, &mut c_dev, config).unwrap();
        oracle.check(&config.to_string(), &c_dev.download(&gpu).unwrap());
    }
    assert!(ran > 0, "bias + ReLU: no f32 variant ran");
}

/// The f64 oracle of C = ReLU(A B + bias) (f32), with its bound.
///
/// Where A B + bias is NaN or +-Inf, C must be exactly NaN, +Inf, or ReLU(-Inf) = 0 (bound 0: a NaN or Inf
/// magnitude must not let anything pass). Elsewhere: the kernel sums the row's products in f32 as the plain
/// SpMM does, then adds the bias in f32, one more rounding; ReLU is 1-Lipschitz and exact. So the bound is
/// [`oracle::spmm_error_bound`] of a row one entry longer (the bias as one more term) over the magnitude
/// |A||B| + |bias|, with A B + bias (before the ReLU) as the oracle's value.
struct BiasReluOracle {
    want: Vec<f64>,
    bound: Vec<f64>,
    /// The indices where A B + bias is not finite.
    infinite_pre: Vec<usize>,
}

impl BiasReluOracle {
    fn new(a: CsMatView<f32>, b: &[f32], bias: &[f32], n: usize) -> Self {
        let pre = oracle::spmm(a, b, n);
        let abs = oracle::spmm_abs(a, b, n);
        let lens: Vec<usize> = a.outer_iterator().map(|r| r.nnz() + 1).collect();
        let magnitude: Vec<f64> = abs.iter().enumerate().map(|(idx, &ab)| ab + (bias[idx / n] as f64).abs()).collect();
        let u = DType::F32.unit_roundoff();
        let biased: Vec<f64> = pre.iter().enumerate().map(|(idx, &p)| p + bias[idx / n] as f64).collect();
        let mut bound = oracle::spmm_error_bound(&biased, &magnitude, &lens, n, u, u);
        let mut want = Vec::with_capacity(pre.len());
        let mut infinite_pre = Vec::new();
        for (idx, &w) in biased.iter().enumerate() {
            if w.is_finite() {
                assert!(bound[idx].is_finite(), "a finite C entry with an infinite bound at {idx}");
                want.push(w.max(0.0));
            } else {
                infinite_pre.push(idx);
                bound[idx] = 0.0;
                // ReLU keeps NaN and +Inf and takes -Inf to 0.
                want.push(if w == f64::NEG_INFINITY { 0.0 } else { w });
            }
        }
        BiasReluOracle { want, bound, infinite_pre }
    }

    /// Panics with the first mismatch.
    fn check(&self, what: &str, got: &[f32]) {
        let got64: Vec<f64> = got.iter().map(|&v| v as f64).collect();
        let cmp = oracle::compare(&got64, &self.want, &self.bound);
        assert_eq!(
            cmp.mismatches,
            0,
            "{what}: bias + ReLU: {} of {} elements mismatch; first (index, got, want) = {:?} ({})",
            cmp.mismatches,
            got.len(),
            cmp.first_mismatch,
            seed_note()
        );
    }
}

/// The bias + ReLU check itself, on the CPU: +Inf, NaN and ReLU(-Inf) = 0 must match exactly (the old check let
/// anything pass where the expected value was +Inf), and a finite value off by a few bounds fails.
#[test]
fn bias_relu_check_rejects_wrong_non_finite_and_finite_values() {
    // Row 0: 1 * B[0] (+Inf in column 0), row 1: 1 * B[0] + 1 * B[1] (+Inf - Inf = NaN in column 0), row 2:
    // -1 * B[0] (-Inf in column 0, ReLU'd to 0); column 1 is finite everywhere.
    let a = from_triplets(3, 2, &[(0, 0, 1.0), (1, 0, 1.0), (1, 1, 1.0), (2, 0, -1.0)]);
    let b = [f32::INFINITY, 0.75, f32::NEG_INFINITY, 0.5];
    let bias = [0.25f32, -0.5, 2.0];
    let oracle = BiasReluOracle::new(a.view(), &b, &bias, 2);
    let right = [f32::INFINITY, 1.0, f32::NAN, 0.75, 0.0, 1.25];
    oracle.check("right", &right);
    let rejects = |got: &[f32]| std::panic::catch_unwind(|| oracle.check("wrong", got)).is_err();
    let wrongs = [
        (0, 0.0),
        (0, f32::NEG_INFINITY),
        (0, POISON as f32),
        (2, 0.0),
        (2, f32::INFINITY),
        (4, f32::NAN),
        (4, 0.5),
        (4, f32::NEG_INFINITY),
    ];
    for (idx, wrong) in wrongs {
        let mut got = right;
        got[idx] = wrong;
        assert!(rejects(&got), "{wrong} at {idx} passed");
    }
    let mut got = right;
    got[1] += 4.0 * oracle.bound[1] as f32 + f32::EPSILON;
    assert!(rejects(&got), "a finite value off by 4 bounds passed");
}

/// The degenerate shapes through the library's own choice and through bias + ReLU. `spmm` and
/// `spmm_tensor_core` check the operands, then return Ok without a launch when m = 0 or n = 0 (there is no
/// element of C to write: src/spmm/mod.rs, `launch`); with k = 0 every row of A is empty, so C is exactly 0
/// (over the poison), and bias + ReLU gives exactly ReLU(bias) on every f32 variant.
#[test]
fn degenerate_shapes_through_auto_and_bias_relu() {
    let Some(gpu) = gpu_or_skip("degenerate_shapes_through_auto_and_bias_relu") else { return };
    fn auto_case<T: Scalar>(gpu: &Gpu, a: &CsMat<f32>, n: usize) {
        let (m, k) = a.shape();
        let a: CsMat<T> = gen::convert(a);
        let b = dense::<T>(k, n, seed(k as u64 + n as u64));
        let a_dev = DeviceCsr::upload(gpu, a.view()).unwrap();
        let b_dev = DeviceDense::upload(gpu, k, n, &b).unwrap();
        let mut c_dev = DeviceDense::<T>::zeros(gpu, m, n).unwrap();
        c_dev.fill(gpu, T::from_f64(POISON)).unwrap();
        let what = format!("{} {m} x {k} x {n}", T::DTYPE);
        let used = spmm_auto(gpu, &a_dev, &b_dev, &mut c_dev).unwrap_or_else(|e| panic!("{what}: {e}"));
        let c = c_dev.download(gpu).unwrap();
        assert_eq!(c.len(), m * n, "{what}");
        assert!(c.iter().all(|v| v.to_f64() == 0.0), "{what} with {used}: not all zero: {:?}", &c[..c.len().min(8)]);
    }
    let cases: Vec<(CsMat<f32>, usize)> = vec![
        (CsMat::zero((0, 40)), 16),
        (CsMat::zero((0, 40)), 0),
        (gen::uniform_random(30, 40, 0.3, seed(1)), 0),
        (CsMat::zero((30, 0)), 16),
        (CsMat::zero((30, 0)), 64),
        (CsMat::zero((30, 0)), 0),
        (CsMat::zero((0, 0)), 8),
    ];
    for (a, n) in &cases {
        auto_case::<f32>(&gpu, a, *n);
        auto_case::<f16>(&gpu, a, *n);
        auto_case::<bf16>(&gpu, a, *n);
    }

    let (m, n) = (37, 48);
    let a_dev = DeviceCsr::upload(&gpu, CsMat::<f32>::zero((m, 0)).view()).unwrap();
    let b_dev = DeviceDense::<f32>::upload(&gpu, 0, n, &[]).unwrap();
    let bias: Vec<f32> = gen::dense_matrix(m, 1, seed(2));
    let bias_dev = gpu.stream().clone_htod(&bias).unwrap();
    let mut c_dev = DeviceDense::<f32>::zeros(&gpu, m, n).unwrap();
    let mut ran = 0;
    for config in compiled_spmm_variants_for(DType::F32) {
        if check_config(config, DType::F32, m, 0, n).is_err() {
            continue;
        }
        ran += 1;
        c_dev.fill(&gpu, POISON as f32).unwrap();
        spmm_bias_relu(&gpu, &a_dev, &b_dev, &bias_dev, &mut c_dev, config).unwrap_or_else(|e| panic!("{config}: {e}"));
        let c = c_dev.download(&gpu).unwrap();
        for (idx, &got) in c.iter().enumerate() {
            let want = bias[idx / n].max(0.0);
            assert_eq!(got, want, "{config}: k = 0, bias + ReLU at ({}, {}) ({})", idx / n, idx % n, seed_note());
        }
    }
    assert!(ran > 0, "k = 0 bias + ReLU: no f32 variant ran");
}

#[test]
fn auto_picks_a_runnable_config_for_every_n() {
    let Some(gpu) = gpu_or_skip("auto_picks_a_runnable_config_for_every_n") else { return };
    let a = gen::uniform_random(77, 90, 0.3, seed(31));
    let a_dev = DeviceCsr::upload(&gpu, a.view()).unwrap();
    for n in 1..=70 {
        let b = gen::dense_matrix(90, n, seed(n as u64));
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
    let a = gen::uniform_random(16, 24, 0.3, seed(41));
    let a_dev = DeviceCsr::upload(&gpu, a.view()).unwrap();
    let b18 = DeviceDense::upload(&gpu, 24, 18, &gen::dense_matrix(24, 18, seed(1))).unwrap();
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
    let b_wrong = DeviceDense::upload(&gpu, 23, 18, &gen::dense_matrix(23, 18, seed(2))).unwrap();
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

/// Eight rounds of rows of every length from 0 to `lengths` - 1, the fewest lengths past three tiles of the widest
/// variant and 3 entries whose sum is odd: each round then starts an odd number of entries after the one before,
/// so over the eight rounds a length meets every start mod 8 (asserted). Returns A and `lengths`.
fn rows_of_every_length(seed: u64) -> (CsMat<f32>, usize) {
    let widest = spmm_table().iter().map(|c| c.block_items_k as usize).max().expect("no SpMM variant");
    let lengths = (3 * widest + 4..).find(|l| (l * (l - 1) / 2) % 2 == 1).unwrap();
    let a = rows_of_lengths(8 * lengths, 2 * lengths + 64, |r| r % lengths, seed);
    let starts: BTreeSet<(usize, usize)> =
        (0..a.rows()).map(|r| (r % lengths, a.indptr().outer_inds_sz(r).start % 8)).collect();
    assert_eq!(starts.len(), 8 * lengths, "every length at every alignment");
    (a, lengths)
}

/// Rows of every length from 0 to three tiles of the widest k and a few entries more, each length at every
/// alignment of its row's start (eight rounds of the lengths, whose entries add up to an odd number), on every
/// compiled variant of each type. So every residue count comes after no full tile, after one (the peeled, masked
/// tile) and after more, where it is fetched with the last full tile or by itself (NOTES.md, "SpMM step 39"), with
/// the aligner's lead in every position. n = 36 and 40 cut a column tile; 256 runs every unpredicated variant.
#[test]
fn every_variant_walks_rows_of_every_length() {
    let Some(gpu) = gpu_or_skip("every_variant_walks_rows_of_every_length") else { return };
    let (a, lengths) = rows_of_every_length(seed(61));
    for (dtype, check) in [
        (DType::F32, check_all_variants::<f32> as fn(&Gpu, &str, &CsMat<f32>, usize, u64) -> Vec<String>),
        (DType::F16, check_all_variants::<f16>),
        (DType::Bf16, check_all_variants::<bf16>),
    ] {
        let mut ran = BTreeSet::new();
        for n in [36, 40, 256] {
            ran.extend(check(&gpu, &format!("{dtype} rows of 0-{} entries, n = {n}", lengths - 1), &a, n, seed(62)));
        }
        assert_all_ran("every_variant_walks_rows_of_every_length", dtype, &ran);
    }
}

/// The f16/bf16 residue, and f32's in the k = 32 tiles, reads its last step's values and offsets as whole vectors
/// (NOTES.md, "SpMM steps 58-59"), so the slots past the row's end hold what an earlier tile of the row, or an
/// earlier block, left there. Every value of A is +Inf and every element of B positive, some +Inf: each nonempty
/// row of C must be +Inf and each empty row 0, while a stale slot taken as a value (Inf times a zero vector of B) or
/// as an offset (-0 times an Inf of B, or a load outside B) would give NaN. Rows of every length at every alignment
/// ([`rows_of_every_length`]), every variant.
#[test]
fn every_variant_ignores_the_stale_slots_of_its_residue() {
    let Some(gpu) = gpu_or_skip("every_variant_ignores_the_stale_slots_of_its_residue") else { return };
    fn case<T: Scalar>(gpu: &Gpu, a: &CsMat<f32>, n: usize) -> Vec<String> {
        let a: CsMat<T> = gen::convert(a);
        let b: Vec<T> = dense::<f32>(a.cols(), n, seed(64))
            .iter()
            .enumerate()
            .map(|(i, v)| T::from_f32(if i % 7 == 3 { f32::INFINITY } else { 0.5 + v.abs() }))
            .collect();
        let oracle = SpmmOracle::new(a.view(), &b, n);
        let mut ran = Vec::new();
        for config in compiled_spmm_variants_for(T::DTYPE) {
            if check_config(config, T::DTYPE, a.rows(), a.cols(), n).is_err() {
                continue;
            }
            let c = run(gpu, &a, &b, n, config);
            oracle.check(&format!("stale slots, n = {n}, with {config}"), &c);
            for r in 0..a.rows() {
                let want = if a.indptr().outer_inds_sz(r).is_empty() { 0.0 } else { f64::INFINITY };
                let row = &c[r * n..(r + 1) * n];
                assert!(row.iter().all(|v| v.to_f64() == want), "{config}: row {r} must be {want} everywhere");
            }
            ran.push(config.kernel_name());
        }
        ran
    }
    let (mut a, _) = rows_of_every_length(seed(63));
    a.data_mut().fill(f32::INFINITY);
    for (dtype, check) in [
        (DType::F32, case::<f32> as fn(&Gpu, &CsMat<f32>, usize) -> Vec<String>),
        (DType::F16, case::<f16>),
        (DType::Bf16, case::<bf16>),
    ] {
        let mut ran = BTreeSet::new();
        for n in [36, 40, 256] {
            ran.extend(check(&gpu, &a, n));
        }
        assert_all_ran("every_variant_ignores_the_stale_slots_of_its_residue", dtype, &ran);
    }
}

/// Small enough to run under compute-sanitizer (memcheck, racecheck) in run-all.sh --sanitize: every variant,
/// misaligned row starts, full tiles plus residues, predicated columns.
#[test]
fn sanitizer_spmm_every_variant_small() {
    let Some(gpu) = gpu_or_skip("sanitizer_spmm_every_variant_small") else { return };
    let a = gen::power_law(40, 150, 30.0, 1.5, seed(51));
    // Each check asserts that at least one variant ran.
    for n in [36, 64, 264] {
        check_all_variants::<f32>(&gpu, &format!("sanitizer n = {n}"), &a, n, seed(52));
        check_all_variants::<f16>(&gpu, &format!("sanitizer f16 n = {n}"), &a, n, seed(53));
        check_all_variants::<bf16>(&gpu, &format!("sanitizer bf16 n = {n}"), &a, n, seed(54));
    }
    // The row split (pieces, partial rows, fix-up) under the sanitizer too.
    let skewed = skewed_matrix(300, 2500, seed(55));
    check_all_split::<f32>(&gpu, "sanitizer split", &skewed, 36, seed(56));
    check_all_split::<f16>(&gpu, "sanitizer split f16", &skewed, 36, seed(57));
    check_all_split::<bf16>(&gpu, "sanitizer split bf16", &skewed, 36, seed(58));
    // Every block order, the SM-affine one's claims and counter reset included.
    check_every_order::<f32>(&gpu, "sanitizer orders", &a, 264, seed(59));
    check_every_order::<f16>(&gpu, "sanitizer orders f16", &skewed, 136, seed(60));
}

/// Column tiles in turn (`SpmmConfig::column_tiles`; NOTES.md, "SpMM steps 60 and 62"): every compiled variant that
/// takes them, in each storage type, at n of one tile (a group cut short), of a full group and three tiles more (a
/// partial last group), and of two full groups, in both grid orders, against the oracle and bit for bit against its
/// one-tile twin where that is compiled (each tile's arithmetic is the same). Rows of 0-40 entries (full tiles and
/// residues, so the shared tiles are rewritten between column tiles), empty rows and a dense row, and rows of 1-5 over
/// a wide k. The SM-affine order is refused with a typed error. Small enough for compute-sanitizer (run-all.sh
/// --sanitize).
#[test]
fn sanitizer_column_tiles_in_turn_match_their_tile() {
    let Some(gpu) = gpu_or_skip("sanitizer_column_tiles_in_turn_match_their_tile") else { return };
    let cases: Vec<(&str, CsMat<f32>)> = vec![
        ("rows of 0-40", rows_of_lengths(67, 300, |r| (r * 7) % 41, 141)),
        (
            "empty rows and a dense row",
            gen::with_dense_row(
                &gen::with_empty_rows(&gen::uniform_random(45, 200, 0.1, seed(142)), 0.3, seed(143)),
                9,
            ),
        ),
        ("rows of 1-5", rows_of_lengths(301, 5000, |r| 1 + r % 5, 144)),
    ];
    check_in_turn::<f32>(&gpu, &cases);
    check_in_turn::<f16>(&gpu, &cases);
    check_in_turn::<bf16>(&gpu, &cases);
}

/// [`sanitizer_column_tiles_in_turn_match_their_tile`] for one storage type: asserts that some compiled variant of
/// it takes column tiles in turn.
fn check_in_turn<T: Scalar>(gpu: &Gpu, cases: &[(&str, CsMat<f32>)]) {
    let in_turn: Vec<SpmmConfig> =
        compiled_spmm_variants_for(T::DTYPE).filter(|c| c.column_tiles > 1).copied().collect();
    assert!(!in_turn.is_empty(), "no compiled {} variant takes column tiles in turn", T::DTYPE);
    for config in &in_turn {
        let tile = SpmmConfig { column_tiles: 1, ..*config };
        let tile_compiled = compiled_spmm_variants_for(T::DTYPE).any(|c| c.same_kernel(&tile));
        let (x, t) = (config.block_items_x as usize, config.column_tiles as usize);
        for n in [x, x * (t + 3), 2 * x * t] {
            for (what, a) in cases {
                let (oracle, a_dev, b_dev, mut c_dev) = upload_problem::<T>(gpu, a, n, seed(145));
                for order in [BlockOrder::RowBlocksFirst, BlockOrder::ColumnTilesFirst] {
                    let mut run = |config: &SpmmConfig| {
                        c_dev.fill(gpu, T::from_f64(POISON)).unwrap();
                        spmm_in_order(gpu, &a_dev, &b_dev, &mut c_dev, config, order)
                            .unwrap_or_else(|e| panic!("{what}, n = {n}: {config} {order:?}: {e}"));
                        c_dev.download(gpu).unwrap()
                    };
                    let c = run(config);
                    let label = format!("{what}, n = {n}, {config}, {order:?}");
                    oracle.check_kernel(&label, &c, &SpmmKernel::Tiled(*config));
                    if tile_compiled {
                        let one = run(&tile);
                        assert!(same_bits(&c, &one), "{label}: bits differ from {tile}");
                    }
                }
                let err = spmm_in_order(gpu, &a_dev, &b_dev, &mut c_dev, config, BlockOrder::SmAffine).unwrap_err();
                assert!(matches!(err, Error::Unsupported { .. }), "{what}: {config} SmAffine: {err}");
            }
        }
    }
}

/// A graph-like m x k matrix: rows of 0-4 entries, and every 50th row long (136 to ~k/2 entries, from one
/// piece plus a residue up to many pieces), so that `spmm` splits the long rows into pieces. The structure is
/// fixed; `seed` draws the values.
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
fn check_all_split<T: Scalar>(gpu: &Gpu, what: &str, a: &CsMat<f32>, n: usize, seed: u64) -> Vec<String> {
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
    // At least one variant ran (check_all_variants asserts it).
    check_all_variants::<T>(gpu, what, a, n, seed)
}

/// Rows long for their mean though not skewed (`split::has_long_rows`: longest 257-1024 entries, more than sixteen
/// times the mean; NOTES.md, "SpMM steps 49 and 50"): 3000 rows of 0-20 entries and every 100th row of 300-880. In
/// every type every variant that walks pieces splits them, and every result matches the oracle.
#[test]
fn rows_long_for_their_mean_are_split() {
    let Some(gpu) = gpu_or_skip("rows_long_for_their_mean_are_split") else { return };
    let (m, k) = (3000, 4000);
    let mut rng = gen::Rng::new(seed(75));
    let mut entries = Vec::new();
    for r in 0..m {
        let len = if r % 100 == 3 { 300 + (r / 100) * 20 } else { r % 21 };
        entries.extend((0..len).map(|j| (r, (r * 7 + j * 3) % k, rng.range(-1.0, 1.0) as f32)));
    }
    let a = from_triplets(m, k, &entries);
    let stats = RowStats::from_indptr(a.indptr().raw_storage());
    assert!(split::has_long_rows(&stats) && !split::is_skewed(&stats), "{stats:?}");
    for n in [40, 128] {
        check_all_split::<f32>(&gpu, &format!("long rows n = {n}"), &a, n, seed(76));
        check_all_split::<f16>(&gpu, &format!("long rows f16 n = {n}"), &a, n, seed(77));
        check_all_split::<bf16>(&gpu, &format!("long rows bf16 n = {n}"), &a, n, seed(78));
    }
}

/// The row split (src/spmm/split.rs) on every variant: pieces of long rows write partial rows that the fix-up
/// adds in order; misaligned piece starts, a NaN in a middle piece, an Inf in B reached only through long rows,
/// bias + ReLU applied once (by the fix-up) on split rows, and the same bits on a second run.
#[test]
fn split_rows_match_the_oracle_on_every_variant() {
    let Some(gpu) = gpu_or_skip("split_rows_match_the_oracle_on_every_variant") else { return };
    let (m, k) = (3000, 5000);
    let a = skewed_matrix(m, k, seed(71));
    for n in [40, 128] {
        check_all_split::<f32>(&gpu, &format!("split n = {n}"), &a, n, seed(72));
        check_all_split::<f16>(&gpu, &format!("split f16 n = {n}"), &a, n, seed(73));
        check_all_split::<bf16>(&gpu, &format!("split bf16 n = {n}"), &a, n, seed(74));
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
    let mut b = dense::<f32>(k, n, seed(75));
    b[inf_col * n + 5] = f32::INFINITY;
    let inf_rows: Vec<usize> = users(inf_col).into_iter().filter(|&r| r != nan_row).collect();
    assert!(!inf_rows.is_empty());
    let oracle = SpmmOracle::new(a.view(), &b, n);
    let bias: Vec<f32> = (0..m).map(|i| ((i % 7) as f32 - 3.0) * 0.25).collect();
    let bias_oracle = BiasReluOracle::new(a.view(), &b, &bias, n);
    let a_dev = DeviceCsr::upload(&gpu, a.view()).unwrap();
    let b_dev = DeviceDense::upload(&gpu, k, n, &b).unwrap();
    let bias_dev = gpu.stream().clone_htod(&bias).unwrap();
    let mut c_dev = DeviceDense::<f32>::zeros(&gpu, m, n).unwrap();
    let mut ran = 0;
    for config in compiled_spmm_variants_for(DType::F32) {
        if check_config(config, DType::F32, m, k, n).is_err() {
            continue;
        }
        ran += 1;
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
        bias_oracle.check(&format!("split {config}"), &c_dev.download(&gpu).unwrap());
    }
    assert!(ran > 0, "split NaN/Inf: no f32 variant ran");
}

/// The split at wide n (`split::use_split` counts one column tile's work; NOTES.md, "SpMM step 31"): a graph-like
/// 20000 x 4000 matrix whose every 500th row has 2000 entries and the rest 0-4. At n = 1024 and 2048 the tile the
/// library selects (the k = 8 tile in f32, its 64-column form in f16) splits the long rows, as does every f32 variant
/// that walks pieces at n = 2048, where counting all 64 column tiles had refused it; each matches the oracle.
#[test]
fn wide_n_splits_the_long_rows() {
    let (m, k) = (20_000, 4000);
    let mut rng = gen::Rng::new(seed(76));
    let mut entries = Vec::new();
    for r in 0..m {
        let cols: Vec<usize> = if r % 500 == 17 {
            (0..2000).map(|j| 2 * j + r % 2).collect()
        } else {
            (0..r % 5).map(|j| (r * 13 + j * 101) % k).collect()
        };
        entries.extend(cols.into_iter().map(|c| (r, c, rng.range(-1.0, 1.0) as f32)));
    }
    let a = from_triplets(m, k, &entries);
    let Some(gpu) = gpu_or_skip("wide_n_splits_the_long_rows") else { return };
    fn case<T: Scalar>(gpu: &Gpu, a: &CsMat<f32>, n: usize, all: bool) {
        let a_t: CsMat<T> = gen::convert(a);
        let a_dev = DeviceCsr::upload(gpu, a_t.view()).unwrap();
        let chosen = SpmmConfig::select_with_stats(a.rows(), a.cols(), n, a_dev.stats(gpu).unwrap(), T::DTYPE);
        let mut kernels = vec![chosen];
        if all {
            kernels.extend(compiled_spmm_variants_for(T::DTYPE).filter(|c| c.walks_pieces() && **c != chosen));
        }
        kernels.retain(|c| check_config(c, T::DTYPE, a.rows(), a.cols(), n).is_ok());
        assert!(kernels.contains(&chosen), "{} n = {n}: the selection's {chosen} cannot run", T::DTYPE);
        for config in &kernels {
            assert!(splits_rows(gpu, &a_dev, n, config).unwrap(), "{} n = {n}: {config} did not split", T::DTYPE);
        }
        let what = format!("{} split at n = {n}", T::DTYPE);
        let ran = kernels.iter().map(|c| SpmmKernel::Tiled(*c));
        assert_eq!(check_kernels::<T>(gpu, &what, a, n, seed(77), ran), kernels.len());
    }
    case::<f32>(&gpu, &a, 1024, false);
    case::<f32>(&gpu, &a, 2048, true);
    case::<f16>(&gpu, &a, 1024, false);
}

/// Sums past f16's range: C entries of +-70000 (250 x 280) are stored as +-Inf by every f16 variant and tensor-core
/// kernel, as rounding to nearest gives, and the oracle check accepts exactly that (`oracle::compare_stored`); the
/// entries of +-64000 (250 x 256, exact in f16) beside them stay finite.
#[test]
fn f16_sums_past_its_range_are_stored_as_infinite() {
    let Some(gpu) = gpu_or_skip("f16_sums_past_its_range_are_stored_as_infinite") else { return };
    let (m, k, n) = (96, 64, 64);
    let mut entries = Vec::new();
    for r in 0..m {
        match r % 3 {
            0 => entries.push((r, r % k, 250.0)),
            1 => entries.push((r, (r * 7) % k, -250.0)),
            _ => entries.extend([(r, 1, 200.0), (r, 2, -200.0)]),
        }
    }
    let a: CsMat<f16> = gen::convert(&from_triplets(m, k, &entries));
    let b: Vec<f16> = (0..k * n).map(|i| f16::from_f32(if i % 2 == 0 { 280.0 } else { 256.0 })).collect();
    let oracle = SpmmOracle::new(a.view(), &b, n);
    let a_dev = DeviceCsr::upload(&gpu, a.view()).unwrap();
    let b_dev = DeviceDense::upload(&gpu, k, n, &b).unwrap();
    let mut c_dev = DeviceDense::<f16>::zeros(&gpu, m, n).unwrap();
    let mut kernels: Vec<SpmmKernel> = compiled_spmm_variants_for(DType::F16)
        .filter(|c| check_config(c, DType::F16, m, k, n).is_ok())
        .map(|c| SpmmKernel::Tiled(*c))
        .collect();
    kernels.extend(tensor_cores_here(&gpu, DType::F16).into_iter().map(SpmmKernel::TensorCore));
    assert!(kernels.len() > 1);
    for kernel in &kernels {
        c_dev.fill(&gpu, f16::from_f64(POISON)).unwrap();
        spmm_kernel(&gpu, &a_dev, &b_dev, &mut c_dev, kernel).unwrap_or_else(|e| panic!("{kernel}: {e}"));
        let c = c_dev.download(&gpu).unwrap();
        oracle.check_kernel(&format!("f16 past its range with {kernel}"), &c, kernel);
        for r in 0..m {
            let (even, odd) = (c[r * n].to_f64(), c[r * n + 1].to_f64());
            match r % 3 {
                0 => assert!(even == f64::INFINITY && odd == 64000.0, "{kernel}: row {r}: {even} {odd}"),
                1 => assert!(even == f64::NEG_INFINITY && odd == -64000.0, "{kernel}: row {r}: {even} {odd}"),
                _ => assert!(even == 0.0 && odd == 0.0, "{kernel}: row {r}: {even} {odd}"),
            }
        }
    }
}

/// Every compiled f16 and bf16 variant against the oracle on the rounded inputs, over Sputnik's shapes and the
/// awkward ones.
fn half_variants_case<T: Scalar>(gpu: &Gpu) {
    let what = T::DTYPE;
    let total = compiled_spmm_variants_for(what).count();
    assert!(total > 0, "no {what} variants compiled");
    let problems: Vec<(String, CsMat<f32>, usize)> = vec![
        ("7x96x40 nnz 333".into(), gen::uniform_random_nnz(7, 96, 333, seed(1)), 40),
        ("11x55x8 nnz 293".into(), gen::uniform_random_nnz(11, 55, 293, seed(2)), 8),
        ("1024x1024x256".into(), gen::uniform_random(1024, 1024, 0.25, seed(3)), 256),
        ("2048x2048x128".into(), gen::uniform_random(2048, 2048, 0.25, seed(4)), 128),
        ("power-law 300x257".into(), gen::power_law(300, 257, 20.0, 1.5, seed(11)), 0),
        ("empty rows".into(), gen::with_empty_rows(&gen::uniform_random(97, 130, 0.3, seed(12)), 0.4, seed(13)), 0),
        ("one dense row".into(), gen::with_dense_row(&gen::uniform_random(50, 333, 0.05, seed(14)), 17), 0),
        ("nnz = 0".into(), CsMat::zero((33, 40)), 0),
        ("m = 1".into(), gen::uniform_random(1, 200, 0.5, seed(15)), 0),
        ("k = 1".into(), gen::uniform_random(64, 1, 0.7, seed(16)), 0),
        ("tall 1000x3".into(), gen::uniform_random(1000, 3, 0.6, seed(17)), 0),
        ("wide 5x3000".into(), gen::uniform_random(5, 3000, 0.2, seed(18)), 0),
        ("banded 211x211".into(), gen::banded(211, 211, 20, seed(19)), 0),
        ("m = 0".into(), CsMat::zero((0, 40)), 0),
        ("k = 0".into(), CsMat::zero((33, 0)), 0),
    ];
    // Every case runs at least one variant (check_all_variants asserts it), and all of them run on a problem
    // with work (m > 0, n > 0; n = 0 is a no-op): n = 256 is the n here that the 256-wide variants without
    // predicates accept.
    let mut ran = BTreeSet::new();
    for (i, (name, a, n)) in problems.iter().enumerate() {
        let ns: Vec<usize> = if *n > 0 { vec![*n] } else { vec![0, 1, 3, 8, 18, 34, 66, 100, 256] };
        for n in ns {
            let names = check_all_variants::<T>(gpu, &format!("{what} {name}, n = {n}"), a, n, seed(200 + i as u64));
            if a.rows() > 0 && n > 0 {
                ran.extend(names);
            }
        }
    }
    assert_all_ran("every_half_variant_matches_the_oracle", what, &ran);
}

#[test]
fn every_half_variant_matches_the_oracle() {
    let Some(gpu) = gpu_or_skip("every_half_variant_matches_the_oracle") else { return };
    half_variants_case::<f16>(&gpu);
    half_variants_case::<bf16>(&gpu);
}

/// Sputnik's hidden fp16 limits, each of which this test would trip: column indices past 32767 (Sputnik
/// stores 16-bit indices), odd row lengths (Sputnik needs even ones), and n = 18, 34, 66 (Sputnik faults with
/// a misaligned address): here auto selection narrows the vector width (or pads B and C for the tensor cores),
/// and an explicit wide config is a typed error, never a fault.
fn sputnik_limits_case<T: Scalar>(gpu: &Gpu) {
    // 120 or 121 per row (even in all 24 rows with probability 2^-24), columns up to 39999.
    let a = gen::uniform_random(24, 40_000, 0.0030125, seed(61));
    assert!(a.indices().iter().any(|&c| c > 32_767), "{}", seed_note());
    assert!(a.outer_iterator().any(|r| r.nnz() % 2 == 1), "want odd row lengths ({})", seed_note());
    check_all_variants::<T>(gpu, &format!("{} k = 40000", T::DTYPE), &a, 64, seed(62));
    let a: CsMat<T> = gen::convert(&a);
    let a_dev = DeviceCsr::upload(gpu, a.view()).unwrap();
    for n in [18usize, 34, 66] {
        let b = dense::<T>(40_000, n, seed(n as u64));
        let b_dev = DeviceDense::upload(gpu, 40_000, n, &b).unwrap();
        let mut c_dev = DeviceDense::<T>::zeros(gpu, 24, n).unwrap();
        c_dev.fill(gpu, T::from_f64(POISON)).unwrap();
        let used = spmm_auto(gpu, &a_dev, &b_dev, &mut c_dev).unwrap();
        match used {
            SpmmKernel::Tiled(c) => assert!(n % c.dense_vector_width as usize == 0, "{used} for n = {n}"),
            SpmmKernel::TensorCore(_) => {} // any n: B and C are padded to a multiple of 8 around the product
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

/// The tensor-core variants of `dtype` this device runs (all of them on an H100; the wgmma f32 kernel only on
/// compute capability 9.0).
fn tensor_cores_here(gpu: &Gpu, dtype: DType) -> Vec<TensorCoreConfig> {
    TensorCoreConfig::all(dtype).into_iter().filter(|c| c.runs_on(gpu.info())).collect()
}

/// Every tensor-core variant of T this device runs, on A ([`check_kernels`]).
fn check_tensor_core<T: Scalar>(gpu: &Gpu, what: &str, a: &CsMat<f32>, n: usize, seed: u64) -> usize {
    check_kernels::<T>(gpu, what, a, n, seed, tensor_cores_here(gpu, T::DTYPE).into_iter().map(SpmmKernel::TensorCore))
}

/// A with the rows in `cleared` emptied.
fn rows_cleared(a: &CsMat<f32>, cleared: std::ops::Range<usize>) -> CsMat<f32> {
    let entries: Vec<(usize, usize, f32)> =
        a.iter().filter(|&(_, (r, _))| !cleared.contains(&r)).map(|(&v, (r, c))| (r, c, v)).collect();
    from_triplets(a.rows(), a.cols(), &entries)
}

/// The tensor-core SpMM (f16, bf16, and f32 in 3xTF32: windows of 16, 32 and 64 rows), on awkward shapes: m
/// not a multiple of 16 or 64, empty rows, 16-row tiles of a 64-row window with no entries, a whole 64-row
/// window without entries (no k-blocks) between full ones, one dense row (a window of many k-blocks), nnz = 0,
/// m = 0 and k = 0, m = 1, k = 1, tall and wide, banded, power law; n = 0 (a no-op), and from 8 (one tile, most
/// of a warp's columns past n) to 264 (column blocks partly past n); n not a multiple of 8 (1, 7, 60, 101, 263:
/// B and C padded to a multiple of 8 around the product).
#[test]
fn tensor_core_matches_the_oracle_on_awkward_shapes() {
    let Some(gpu) = gpu_or_skip("tensor_core_matches_the_oracle_on_awkward_shapes") else { return };
    let cases: Vec<(&str, CsMat<f32>)> = vec![
        ("uniform 100x300", gen::uniform_random(100, 300, 0.1, seed(61))),
        ("power-law 300x257", gen::power_law(300, 257, 20.0, 1.5, seed(62))),
        ("empty rows", gen::with_empty_rows(&gen::uniform_random(97, 130, 0.3, seed(63)), 0.4, seed(64))),
        ("one dense row", gen::with_dense_row(&gen::uniform_random(50, 2000, 0.01, seed(65)), 17)),
        ("nnz = 0", CsMat::zero((33, 40))),
        ("m = 0", CsMat::zero((0, 40))),
        ("k = 0", CsMat::zero((33, 0))),
        ("m = 1", gen::uniform_random(1, 200, 0.5, seed(66))),
        ("k = 1", gen::uniform_random(64, 1, 0.7, seed(67))),
        ("tall 1000x3", gen::uniform_random(1000, 3, 0.6, seed(68))),
        ("wide 5x3000", gen::uniform_random(5, 3000, 0.2, seed(69))),
        ("banded 211x211", gen::banded(211, 211, 20, seed(70))),
        ("dense 48x64", gen::uniform_random(48, 64, 1.0, seed(71))),
        ("130 rows, rows 16-47 empty", rows_cleared(&gen::uniform_random(130, 500, 0.2, seed(72)), 16..48)),
        ("300 rows, rows 128-191 empty", rows_cleared(&gen::uniform_random(300, 700, 0.1, seed(73)), 128..192)),
    ];
    let variants = TensorCoreConfig::all(DType::F16).len();
    let f32_variants = tensor_cores_here(&gpu, DType::F32).len();
    assert!(variants > 0 && f32_variants > 0 && TensorCoreConfig::all(DType::Bf16).len() == variants);
    if gpu.info().compute_capability == (9, 0) {
        assert_eq!(f32_variants, 4, "the wgmma f32 kernel must run on compute capability 9.0");
    }
    for (what, a) in &cases {
        for n in [0usize, 1, 7, 8, 16, 40, 60, 64, 101, 136, 263, 264] {
            let what = format!("{what}, n = {n}");
            assert_eq!(check_tensor_core::<f16>(&gpu, &what, a, n, seed(3 * n as u64)), variants);
            assert_eq!(check_tensor_core::<bf16>(&gpu, &what, a, n, seed(5 * n as u64)), variants);
            assert_eq!(check_tensor_core::<f32>(&gpu, &what, a, n, seed(7 * n as u64)), f32_variants);
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
    for n in [72, 69] {
        tensor_core_nan_inf_at::<T>(gpu, n);
    }
}

/// [`tensor_core_nan_inf_case`] with n columns (69: B and C padded to 72 around the product).
fn tensor_core_nan_inf_at<T: Scalar>(gpu: &Gpu, n: usize) {
    let (m, k) = (40, 1000);
    let mut entries = vec![(0, 0, 0.5f32)];
    entries.extend((0..70).map(|j| (1, 2 + 3 * j, 0.25f32 * (j % 5) as f32 - 0.5)));
    entries.extend((0..40).map(|j| (2, 1 + 2 * j, if j == 13 { f32::NAN } else { 1.0 })));
    entries.extend((0..45).map(|j| (3, 1 + 6 * j, 1.0f32)));
    entries.push((4, 7, 0.0)); // a stored zero: times B's Inf at (7, 9) it is NaN
    entries.extend((5..m).flat_map(|r| (0..6).map(move |j| (r, 10 + (r * 11 + j * 29) % 280, 0.75f32))));
    entries.extend((300..900).map(|c| (m - 1, c, 0.5f32)));
    let a = from_triplets(m, k, &entries);
    let mut b = gen::dense_matrix(k, n, seed(72));
    b[..n].fill(f32::NAN); // B row 0: only row 0 of C becomes NaN
    b[n + 5] = f32::INFINITY; // B row 1, column 5: C[3][5] is +Inf, C[2][5] is NaN
    b[7 * n + 9] = f32::INFINITY;
    let a_t: CsMat<T> = gen::convert(&a);
    let b_t: Vec<T> = b.iter().map(|&v| T::from_f32(v)).collect();
    let oracle = SpmmOracle::new(a_t.view(), &b_t, n);
    let a_dev = DeviceCsr::upload(gpu, a_t.view()).unwrap();
    let b_dev = DeviceDense::upload(gpu, k, n, &b_t).unwrap();
    let mut c_dev = DeviceDense::<T>::zeros(gpu, m, n).unwrap();
    for config in tensor_cores_here(gpu, T::DTYPE) {
        c_dev.fill(gpu, T::from_f64(POISON)).unwrap();
        spmm_tensor_core(gpu, &a_dev, &b_dev, &mut c_dev, &config).unwrap();
        let c: Vec<f64> = c_dev.download(gpu).unwrap().iter().map(|v| v.to_f64()).collect();
        oracle.check_kernel(&format!("tensor-core NaN/Inf, n = {n}, {config}"), &c, &SpmmKernel::TensorCore(config));
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
    let a = gen::uniform_random(20, 30, 0.3, seed(81));
    let a16: CsMat<f16> = gen::convert(&a);
    let a_dev = DeviceCsr::upload(&gpu, a16.view()).unwrap();
    let config = TensorCoreConfig { dtype: DType::F16, window: 16, tiles_n: 4 };
    // Shapes that do not match.
    let b = DeviceDense::upload(&gpu, 31, 64, &dense::<f16>(31, 64, seed(83))).unwrap();
    let mut c = DeviceDense::<f16>::zeros(&gpu, 20, 64).unwrap();
    let r = spmm_tensor_core(&gpu, &a_dev, &b, &mut c, &config);
    assert!(matches!(r, Err(Error::ShapeMismatch(_))), "k mismatch: {r:?}");
    // f32 has 32 columns per warp in 16-row windows and 64 or 128 per block in 64-row ones; a bf16 config on f16
    // operands is invalid.
    let a32 = DeviceCsr::upload(&gpu, a.view()).unwrap();
    let b32 = DeviceDense::upload(&gpu, 30, 64, &dense::<f32>(30, 64, seed(84))).unwrap();
    let mut c32 = DeviceDense::<f32>::zeros(&gpu, 20, 64).unwrap();
    for (window, tiles_n) in [(16, 8), (16, 16), (64, 4)] {
        let f32_config = TensorCoreConfig { dtype: DType::F32, window, tiles_n };
        let r = spmm_tensor_core(&gpu, &a32, &b32, &mut c32, &f32_config);
        assert!(matches!(r, Err(Error::InvalidConfig { .. })), "{f32_config}: {r:?}");
    }
    // The wgmma kernel: on compute capability 9.0 it runs and adds its ranges by the fix-up only (clusters are a
    // typed error); elsewhere any launch of it is.
    let wgmma = TensorCoreConfig { dtype: DType::F32, window: 64, tiles_n: 16 };
    assert!(wgmma.is_wgmma());
    let r = spmm_tensor_core_with(&gpu, &a32, &b32, &mut c32, &wgmma, RangeSum::Cluster);
    assert!(matches!(r, Err(Error::Unsupported { .. })), "{wgmma} in clusters: {r:?}");
    let r = spmm_tensor_core(&gpu, &a32, &b32, &mut c32, &wgmma);
    if wgmma.runs_on(gpu.info()) {
        r.unwrap();
    } else {
        assert!(matches!(r, Err(Error::Unsupported { .. })), "{wgmma} on {:?}: {r:?}", gpu.info().compute_capability);
    }
    let b = DeviceDense::upload(&gpu, 30, 64, &dense::<f16>(30, 64, seed(85))).unwrap();
    let bf = TensorCoreConfig { dtype: DType::Bf16, window: 16, tiles_n: 4 };
    let r = spmm_tensor_core(&gpu, &a_dev, &b, &mut c, &bf);
    assert!(matches!(r, Err(Error::InvalidConfig { .. })), "bf16 config, f16 operands: {r:?}");
    // Windows of a height no kernel has.
    let odd = TensorCoreConfig { dtype: DType::F16, window: 48, tiles_n: 8 };
    let r = spmm_tensor_core(&gpu, &a_dev, &b, &mut c, &odd);
    assert!(matches!(r, Err(Error::InvalidConfig { .. })), "48-row windows: {r:?}");
    let r = tilesparse::spmm::tensor_core::block_fill(&gpu, &a_dev, 48);
    assert!(matches!(r, Err(Error::InvalidConfig { .. })), "block fill of 48-row windows: {r:?}");
    for rows in [16, 32, 64] {
        assert!(tilesparse::spmm::tensor_core::block_fill(&gpu, &a_dev, rows).unwrap() > 0.0, "{rows}-row windows");
    }
}

/// The wide kernels split a window's k-blocks into 2 to 8 ranges when the grid is small (`wide_splits`); the
/// ranges' partial tiles are added in range order either within a thread block cluster (sm_90 and up) or by a
/// fix-up launch. Both must match the oracle and each other bit for bit, for every number of ranges, a partial
/// last window and a partial last column slice; `RangeSum::Auto` gives the same bits; below sm_90
/// `RangeSum::Cluster` is a typed error.
fn split_ranges_case<T: Scalar>(gpu: &Gpu, ranges: impl IntoIterator<Item = usize>) {
    let clusters = gpu.info().has_clusters();
    for splits in ranges {
        // 190 rows (three 64-row windows or six 32-row ones, the last partial), every window's union all of k (a
        // column is missing from 30 rows at density 0.4 with probability 0.6^30): ceil(k / 16) = 16 splits + 2
        // k-blocks per window, so `wide_splits` gives `splits` ranges (the grid has at most 18 blocks).
        let (m, k, n) = (190, 256 * splits + 17, 136);
        let a = gen::uniform_random(m, k, 0.4, seed(200 + splits as u64));
        let a: CsMat<T> = gen::convert(&a);
        let b = dense::<T>(k, n, seed(300 + splits as u64));
        let oracle = SpmmOracle::new(a.view(), &b, n);
        let a_dev = DeviceCsr::upload(gpu, a.view()).unwrap();
        let b_dev = DeviceDense::upload(gpu, k, n, &b).unwrap();
        let mut c_dev = DeviceDense::<T>::zeros(gpu, m, n).unwrap();
        let wide: Vec<TensorCoreConfig> =
            tensor_cores_here(gpu, T::DTYPE).into_iter().filter(|c| c.is_wide()).collect();
        assert!(!wide.is_empty(), "no wide {} tensor-core kernel", T::DTYPE);
        for config in wide {
            let slices = n.div_ceil(config.columns_per_block());
            let windows = m.div_ceil(config.window as usize);
            let blocks = windows * k.div_ceil(16);
            assert_eq!(
                tilesparse::spmm::tensor_core::launch_splits(&config, windows * slices, windows, blocks),
                splits,
                "{config}"
            );
            let mut run = |sum: RangeSum| -> Result<Vec<T>, Error> {
                c_dev.fill(gpu, T::from_f64(POISON)).unwrap();
                spmm_tensor_core_with(gpu, &a_dev, &b_dev, &mut c_dev, &config, sum)?;
                Ok(c_dev.download(gpu).unwrap())
            };
            let what = format!("{} ranges with {config}", splits);
            let fix_up = run(RangeSum::FixUp).unwrap();
            oracle.check_kernel(&format!("{what}, fix-up"), &fix_up, &SpmmKernel::TensorCore(config));
            let auto = run(RangeSum::Auto).unwrap();
            assert!(same_bits(&auto, &fix_up), "{what}: auto differs");
            match run(RangeSum::Cluster) {
                Ok(cluster) => {
                    assert!(clusters && !config.is_wgmma(), "{what}: clusters ran below sm_90 or for the wgmma kernel");
                    oracle.check_kernel(&format!("{what}, cluster"), &cluster, &SpmmKernel::TensorCore(config));
                    assert!(same_bits(&cluster, &fix_up), "{what}: the cluster sum differs from the fix-up's");
                }
                Err(e) => {
                    assert!((!clusters || config.is_wgmma()) && matches!(e, Error::Unsupported { .. }), "{what}: {e}")
                }
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

/// f32 windows of 24-31 k-blocks (k = 384) in a small grid split in two ranges on their own
/// (`wide_splits`' pair rule; NOTES.md, "SpMM step 19"): the automatic choice on a 384 x 384 matrix at n = 512
/// (6 windows x 8 slices) is the 3xTF32 kernel in two ranges, it matches the oracle, and the ranges added in
/// clusters (or the fix-up below sm_90) give the fix-up's bits.
#[test]
fn tensor_core_f32_short_windows_split_in_two() {
    let Some(gpu) = gpu_or_skip("tensor_core_f32_short_windows_split_in_two") else { return };
    let (m, k, n) = (384, 384, 512);
    let a = gen::uniform_random(m, k, 0.5, seed(210));
    let b = dense::<f32>(k, n, seed(211));
    let oracle = SpmmOracle::new(a.view(), &b, n);
    let a_dev = DeviceCsr::upload(&gpu, a.view()).unwrap();
    let b_dev = DeviceDense::upload(&gpu, k, n, &b).unwrap();
    let mut c_dev = DeviceDense::<f32>::zeros(&gpu, m, n).unwrap();
    c_dev.fill(&gpu, POISON as f32).unwrap();
    let kernel = spmm_auto(&gpu, &a_dev, &b_dev, &mut c_dev).unwrap();
    let SpmmKernel::TensorCore(config) = kernel else { panic!("{kernel} chosen, not the 3xTF32 kernel") };
    assert_eq!(tilesparse::spmm::tensor_core::split_plan(&gpu, &a_dev, &config, n).unwrap().ranges, 2);
    let chosen = c_dev.download(&gpu).unwrap();
    oracle.check_kernel("two ranges of 12 k-blocks, spmm_auto", &chosen, &kernel);
    let mut run = |sum: RangeSum| {
        c_dev.fill(&gpu, POISON as f32).unwrap();
        spmm_tensor_core_with(&gpu, &a_dev, &b_dev, &mut c_dev, &config, sum).unwrap();
        c_dev.download(&gpu).unwrap()
    };
    let fix_up = run(RangeSum::FixUp);
    oracle.check_kernel("two ranges of 12 k-blocks, fix-up", &fix_up, &kernel);
    let auto = run(RangeSum::Auto);
    oracle.check_kernel("two ranges of 12 k-blocks, auto", &auto, &kernel);
    assert!(auto.iter().zip(&fix_up).all(|(x, y)| x.to_bits() == y.to_bits()), "auto differs from the fix-up");
    assert!(chosen.iter().zip(&fix_up).all(|(x, y)| x.to_bits() == y.to_bits()), "spmm_auto differs");
}

/// The tensor-core kernels under compute-sanitizer (run-all.sh --sanitize): every width and type, a partial
/// window, columns past n, n = 69 (B and C padded around the product), the exact path for B's Inf/NaN, split
/// ranges added in clusters and by the fix-up.
#[test]
fn sanitizer_spmm_tensor_core() {
    let Some(gpu) = gpu_or_skip("sanitizer_spmm_tensor_core") else { return };
    let a = gen::power_law(40, 150, 30.0, 1.5, seed(91));
    for n in [8, 69, 72] {
        assert!(check_tensor_core::<f16>(&gpu, &format!("sanitizer tc f16 n = {n}"), &a, n, seed(92)) > 0);
        assert!(check_tensor_core::<bf16>(&gpu, &format!("sanitizer tc bf16 n = {n}"), &a, n, seed(93)) > 0);
        assert!(check_tensor_core::<f32>(&gpu, &format!("sanitizer tc f32 n = {n}"), &a, n, seed(94)) > 0);
    }
    tensor_core_nan_inf_case::<f16>(&gpu);
    tensor_core_nan_inf_case::<f32>(&gpu);
    split_ranges_case::<f16>(&gpu, [3, 8]);
    split_ranges_case::<f32>(&gpu, [3, 8]);
}

/// The tensor-core windows that hold no entry, left out of the grid and their rows written by
/// `spmm_zero_windows` (`tensor_core::leaves_out_empty_windows`). Every tensor-core kernel of every dtype this
/// device runs, with them left out and walked (`spmm_tensor_core_empty_windows`), on 600 rows whose 16-row windows
/// 0-3, 13-24 and the partial last one are empty (the 32-row windows 0, 1 and 7-11, the 64-row windows 0, 4 and 5),
/// at n = 8, 128 and 130 (B and C padded to 136): against the oracle on a poisoned C, the same bits both ways, and
/// the count left out (none where the launch splits its windows' k-blocks). A matrix with no entries leaves every
/// window out and launches only the fill. Small enough for compute-sanitizer.
#[test]
fn sanitizer_tensor_core_empty_windows_left_out() {
    let Some(gpu) = gpu_or_skip("sanitizer_tensor_core_empty_windows_left_out") else { return };
    let (m, k) = (600, 300);
    let busy = |r: usize| (64..200).contains(&r) || (400..590).contains(&r);
    let a = rows_of_lengths(m, k, |r| if busy(r) { 1 + r % 30 } else { 0 }, seed(300));
    let none = gen::uniform_random_nnz(m, k, 0, seed(301));
    fn each<T: Scalar>(gpu: &Gpu, what: &str, a: &CsMat<f32>, empty: [usize; 3], runs: &mut usize) {
        for n in [8, 128, 130] {
            let (oracle, a_dev, b_dev, mut c_dev) = upload_problem::<T>(gpu, a, n, seed(302));
            for config in tensor_cores_here(gpu, T::DTYPE) {
                let windows = match config.window {
                    16 => empty[0],
                    32 => empty[1],
                    _ => empty[2],
                };
                assert_eq!(tilesparse::spmm::tensor_core::empty_windows(gpu, &a_dev, &config).unwrap(), windows);
                let ranges = tilesparse::spmm::tensor_core::split_plan(gpu, &a_dev, &config, n.next_multiple_of(8))
                    .unwrap()
                    .ranges;
                let label = format!("{what}, n = {n}, {config} ({ranges} ranges)");
                let mut run = |leave_out: bool| {
                    c_dev.fill(gpu, T::from_f64(POISON)).unwrap();
                    let left = spmm_tensor_core_empty_windows(gpu, &a_dev, &b_dev, &mut c_dev, &config, leave_out)
                        .unwrap_or_else(|e| panic!("{label}: {e}"));
                    let expect = if leave_out && ranges == 1 { windows } else { 0 };
                    assert_eq!(left, expect, "{label}, leave_out {leave_out}: windows left out");
                    let c = c_dev.download(gpu).unwrap();
                    oracle.check_kernel(
                        &format!("{label}, leave_out {leave_out}"),
                        &c,
                        &SpmmKernel::TensorCore(config),
                    );
                    c
                };
                let (left_out, walked) = (run(true), run(false));
                assert!(same_bits(&left_out, &walked), "{label}: other bits with the empty windows left out");
                *runs += 1;
            }
        }
    }
    let mut runs = 0;
    for (what, a, empty) in [("empty windows", &a, [17, 7, 3]), ("no entries", &none, [38, 19, 10])] {
        each::<f32>(&gpu, what, a, empty, &mut runs);
        each::<f16>(&gpu, what, a, empty, &mut runs);
        each::<bf16>(&gpu, what, a, empty, &mut runs);
    }
    assert!(runs >= 36, "only {runs} runs");
}

/// A bias for C's `m` rows: ((r % 9) - 4) / 2 (so that the ReLU clears about half of C), with the special values
/// of `special` at their rows.
fn bias_with(m: usize, special: &[(usize, f32)]) -> Vec<f32> {
    let mut bias: Vec<f32> = (0..m).map(|r| ((r % 9) as f32 - 4.0) * 0.5).collect();
    for &(r, v) in special {
        bias[r] = v;
    }
    bias
}

/// C = ReLU(A * B + bias) on every tensor-core kernel of T this device runs (`spmm_tensor_core_paths`), against the
/// oracle (`SpmmReference::bias_relu`) on a poisoned C, on every path C is stored by:
/// - 600 rows whose 16-, 32- and 64-row windows are partly empty (as in
///   `sanitizer_tensor_core_empty_windows_left_out`), at n = 8 and 130 (B and C padded to 136), the empty windows left
///   out (their rows written by `spmm_zero_windows_<dtype>`) and walked: the same bits both ways; B with a NaN and an
///   Inf (the warps that meet them redo their tiles exactly, then the epilogue); the bias NaN on an empty row and on a
///   busy one, +Inf and -Inf on empty rows, -2 to 2 elsewhere: an empty row holds ReLU(bias) exactly (0 for row 0's
///   -2, NaN, +Inf, 0), a NaN bias gives a NaN row;
/// - 190 rows whose wide windows split their k-blocks into 3 ranges (as in `split_ranges_case`): the ranges added by
///   the fix-up and in clusters (where the device has them) give the same bits, the epilogue after their sum.
///
/// Small enough for compute-sanitizer.
fn tensor_core_bias_relu_case<T: Scalar>(gpu: &Gpu) -> usize {
    let mut runs = 0;
    let (m, k) = (600, 300);
    let busy = |r: usize| (64..200).contains(&r) || (400..590).contains(&r);
    let a = rows_of_lengths(m, k, |r| if busy(r) { 1 + r % 30 } else { 0 }, seed(320));
    let a_t: CsMat<T> = gen::convert(&a);
    let bias = bias_with(m, &[(1, f32::NAN), (2, f32::INFINITY), (3, f32::NEG_INFINITY), (70, f32::NAN)]);
    let bias_dev = gpu.stream().clone_htod(&bias).unwrap();
    let a_dev = DeviceCsr::upload(gpu, a_t.view()).unwrap();
    for n in [8, 130] {
        let mut b = gen::dense_matrix(k, n, seed(321 + n as u64));
        b[5 * n + 3] = f32::NAN;
        b[17 * n + 1] = f32::INFINITY;
        let b: Vec<T> = b.into_iter().map(T::from_f32).collect();
        let oracle = SpmmOracle::new(a_t.view(), &b, n).bias_relu::<T>(&bias, n);
        let b_dev = DeviceDense::upload(gpu, k, n, &b).unwrap();
        let mut c_dev = DeviceDense::<T>::zeros(gpu, m, n).unwrap();
        for config in tensor_cores_here(gpu, T::DTYPE) {
            let label = format!("{} bias + ReLU, n = {n}, {config}", T::DTYPE);
            let mut run = |leave_out: bool| {
                c_dev.fill(gpu, T::from_f64(POISON)).unwrap();
                spmm_tensor_core_paths(
                    gpu,
                    &a_dev,
                    &b_dev,
                    SpmmEpilogue::bias_relu(&bias_dev),
                    &mut c_dev,
                    &config,
                    RangeSum::Auto,
                    Some(leave_out),
                )
                .unwrap_or_else(|e| panic!("{label}: {e}"));
                let c = c_dev.download(gpu).unwrap();
                oracle.check_kernel(&format!("{label}, leave_out {leave_out}"), &c, &SpmmKernel::TensorCore(config));
                c
            };
            let (left_out, walked) = (run(true), run(false));
            assert!(same_bits(&left_out, &walked), "{label}: other bits with the empty windows left out");
            let row = |r: usize| left_out[r * n..(r + 1) * n].iter().map(|v| v.to_f64()).collect::<Vec<f64>>();
            assert!(row(0).iter().all(|&v| v == 0.0), "{label}: empty row 0, bias -2: ReLU gives 0");
            assert!(row(1).iter().all(|v| v.is_nan()), "{label}: empty row 1, bias NaN: NaN");
            assert!(row(2).iter().all(|&v| v == f64::INFINITY), "{label}: empty row 2, bias +Inf: +Inf");
            assert!(row(3).iter().all(|&v| v == 0.0), "{label}: empty row 3, bias -Inf: 0");
            assert!(row(70).iter().all(|v| v.is_nan()), "{label}: busy row 70, bias NaN: NaN");
            // The one-call form gives the same bits.
            c_dev.fill(gpu, T::from_f64(POISON)).unwrap();
            spmm_tensor_core_bias_relu(gpu, &a_dev, &b_dev, &bias_dev, &mut c_dev, &config).unwrap();
            assert!(same_bits(&c_dev.download(gpu).unwrap(), &left_out), "{label}: spmm_tensor_core_bias_relu");
            runs += 1;
        }
    }

    // Split ranges: the epilogue after the ranges' sum, in the cluster or the fix-up.
    let (m, k, n) = (190, 256 * 3 + 17, 136);
    let a: CsMat<T> = gen::convert(&gen::uniform_random(m, k, 0.4, seed(330)));
    let b = dense::<T>(k, n, seed(331));
    // Scaled to C's spread (sqrt(0.4 k / 9), about 6: sums of 0.4 k products of values in [-1, 1)), so that the
    // ReLU clears about half of C.
    let bias: Vec<f32> = bias_with(m, &[(7, f32::NAN)]).iter().map(|v| 5.0 * v).collect();
    let bias_dev = gpu.stream().clone_htod(&bias).unwrap();
    let oracle = SpmmOracle::new(a.view(), &b, n).bias_relu::<T>(&bias, n);
    let a_dev = DeviceCsr::upload(gpu, a.view()).unwrap();
    let b_dev = DeviceDense::upload(gpu, k, n, &b).unwrap();
    let mut c_dev = DeviceDense::<T>::zeros(gpu, m, n).unwrap();
    let clusters = gpu.info().has_clusters();
    for config in tensor_cores_here(gpu, T::DTYPE).into_iter().filter(|c| c.is_wide()) {
        let ranges = tilesparse::spmm::tensor_core::split_plan(gpu, &a_dev, &config, n).unwrap().ranges;
        let label = format!("{} bias + ReLU, {ranges} ranges, {config}", T::DTYPE);
        assert_eq!(ranges, 3, "{label}");
        let epilogue = SpmmEpilogue::bias_relu(&bias_dev);
        let mut run = |sum: RangeSum| -> Result<Vec<T>, Error> {
            c_dev.fill(gpu, T::from_f64(POISON)).unwrap();
            spmm_tensor_core_paths(gpu, &a_dev, &b_dev, epilogue, &mut c_dev, &config, sum, None)?;
            Ok(c_dev.download(gpu).unwrap())
        };
        let fix_up = run(RangeSum::FixUp).unwrap();
        oracle.check_kernel(&format!("{label}, fix-up"), &fix_up, &SpmmKernel::TensorCore(config));
        let zeros = fix_up.iter().filter(|v| v.to_f64() == 0.0).count();
        assert!(zeros > m * n / 5 && zeros < m * n * 4 / 5, "{label}: the ReLU cleared {zeros} of {}", m * n);
        assert!(fix_up[7 * n..8 * n].iter().all(|v| v.to_f64().is_nan()), "{label}: row 7, bias NaN: NaN");
        match run(RangeSum::Cluster) {
            Ok(cluster) => {
                assert!(clusters && !config.is_wgmma(), "{label}: clusters ran below sm_90 or for the wgmma kernel");
                assert!(same_bits(&cluster, &fix_up), "{label}: the cluster's epilogue differs from the fix-up's");
            }
            Err(e) => {
                assert!((!clusters || config.is_wgmma()) && matches!(e, Error::Unsupported { .. }), "{label}: {e}")
            }
        }
        runs += 1;
    }
    runs
}

#[test]
fn sanitizer_tensor_core_bias_relu() {
    let Some(gpu) = gpu_or_skip("sanitizer_tensor_core_bias_relu") else { return };
    let per_type = |dtype: DType| {
        let kernels = tensor_cores_here(&gpu, dtype);
        2 * kernels.len() + kernels.iter().filter(|c| c.is_wide()).count()
    };
    assert_eq!(tensor_core_bias_relu_case::<f32>(&gpu), per_type(DType::F32));
    assert_eq!(tensor_core_bias_relu_case::<f16>(&gpu), per_type(DType::F16));
    assert_eq!(tensor_core_bias_relu_case::<bf16>(&gpu), per_type(DType::Bf16));
}

/// `spmm_bias_relu_auto` (and `spmm_kernel_bias_relu` with each kind of kernel): C = ReLU(A * B + bias) with the
/// automatic choice, against the oracle on a poisoned C, the choice the same as `spmm_auto`'s and its C the same as
/// `spmm_kernel_bias_relu`'s with that kernel. Over the problems (32 x 32 blocks, uniform 4096 x 1024 at 50% at n =
/// 130, which pads B and C around a tensor-core product, power-law rows, a small uniform matrix at odd n) every type
/// takes both a tile and the tensor cores (asserted). A bias one element short or long is a typed error with either
/// kind of kernel.
#[test]
fn automatic_bias_relu_matches_the_oracle() {
    let Some(gpu) = gpu_or_skip("automatic_bias_relu_matches_the_oracle") else { return };
    fn case<T: Scalar>(gpu: &Gpu) {
        let cases: Vec<(&str, CsMat<f32>, usize)> = vec![
            ("blocks 1024 x 4096, n = 128", gen::block_sparse(1024, 4096, 32, 32, 0.05, seed(340)), 128),
            ("uniform 4096 x 1024 at 50%, n = 130", gen::uniform_random(4096, 1024, 0.5, seed(341)), 130),
            ("power law 3000 x 2000, n = 64", gen::power_law(3000, 2000, 8.0, 1.5, seed(342)), 64),
            ("uniform 77 x 90, n = 33", gen::uniform_random(77, 90, 0.3, seed(343)), 33),
        ];
        let (mut tiled, mut tensor) = (0, 0);
        for (i, (what, a, n)) in cases.iter().enumerate() {
            let what = format!("{} {what}", T::DTYPE);
            let (m, k) = a.shape();
            let a_t: CsMat<T> = gen::convert(a);
            let b = dense::<T>(k, *n, seed(350 + i as u64));
            // Scaled to C's spread, so that the ReLU clears part of C but not all of it.
            let spread = (a.nnz() as f32 / m as f32).sqrt() / 3.0;
            let bias: Vec<f32> = bias_with(m, &[]).iter().map(|v| v * spread).collect();
            let oracle = SpmmOracle::new(a_t.view(), &b, *n).bias_relu::<T>(&bias, *n);
            let a_dev = DeviceCsr::upload(gpu, a_t.view()).unwrap();
            let b_dev = DeviceDense::upload(gpu, k, *n, &b).unwrap();
            let bias_dev = gpu.stream().clone_htod(&bias).unwrap();
            let mut c_dev = DeviceDense::<T>::zeros(gpu, m, *n).unwrap();
            c_dev.fill(gpu, T::from_f64(POISON)).unwrap();
            let used = spmm_bias_relu_auto(gpu, &a_dev, &b_dev, &bias_dev, &mut c_dev)
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(used, tilesparse::spmm::auto_kernel(gpu, &a_dev, *n).unwrap(), "{what}");
            let c = c_dev.download(gpu).unwrap();
            oracle.check_kernel(&format!("{what} ({used})"), &c, &used);
            let zeros = c.iter().filter(|v| v.to_f64() == 0.0).count();
            assert!(zeros > 0 && zeros < c.len(), "{what}: the ReLU cleared {zeros} of {}", c.len());
            c_dev.fill(gpu, T::from_f64(POISON)).unwrap();
            spmm_kernel_bias_relu(gpu, &a_dev, &b_dev, &bias_dev, &mut c_dev, &used).unwrap();
            assert!(same_bits(&c_dev.download(gpu).unwrap(), &c), "{what}: spmm_kernel_bias_relu with {used}");
            match used {
                SpmmKernel::Tiled(_) => tiled += 1,
                SpmmKernel::TensorCore(_) => tensor += 1,
            }
            // A bias one element too short or too long: a typed error.
            for len in [m - 1, m + 1] {
                let wrong = gpu.stream().clone_htod(&vec![0.5f32; len]).unwrap();
                let r = spmm_kernel_bias_relu(gpu, &a_dev, &b_dev, &wrong, &mut c_dev, &used);
                assert!(matches!(r, Err(Error::ShapeMismatch(_))), "{what}: a bias of {len} for {m} rows: {r:?}");
            }
        }
        assert!(tiled > 0 && tensor > 0, "{}: tiles {tiled}, tensor cores {tensor}", T::DTYPE);
    }
    case::<f32>(&gpu);
    case::<f16>(&gpu);
    case::<bf16>(&gpu);
}

/// The rule that leaves empty windows out (`tensor_core::leaves_out_empty_windows`: `EMPTY_WINDOW_BLOCKS` blocks or
/// more on them, no split, not the wgmma kernel): a tall banded matrix (22,534 x 1,052, 21,473 rows empty) at n = 64
/// and 1024 on every tensor-core kernel this device runs. `skipped_empty_windows` says the rule's count (the 16-row
/// windows at n = 1024 leave theirs out, the 64-row ones at n = 64 walk them), and each run matches the oracle on a
/// poisoned C.
#[test]
fn tensor_core_leaves_out_empty_windows_by_the_rule() {
    use tilesparse::spmm::tensor_core::{empty_windows, skipped_empty_windows, split_plan, EMPTY_WINDOW_BLOCKS};
    let Some(gpu) = gpu_or_skip("tensor_core_leaves_out_empty_windows_by_the_rule") else { return };
    let a = gen::banded(22534, 1052, 9, seed(310));
    fn case<T: Scalar>(gpu: &Gpu, a: &CsMat<f32>) -> (usize, usize) {
        let (mut left, mut kept) = (0, 0);
        for n in [64, 1024] {
            let (oracle, a_dev, b_dev, mut c_dev) = upload_problem::<T>(gpu, a, n, seed(311));
            for config in tensor_cores_here(gpu, T::DTYPE) {
                let empty = empty_windows(gpu, &a_dev, &config).unwrap();
                let skipped = skipped_empty_windows(gpu, &a_dev, n, &config).unwrap();
                let slices = n.div_ceil(config.columns_per_block());
                let ranges = split_plan(gpu, &a_dev, &config, n).unwrap().ranges;
                let label = format!("tall banded, n = {n}, {config}: {empty} empty windows x {slices} slices");
                assert!(empty > 300, "{label}");
                let expect = !config.is_wgmma() && ranges == 1 && empty * slices >= EMPTY_WINDOW_BLOCKS;
                assert_eq!(skipped, if expect { empty } else { 0 }, "{label}, {ranges} ranges");
                if config.window == 16 && n == 1024 {
                    assert_eq!(skipped, empty, "{label}");
                }
                if config.window == 64 && n == 64 {
                    assert_eq!(skipped, 0, "{label}");
                }
                (left, kept) = if skipped > 0 { (left + 1, kept) } else { (left, kept + 1) };
                c_dev.fill(gpu, T::from_f64(POISON)).unwrap();
                spmm_tensor_core(gpu, &a_dev, &b_dev, &mut c_dev, &config).unwrap();
                oracle.check_kernel(&label, &c_dev.download(gpu).unwrap(), &SpmmKernel::TensorCore(config));
            }
        }
        (left, kept)
    }
    for (dtype, (left, kept)) in [
        (DType::F32, case::<f32>(&gpu, &a)),
        (DType::F16, case::<f16>(&gpu, &a)),
        (DType::Bf16, case::<bf16>(&gpu, &a)),
    ] {
        assert!(left > 0 && kept > 0, "{dtype}: {left} launches left the empty windows out, {kept} walked them");
    }
}

/// spmm_auto picks the tensor cores for a half-full f16/bf16/f32 matrix and (f16) for a small C (SpmmKernel::select),
/// and a CUDA-core tile for a large C at 95% sparsity; 64-row windows on 320 rows where there is enough work, 16-row
/// ones where there is not; every result matches the oracle. A's seeds are fixed, since the choice depends on how
/// full A's blocks are; B is fresh.
#[test]
fn auto_uses_the_tensor_cores_where_they_win() {
    let Some(gpu) = gpu_or_skip("auto_uses_the_tensor_cores_where_they_win") else { return };
    /// C = A * B (k x n, fresh) through spmm_auto on a poisoned C, checked against the oracle; the kernel it used.
    fn auto<T: Scalar>(gpu: &Gpu, a: CsMat<T>, n: usize) -> SpmmKernel {
        let (m, k) = (a.rows(), a.cols());
        let b = dense::<T>(k, n, seed(96));
        let a_dev = DeviceCsr::upload(gpu, a.view()).unwrap();
        let b_dev = DeviceDense::upload(gpu, k, n, &b).unwrap();
        let mut c_dev = DeviceDense::<T>::zeros(gpu, m, n).unwrap();
        c_dev.fill(gpu, T::from_f64(POISON)).unwrap();
        let used = spmm_auto(gpu, &a_dev, &b_dev, &mut c_dev).unwrap();
        SpmmOracle::new(a.view(), &b, n).check_kernel(&format!("auto {used}"), &c_dev.download(gpu).unwrap(), &used);
        used
    }
    fn case<T: Scalar>(gpu: &Gpu, m: usize, density: f64, want_tc: bool) {
        let used = auto::<T>(gpu, gen::convert(&gen::uniform_random(m, 300, density, 95)), 64);
        assert_eq!(matches!(used, SpmmKernel::TensorCore(_)), want_tc, "m = {m}, density {density}: {used}");
    }
    case::<f16>(&gpu, 9000, 0.5, true);
    case::<bf16>(&gpu, 9000, 0.5, true);
    case::<f32>(&gpu, 9000, 0.5, true); // 3xTF32, its own bound (check_kernel)
    case::<f32>(&gpu, 9000, 0.05, false);
    case::<f16>(&gpu, 200, 0.05, true); // C of 12 800 elements
    case::<f16>(&gpu, 9000, 0.05, false); // blocks 8% full, C of 576 000

    // Fewer than 1024 rows, half full, at least 4800 (k-block, 64-column slice) pairs: the 64-row windows; with
    // fewer pairs the 16-row ones (select_tensor_core, NOTES.md "SpMM step 23").
    fn window<T: Scalar>(gpu: &Gpu, m: usize, k: usize, n: usize) -> u32 {
        match auto::<T>(gpu, gen::convert(&gen::uniform_random(m, k, 0.5, 97)), n) {
            SpmmKernel::TensorCore(c) => c.window,
            other => panic!("m = {m}, k = {k}, n = {n}: {other} is not on the tensor cores"),
        }
    }
    assert_eq!(window::<f16>(&gpu, 320, 1536, 1024), 64); // 5 windows x 96 k-blocks x 16 slices
    assert_eq!(window::<bf16>(&gpu, 320, 1536, 1024), 64);
    assert_eq!(window::<f16>(&gpu, 320, 1536, 256), 16); // x 4 slices: 1920 pairs
}

/// f32 on a half-full 4096 x 1024 matrix (64 windows of 64 k-blocks) at n = 128 (64 blocks of 128 columns):
/// spmm_auto takes the wgmma kernel in four ranges on compute capability 9.0 and the mma.sync one elsewhere
/// (SpmmKernel::select_for); the result matches the oracle, a second run gives the same bits, and every f32
/// tensor-core kernel this device runs matches the oracle on the same problem.
#[test]
fn auto_takes_the_wgmma_kernel_on_hopper() {
    let Some(gpu) = gpu_or_skip("auto_takes_the_wgmma_kernel_on_hopper") else { return };
    let n = 128;
    let a = gen::uniform_random(4096, 1024, 0.5, seed(230));
    let (oracle, a_dev, b_dev, mut c_dev) = upload_problem::<f32>(&gpu, &a, n, seed(231));
    c_dev.fill(&gpu, POISON as f32).unwrap();
    let kernel = spmm_auto(&gpu, &a_dev, &b_dev, &mut c_dev).unwrap();
    let SpmmKernel::TensorCore(config) = kernel else { panic!("{kernel} chosen, not a 3xTF32 kernel") };
    let hopper = gpu.info().compute_capability == (9, 0);
    assert_eq!(config.is_wgmma(), hopper, "{config} on {:?}", gpu.info().compute_capability);
    if hopper {
        assert_eq!(tilesparse::spmm::tensor_core::split_plan(&gpu, &a_dev, &config, n).unwrap().ranges, 4);
    }
    let chosen = c_dev.download(&gpu).unwrap();
    oracle.check_kernel("auto, 4096 x 1024 at 50%, n = 128", &chosen, &kernel);
    c_dev.fill(&gpu, POISON as f32).unwrap();
    spmm_auto(&gpu, &a_dev, &b_dev, &mut c_dev).unwrap();
    let again = c_dev.download(&gpu).unwrap();
    assert!(chosen.iter().zip(&again).all(|(x, y)| x.to_bits() == y.to_bits()), "a second run differs");
    for other in tensor_cores_here(&gpu, DType::F32) {
        c_dev.fill(&gpu, POISON as f32).unwrap();
        spmm_tensor_core(&gpu, &a_dev, &b_dev, &mut c_dev, &other).unwrap();
        oracle.check_kernel(&format!("{other}, 4096 x 1024"), &c_dev.download(&gpu).unwrap(), &kernel);
    }
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

/// Buffers the caller made on the handle's stream are wrapped without a copy (`DeviceDense::from_slice`,
/// `DeviceCsr::from_device`, each longer than the matrix needs) and give the same C as uploaded operands, bit for
/// bit, and the oracle's; the buffers come back (`into_slice`, `into_parts`). Short buffers, a malformed structure
/// and another handle's memory are typed errors, with nothing launched.
#[test]
fn callers_device_buffers_are_wrapped_and_checked() {
    let Some(gpu) = gpu_or_skip("callers_device_buffers_are_wrapped_and_checked") else { return };
    let (m, k, n) = (300, 200, 96);
    let a = gen::uniform_random(m, k, 0.1, seed(130));
    let b = dense::<f32>(k, n, seed(131));
    let a_up = DeviceCsr::upload(&gpu, a.view()).unwrap();
    let b_up = DeviceDense::upload(&gpu, k, n, &b).unwrap();
    let mut c_up = DeviceDense::<f32>::zeros(&gpu, m, n).unwrap();
    let kernel = spmm_auto(&gpu, &a_up, &b_up, &mut c_up).unwrap();
    let want = c_up.download(&gpu).unwrap();

    let stream = gpu.stream();
    let indptr: Vec<i32> = a.indptr().raw_storage().iter().map(|&x| x as i32).chain([7, 7]).collect();
    let indices: Vec<i32> = a.indices().iter().map(|&x| x as i32).chain([0; 5]).collect();
    let values: Vec<f32> = a.data().iter().copied().chain([1.0; 5]).collect();
    let mut b_long = b.clone();
    b_long.extend([f32::NAN; 3]);
    let up_i32 = |v: &[i32]| stream.clone_htod(v).unwrap();
    let up_f32 = |v: &[f32]| stream.clone_htod(v).unwrap();
    let a_dev = DeviceCsr::from_device(&gpu, m, k, up_i32(&indptr), up_i32(&indices), up_f32(&values)).unwrap();
    assert_eq!((a_dev.rows(), a_dev.cols(), a_dev.nnz()), (m, k, a.nnz()));
    assert_eq!(a_dev.stats(&gpu).unwrap(), a_up.stats(&gpu).unwrap());
    assert_eq!(a_dev.tensor_core_block_count(), a_up.tensor_core_block_count());
    // The values never left the device: whether they hold Inf or NaN is not known; the upload looked.
    assert_eq!((a_dev.holds_non_finite(), a_up.holds_non_finite()), (None, Some(false)));
    let b_dev = DeviceDense::from_slice(&gpu, k, n, up_f32(&b_long)).unwrap();
    let mut c_dev = DeviceDense::from_slice(&gpu, m, n, up_f32(&vec![POISON as f32; m * n])).unwrap();
    assert_eq!(spmm_auto(&gpu, &a_dev, &b_dev, &mut c_dev).unwrap(), kernel);
    let got = c_dev.download(&gpu).unwrap();
    assert!(got.iter().zip(&want).all(|(x, y)| x.to_bits() == y.to_bits()), "{kernel}: bits differ from uploaded");
    check_spmm("wrapped buffers", a.view(), &b, n, &got);
    assert_eq!(a_dev.device_parts().2.len(), values.len());
    let (offsets, _, _) = a_dev.into_parts();
    assert_eq!(offsets.len(), indptr.len());
    assert_eq!(c_dev.into_slice().len(), m * n);
    assert_eq!(b_dev.as_slice().len(), k * n + 3);

    let csr_error = |r: tilesparse::Result<DeviceCsr<f32>>| match r {
        Err(Error::InvalidCsr(e)) => e,
        Err(e) => panic!("expected a CSR error, got {e}"),
        Ok(_) => panic!("expected a CSR error, got a matrix"),
    };
    let wrap = |p: &[i32], i: &[i32], v: &[f32]| DeviceCsr::from_device(&gpu, m, k, up_i32(p), up_i32(i), up_f32(v));
    let nnz = a.nnz();
    assert!(matches!(csr_error(wrap(&indptr[..m], &indices, &values)), CsrError::IndptrLength { .. }));
    assert!(matches!(csr_error(wrap(&indptr, &indices, &values[..nnz - 1])), CsrError::LengthMismatch { .. }));
    assert!(matches!(csr_error(wrap(&indptr, &indices[..nnz - 1], &values)), CsrError::LengthMismatch { .. }));
    let row = (0..m).find(|&r| a.outer_view(r).unwrap().nnz() >= 2).unwrap();
    let mut unsorted = indices.clone();
    unsorted.swap(indptr[row] as usize, indptr[row] as usize + 1);
    assert!(matches!(csr_error(wrap(&indptr, &unsorted, &values)), CsrError::Unsorted { .. }));
    let mut negative = indices.clone();
    negative[nnz - 1] = -1;
    assert!(
        matches!(csr_error(wrap(&indptr, &negative, &values)), CsrError::Negative { index, .. } if index == nnz - 1)
    );
    let mut out_of_range = indices.clone();
    out_of_range[0] = k as i32;
    assert!(matches!(csr_error(wrap(&indptr, &out_of_range, &values)), CsrError::ColumnOutOfRange { .. }));
    let mut shifted = indptr.clone();
    shifted[0] = 1;
    assert!(matches!(csr_error(wrap(&shifted, &indices, &values)), CsrError::IndptrStart(1)));
    let short_b = DeviceDense::from_slice(&gpu, k, n + 1, up_f32(&b));
    assert!(matches!(short_b, Err(Error::ShapeMismatch(_))), "a short dense buffer");
    let other = Gpu::new(0).unwrap();
    let theirs = other.stream().clone_htod(&b).unwrap();
    assert!(matches!(DeviceDense::from_slice(&gpu, k, n, theirs), Err(Error::WrongGpu(_))));
    let theirs = other.stream().clone_htod(&indptr).unwrap();
    let wrong = DeviceCsr::from_device(&gpu, m, k, theirs, up_i32(&indices), up_f32(&values));
    assert!(matches!(wrong, Err(Error::WrongGpu(_))));

    // A structure large enough that the host checks its download on rayon's threads: the statistics, the row
    // order's product and the block counts are the upload's, and of two negative entries the first is reported.
    let (m, k) = (60_000, 3_000);
    let big = gen::power_law(m, k, 6.0, 1.5, seed(132));
    let uploaded = DeviceCsr::upload(&gpu, big.view()).unwrap();
    let offsets: Vec<i32> = big.indptr().to_proper().iter().map(|&x| x as i32).collect();
    let columns: Vec<i32> = big.indices().iter().map(|&x| x as i32).collect();
    let wrapped = DeviceCsr::from_device(&gpu, m, k, up_i32(&offsets), up_i32(&columns), up_f32(big.data())).unwrap();
    assert_eq!(wrapped.stats(&gpu).unwrap(), uploaded.stats(&gpu).unwrap());
    assert_eq!(wrapped.tensor_core_block_count(), uploaded.tensor_core_block_count());
    let b = dense::<f32>(k, 64, seed(133));
    let b_dev = DeviceDense::upload(&gpu, k, 64, &b).unwrap();
    let mut c_dev = DeviceDense::<f32>::zeros(&gpu, m, 64).unwrap();
    let kernel = spmm_auto(&gpu, &wrapped, &b_dev, &mut c_dev).unwrap();
    let got = c_dev.download(&gpu).unwrap();
    check_spmm(&format!("large wrapped buffers, {kernel}"), big.view(), &b, 64, &got);
    // The same C into a vector of the caller's (poisoned), and the wrong length refused.
    let mut into = vec![POISON as f32; m * 64];
    c_dev.download_into(&gpu, &mut into).unwrap();
    assert!(same_bits(&into, &got), "download_into gave other bits than download");
    let short = c_dev.download_into(&gpu, &mut into[1..]);
    assert!(matches!(short, Err(Error::ShapeMismatch(_))), "{short:?}");
    let nnz = columns.len();
    let mut negative = columns.clone();
    (negative[nnz / 3], negative[nnz - 2]) = (-7, -1);
    let wrap = |i: &[i32]| DeviceCsr::from_device(&gpu, m, k, up_i32(&offsets), up_i32(i), up_f32(big.data()));
    let error = csr_error(wrap(&negative));
    assert!(matches!(error, CsrError::Negative { index, value: -7, .. } if index == nnz / 3), "{error}");
    // Uploads of it with a bad entry or pointer: their checks run while the arrays are copied, and the error comes
    // back (a column past i32 too, which wraps in the copy's conversion, and a decreasing pointer, before any
    // statistics are taken).
    let (indptr, indices) = (big.indptr().to_proper().to_vec(), big.indices().to_vec());
    let upload = |p: &[usize], i: &[usize]| DeviceCsr::from_parts(&gpu, m, k, p, i, big.data());
    let row = indptr.partition_point(|&p| p <= nnz / 2) - 1;
    let mut far = indices.clone();
    far[nnz / 2] = usize::MAX;
    let error = csr_error(upload(&indptr, &far));
    assert_eq!(error, CsrError::ColumnOutOfRange { row, col: usize::MAX, cols: k });
    let mut down = indptr.clone();
    let row = (m / 2..m).find(|&r| indptr[r + 1] > indptr[r]).unwrap();
    down[row + 1] = indptr[row] - 1; // rows before m / 2 hold entries, so indptr[row] > 0
    let error = csr_error(upload(&down, &indices));
    assert!(matches!(error, CsrError::IndptrNotMonotone { row: r, .. } if r == row), "{error}");
    assert!(upload(&indptr, &indices).is_ok());
}

/// Memory of another `Gpu` handle is refused with `WrongGpu`, before any launch: its stream is not this handle's,
/// so a kernel here would not wait for its uploads, and its frees would not wait for this handle's kernels.
#[test]
fn spmm_refuses_another_handles_operands() {
    let Some(gpu) = gpu_or_skip("spmm_refuses_another_handles_operands") else { return };
    let other = Gpu::new(0).unwrap();
    let (m, k, n) = (64, 48, 32);
    let a = gen::uniform_random(m, k, 0.2, seed(95));
    let b = gen::dense_matrix(k, n, seed(96));
    let config = SpmmConfig::select(m, k, n, a.nnz(), DType::F32);
    let a_dev = DeviceCsr::upload(&gpu, a.view()).unwrap();
    let b_dev = DeviceDense::upload(&gpu, k, n, &b).unwrap();
    let mut c_dev = DeviceDense::<f32>::zeros(&gpu, m, n).unwrap();
    let a_other = DeviceCsr::upload(&other, a.view()).unwrap();
    let b_other = DeviceDense::upload(&other, k, n, &b).unwrap();
    let mut c_other = DeviceDense::<f32>::zeros(&other, m, n).unwrap();
    let wrong = |r: tilesparse::Result<()>| matches!(r, Err(Error::WrongGpu(_)));
    assert!(wrong(spmm(&gpu, &a_other, &b_dev, &mut c_dev, &config)));
    assert!(wrong(spmm(&gpu, &a_dev, &b_other, &mut c_dev, &config)));
    assert!(wrong(spmm(&gpu, &a_dev, &b_dev, &mut c_other, &config)));
    assert!(wrong(spmm(&other, &a_dev, &b_dev, &mut c_dev, &config)));
    assert!(matches!(spmm_auto(&gpu, &a_other, &b_dev, &mut c_dev), Err(Error::WrongGpu(_))));
    assert!(matches!(c_dev.download(&other), Err(Error::WrongGpu(_))));
    // The same call on one handle runs, and so does the other handle on its own operands.
    c_dev.fill(&gpu, POISON as f32).unwrap();
    spmm(&gpu, &a_dev, &b_dev, &mut c_dev, &config).unwrap();
    check_spmm("one handle", a.view(), &b, n, &c_dev.download(&gpu).unwrap());
    c_other.fill(&other, POISON as f32).unwrap();
    spmm(&other, &a_other, &b_other, &mut c_other, &config).unwrap();
    check_spmm("the other handle", a.view(), &b, n, &c_other.download(&other).unwrap());
}

/// Step 61: where neighbouring rows share columns ([`RowStats::columns_per_entry`]) `spmm_auto` takes the tiles in
/// turn on rows of 7 in 65536 rows, checked against the oracle; the same rows permuted at random share none and keep
/// one column tile per block. A matrix built on the device (C = A I by the SpGEMM) gets the statistics, and so the
/// kernel, of its upload: the lazy statistics read the column indices back too.
#[test]
fn automatic_tiles_in_turn_where_rows_share_columns() {
    let m: usize = 65536;
    let mut rng = gen::Rng::new(seed(151));
    let mut banded = Vec::new();
    for r in 0..m {
        banded.extend((r.saturating_sub(3)..(r + 4).min(m)).map(|c| (r, c, rng.range(-1.0, 1.0) as f32)));
    }
    // A random permutation of rows and columns alike (Fisher-Yates on the generator's stream).
    let mut perm: Vec<usize> = (0..m).collect();
    for i in (1..m).rev() {
        perm.swap(i, rng.below(i + 1));
    }
    let permuted: Vec<(usize, usize, f32)> = banded.iter().map(|&(r, c, v)| (perm[r], perm[c], v)).collect();
    let (banded, permuted) = (from_triplets(m, m, &banded), from_triplets(m, m, &permuted));
    let shared = RowStats::of_csr(banded.indptr().raw_storage(), banded.indices());
    let spread = RowStats::of_csr(permuted.indptr().raw_storage(), permuted.indices());
    let (c_shared, c_spread) = (shared.columns_per_entry.unwrap(), spread.columns_per_entry.unwrap());
    assert!(c_shared < 0.2 && c_spread > 0.8, "columns per entry {c_shared:.3} and {c_spread:.3}");
    assert!(shared.cv <= 0.2 && (shared.mean - 7.0).abs() < 0.01, "{shared:?}");
    let k8_in_turn = "spmm_f32_s1d4_y4k8x32w8_u4_nopred_c8_lb32";
    assert_eq!(SpmmConfig::select_with_stats(m, m, 256, &shared, DType::F32).kernel_name(), k8_in_turn);
    assert_eq!(SpmmConfig::select_with_stats(m, m, 256, &spread, DType::F32).column_tiles, 1);
    let Some(gpu) = gpu_or_skip("automatic_tiles_in_turn_where_rows_share_columns") else { return };
    let used = check_auto::<f32>(&gpu, "rows of 7 sharing columns, n = 256", &banded, 256, seed(152));
    assert_eq!(used.to_string(), k8_in_turn);
    let used = check_auto::<f32>(&gpu, "rows of 7 permuted, n = 256", &permuted, 256, seed(153));
    assert!(matches!(used, SpmmKernel::Tiled(c) if c.column_tiles == 1), "{used}");
    // The device-built copy: C = A I.
    let a_dev = DeviceCsr::upload(&gpu, banded.view()).unwrap();
    let eye = DeviceCsr::upload(&gpu, CsMat::<f32>::eye(m).view()).unwrap();
    let c_dev = tilesparse::spgemm(&gpu, &a_dev, &eye).unwrap();
    assert_eq!(c_dev.stats(&gpu).unwrap(), a_dev.stats(&gpu).unwrap());
    assert_eq!(a_dev.stats(&gpu).unwrap(), &shared);
}

/// Step 62: f16 and bf16 rows of 1-7 in 20000 rows over k = 30000 take the k = 8 tile four column tiles in turn under
/// `spmm_auto`, at n of a group cut short (128: two tiles), of a group and a tile (320) and of two groups (512),
/// checked against the oracle on a poisoned C; step 63: rows of 2-10 in 12000 rows at n = 1024, 1088 (four groups
/// and a tile) and 2048; step 64: the same at n = 256 and 512 on the 256-column tile.
#[test]
fn automatic_half_tiles_in_turn_on_very_short_rows() {
    let (m, k) = (20000, 30000);
    let a = rows_of_lengths(m, k, |r| 1 + (r * 5) % 7, 161);
    let stats = RowStats::of_csr(a.indptr().raw_storage(), a.indices());
    assert!(stats.mean <= 7.0 && stats.cv <= 1.0 && stats.max <= 64, "{stats:?}");
    let Some(gpu) = gpu_or_skip("automatic_half_tiles_in_turn_on_very_short_rows") else { return };
    for n in [128, 320, 512] {
        let used = check_auto::<f16>(&gpu, &format!("f16 rows of 1-7, n = {n}"), &a, n, seed(162));
        assert_eq!(used.to_string(), "spmm_f16_s1d8_y4k8x64w8_u4_nopred_c4_lb32");
        let used = check_auto::<bf16>(&gpu, &format!("bf16 rows of 1-7, n = {n}"), &a, n, seed(163));
        assert_eq!(used.to_string(), "spmm_bf16_s1d8_y4k8x64w8_u4_nopred_c4_lb32");
    }
    // Step 63: 8192-16383 rows at n = 1024-2048.
    let a = rows_of_lengths(12000, 12000, |r| 2 + (r * 3) % 9, 164);
    let stats = RowStats::of_csr(a.indptr().raw_storage(), a.indices());
    assert!(stats.mean <= 7.5 && stats.cv <= 1.0 && stats.max <= 64, "{stats:?}");
    for n in [1024, 1088, 2048] {
        let used = check_auto::<f16>(&gpu, &format!("f16 12000 rows of 2-10, n = {n}"), &a, n, seed(165));
        assert_eq!(used.to_string(), "spmm_f16_s1d8_y4k8x64w8_u4_nopred_c4_lb32");
        let used = check_auto::<bf16>(&gpu, &format!("bf16 12000 rows of 2-10, n = {n}"), &a, n, seed(166));
        assert_eq!(used.to_string(), "spmm_bf16_s1d8_y4k8x64w8_u4_nopred_c4_lb32");
    }
    // Step 64: at n = 256 and 512 the same rows take the 256-column tile.
    for n in [256, 512] {
        let used = check_auto::<f16>(&gpu, &format!("f16 12000 rows of 2-10, n = {n}"), &a, n, seed(167));
        assert_eq!(used.to_string(), "spmm_f16_s1d8_y2k16x256w16_u4_nopred");
        let used = check_auto::<bf16>(&gpu, &format!("bf16 12000 rows of 2-10, n = {n}"), &a, n, seed(168));
        assert_eq!(used.to_string(), "spmm_bf16_s1d8_y2k16x256w16_u4_nopred");
    }
}

/// A's rows in a random order (neighbouring rows then seldom share columns).
fn shuffled_rows(a: &CsMat<f32>, seed: u64) -> CsMat<f32> {
    let mut order: Vec<usize> = (0..a.rows()).collect();
    let mut rng = gen::Rng::new(seed);
    for i in (1..order.len()).rev() {
        order.swap(i, rng.below(i + 1));
    }
    let (mut indptr, mut indices, mut values) = (vec![0], Vec::with_capacity(a.nnz()), Vec::with_capacity(a.nnz()));
    for &r in &order {
        let row = a.outer_view(r).unwrap();
        indices.extend_from_slice(row.indices());
        values.extend_from_slice(row.data());
        indptr.push(indices.len());
    }
    CsMat::new((a.rows(), a.cols()), indptr, indices, values)
}

/// `spmm_auto` on fresh random shapes of T, each against the oracle on a poisoned C. The tests above check each
/// rule's choice where it was measured; this draws what no one picked: m and k of 1-80000, 0.3-600 entries a row
/// (4e6 in all) of uniform, power-law or banded rows (some emptied, some in a shuffled order), n of 1-2048 in every
/// residue, so that the kernels run where the rules' bounds meet. Returns the kernels chosen, for the summary line.
fn automatic_choice_on_random_shapes_case<T: Scalar>(gpu: &Gpu, draws: usize, tag: u64) -> BTreeSet<String> {
    let mut rng = gen::Rng::new(seed(tag));
    let mut chosen = BTreeSet::new();
    for draw in 0..draws {
        let m = rng.log_uniform(1, 80_000);
        let k = rng.log_uniform(1, 80_000);
        // At most 4e6 entries in all.
        let most = (k.min(600) as f64).min(4e6 / m as f64).max(0.3);
        let mean = rng.range(0.3f64.ln(), most.ln()).exp().min(k as f64);
        let generator = ["uniform", "powerlaw", "banded"][rng.below(3)];
        let mut a = gen::by_name(generator, m, k, mean / k as f64, seed(tag + 1 + draw as u64)).unwrap();
        if rng.below(4) == 0 {
            a = gen::with_empty_rows(&a, rng.range(0.05, 0.5), seed(tag + 200 + draw as u64));
        }
        if rng.below(4) == 0 {
            a = shuffled_rows(&a, seed(tag + 400 + draw as u64));
        }
        let mut n = match rng.below(4) {
            0 => 1 + rng.below(64),
            1 => 4 * rng.log_uniform(1, 512),
            2 => 32 * (1 + rng.below(64)),
            _ => rng.log_uniform(1, 2048),
        };
        // The f64 oracle's work and C's size stay under 4e7 (a few tenths of a second each).
        while n > 1 && (a.nnz().max(m) * n > 40_000_000) {
            n /= 2;
        }
        let what =
            format!("{} draw {draw}: {generator} {m} x {k}, {} entries, n = {n} ({})", T::DTYPE, a.nnz(), seed_note());
        chosen.insert(check_auto::<T>(gpu, &what, &a, n, seed(tag + 600 + draw as u64)).to_string());
    }
    chosen
}

#[test]
fn automatic_choice_on_random_shapes_matches_the_oracle() {
    let Some(gpu) = gpu_or_skip("automatic_choice_on_random_shapes_matches_the_oracle") else { return };
    let f32s = automatic_choice_on_random_shapes_case::<f32>(&gpu, 40, 2000);
    let f16s = automatic_choice_on_random_shapes_case::<f16>(&gpu, 40, 3000);
    let bf16s = automatic_choice_on_random_shapes_case::<bf16>(&gpu, 40, 4000);
    eprintln!(
        "automatic_choice_on_random_shapes: {} f32, {} f16, {} bf16 kernels chosen ({})",
        f32s.len(),
        f16s.len(),
        bf16s.len(),
        seed_note()
    );
}

/// The epilogue's scalars, C = alpha * A * B + beta * C (+ bias, ReLU) (`SpmmEpilogue`), as the tests draw them:
/// beta not 0 (C read: its NaN and Inf reach their elements), beta 1 with a bias (the accumulating form), and beta 0
/// over a C of NaN (which must not be read).
const EPILOGUES: [(f32, f32, bool); 3] = [(-1.5, 0.75, false), (0.5, 1.0, true), (2.0, 0.0, false)];

/// One problem's epilogue checks: A's oracle, C's shape, the bias, and where C's old values hold a NaN and an Inf.
struct EpilogueProblem<'a> {
    oracle: SpmmOracle,
    m: usize,
    n: usize,
    bias: &'a [f32],
    bias_dev: &'a cudarc::driver::CudaSlice<f32>,
    nan: usize,
    inf: usize,
}

impl<'a> EpilogueProblem<'a> {
    /// A (as stored) times `b` (n columns) with `bias` (on the host and on the device); C's old values hold a NaN at
    /// `nan` and +Inf at `inf`.
    fn new<T: Scalar>(
        a: CsMatView<T>,
        b: &[T],
        n: usize,
        (bias, bias_dev): (&'a [f32], &'a cudarc::driver::CudaSlice<f32>),
        (nan, inf): (usize, usize),
    ) -> Self {
        EpilogueProblem { oracle: SpmmOracle::new(a, b, n), m: a.rows(), n, bias, bias_dev, nan, inf }
    }

    /// C's old values for `beta`: random in [-1, 1) with a NaN at `nan` and +Inf at `inf`; all NaN where beta is 0
    /// (never read).
    fn old<T: Scalar>(&self, beta: f32, seed: u64) -> Vec<T> {
        if beta == 0.0 {
            return vec![T::from_f32(f32::NAN); self.m * self.n];
        }
        let mut old: Vec<T> = gen::dense_matrix(self.m, self.n, seed).into_iter().map(T::from_f32).collect();
        old[self.nan] = T::from_f32(f32::NAN);
        old[self.inf] = T::from_f32(f32::INFINITY);
        old
    }

    /// `run` on a C that holds [`EpilogueProblem::old`] with each of [`EPILOGUES`], each result against the oracle
    /// with `kernel`'s bound; where beta is not 0 the NaN in C must reach C, and where it is 0 no NaN may appear
    /// that the product and the bias do not make (`nan_free`: the elements where they make none). Returns the
    /// results, in the order of [`EPILOGUES`].
    fn check<T: Scalar>(
        &self,
        gpu: &Gpu,
        what: &str,
        kernel: &SpmmKernel,
        nan_free: &[usize],
        mut run: impl FnMut(&mut DeviceDense<T>, SpmmEpilogue) -> Result<(), Error>,
    ) -> Vec<Vec<T>> {
        let mut results = Vec::new();
        for (i, &(alpha, beta, with_bias)) in EPILOGUES.iter().enumerate() {
            let old = self.old::<T>(beta, seed(900 + i as u64));
            let mut c_dev = DeviceDense::upload(gpu, self.m, self.n, &old).unwrap();
            let bias = with_bias.then_some(self.bias);
            let epilogue = SpmmEpilogue { alpha, beta, bias: with_bias.then_some(self.bias_dev) };
            let label = format!("{what}: alpha {alpha}, beta {beta}, bias {with_bias}");
            run(&mut c_dev, epilogue).unwrap_or_else(|e| panic!("{label}: {e}"));
            let c = c_dev.download(gpu).unwrap();
            self.oracle.epilogue::<T>(alpha, beta, &old, bias, self.n).check_kernel(&label, &c, kernel);
            if beta != 0.0 {
                assert!(c[self.nan].to_f64().is_nan(), "{label}: C's NaN must reach C");
            } else {
                assert!(nan_free.iter().all(|&j| !c[j].to_f64().is_nan()), "{label}: C's old NaN was read");
            }
            results.push(c);
        }
        results
    }
}

/// C = alpha * A * B + beta * C (+ bias, ReLU) on every kernel and every path that stores C, in f32, f16 and bf16,
/// against the oracle (`SpmmReference::epilogue`) with each kernel's bound ([`EPILOGUES`]: beta reads C, whose NaN
/// must reach the result; beta 0 must not read a C of NaN):
/// - every compiled tile variant that can run the problem, on 2400 rows (2100 empty, one of 1500 entries that the
///   variants walking pieces split, its pieces added by the fix-up) at n = 128 and 130 (the empty-row fill's
///   vector and element stores), with the empty rows in the grid and left to `spmm_zero_rows` (the same bits);
/// - every tensor-core kernel this device runs, on 600 rows whose windows are partly empty, at n = 8 and 130 (B and
///   C padded to 136: C's old values copied into the padded C first), the empty windows left out and walked (the
///   same bits), and on 190 rows whose wide windows split their k-blocks into 3 ranges, added by the fix-up and in
///   clusters where the device has them (the same bits).
///
/// Small enough for compute-sanitizer.
#[test]
fn sanitizer_epilogue_scalars_on_every_kernel_and_path() {
    let Some(gpu) = gpu_or_skip("sanitizer_epilogue_scalars_on_every_kernel_and_path") else { return };
    let tiles = [epilogue_tiles_case::<f32>(&gpu), epilogue_tiles_case::<f16>(&gpu), epilogue_tiles_case::<bf16>(&gpu)];
    assert!(tiles.iter().all(|&runs| runs > 20), "tile variants run: {tiles:?}");
    for (dtype, runs) in [
        (DType::F32, epilogue_tensor_core_case::<f32>(&gpu)),
        (DType::F16, epilogue_tensor_core_case::<f16>(&gpu)),
        (DType::Bf16, epilogue_tensor_core_case::<bf16>(&gpu)),
    ] {
        let kernels = tensor_cores_here(&gpu, dtype);
        assert_eq!(runs, 2 * kernels.len() + kernels.iter().filter(|c| c.is_wide()).count(), "{dtype}");
    }
}

/// The tiles' part of [`sanitizer_epilogue_scalars_on_every_kernel_and_path`]; returns the runs (variant x n x
/// matrix).
fn epilogue_tiles_case<T: Scalar>(gpu: &Gpu) -> usize {
    let (m, k) = (2400, 2000);
    let stored = |r: usize| if r % 8 == 3 { 1 + r % 40 } else { 0 };
    let skewed = rows_of_lengths(m, k, |r| if r == 1403 { 1500 } else { stored(r) }, seed(940));
    let a: CsMat<T> = gen::convert(&skewed);
    let a_dev = DeviceCsr::upload(gpu, a.view()).unwrap();
    // An empty row's bias NaN (row 0) and a busy row's (row 11).
    let bias = bias_with(m, &[(0, f32::NAN), (11, f32::NAN)]);
    let bias_dev = gpu.stream().clone_htod(&bias).unwrap();
    let (mut runs, mut splits) = (0, 0);
    for n in [128, 130] {
        let b = dense::<T>(k, n, seed(941 + n as u64));
        let b_dev = DeviceDense::upload(gpu, k, n, &b).unwrap();
        // C's NaN on an empty row (row 1) and its Inf on a busy one (row 3).
        let problem = EpilogueProblem::new(a.view(), &b, n, (&bias, &bias_dev), (n + 5, 3 * n + 2));
        let nan_free: Vec<usize> = (n..m * n).filter(|&j| j / n != 11).collect();
        for config in compiled_spmm_variants_for(T::DTYPE) {
            if check_config(config, T::DTYPE, m, k, n).is_err() {
                continue;
            }
            splits += usize::from(splits_rows(gpu, &a_dev, n, config).unwrap());
            let kernel = SpmmKernel::Tiled(*config);
            let what = format!("{} n = {n}, {config}", T::DTYPE);
            let in_grid = problem.check(gpu, &what, &kernel, &nan_free, |c, epilogue| {
                spmm_with(gpu, &a_dev, &b_dev, c, config, epilogue)
            });
            let left_out = problem.check(gpu, &format!("{what}, empty rows left out"), &kernel, &nan_free, |c, e| {
                spmm_leaving_out_empty_rows(gpu, &a_dev, &b_dev, e, c, config).map(|_| ())
            });
            for (x, y) in in_grid.iter().zip(&left_out) {
                assert!(same_bits(x, y), "{what}: other bits with the empty rows left out");
            }
            runs += 1;
        }
    }
    assert!(splits > 0, "{}: no variant split the 1500-entry row", T::DTYPE);
    runs
}

/// The tensor cores' part of [`sanitizer_epilogue_scalars_on_every_kernel_and_path`]; returns the runs (kernel x n
/// on the partly empty windows, and wide kernel on the split ranges).
fn epilogue_tensor_core_case<T: Scalar>(gpu: &Gpu) -> usize {
    let mut runs = 0;
    let (m, k) = (600, 300);
    let busy = |r: usize| (64..200).contains(&r) || (400..590).contains(&r);
    let a: CsMat<T> = gen::convert(&rows_of_lengths(m, k, |r| if busy(r) { 1 + r % 30 } else { 0 }, seed(950)));
    let a_dev = DeviceCsr::upload(gpu, a.view()).unwrap();
    let bias = bias_with(m, &[(70, f32::NAN)]);
    let bias_dev = gpu.stream().clone_htod(&bias).unwrap();
    for n in [8, 130] {
        let b = dense::<T>(k, n, seed(951 + n as u64));
        let b_dev = DeviceDense::upload(gpu, k, n, &b).unwrap();
        // C's NaN on an empty row (row 1), its Inf on a busy one (row 100).
        let problem = EpilogueProblem::new(a.view(), &b, n, (&bias, &bias_dev), (n + 1, 100 * n + 3));
        let nan_free: Vec<usize> = (0..m * n).filter(|&j| j / n != 70).collect();
        for config in tensor_cores_here(gpu, T::DTYPE) {
            let kernel = SpmmKernel::TensorCore(config);
            let what = format!("{} n = {n}, {config}", T::DTYPE);
            let [left_out, walked] = [true, false].map(|leave_out| {
                problem.check(gpu, &format!("{what}, leave_out {leave_out}"), &kernel, &nan_free, |c, e| {
                    spmm_tensor_core_paths(gpu, &a_dev, &b_dev, e, c, &config, RangeSum::Auto, Some(leave_out))
                        .map(|_| ())
                })
            });
            for (x, y) in left_out.iter().zip(&walked) {
                assert!(same_bits(x, y), "{what}: other bits with the empty windows left out");
            }
            runs += 1;
        }
    }

    // Split ranges: the epilogue after the ranges' sum, in the fix-up or the cluster.
    let (m, k, n) = (190, 256 * 3 + 17, 136);
    let a: CsMat<T> = gen::convert(&gen::uniform_random(m, k, 0.4, seed(960)));
    let b = dense::<T>(k, n, seed(961));
    let bias: Vec<f32> = bias_with(m, &[]).iter().map(|v| 5.0 * v).collect();
    let bias_dev = gpu.stream().clone_htod(&bias).unwrap();
    let a_dev = DeviceCsr::upload(gpu, a.view()).unwrap();
    let b_dev = DeviceDense::upload(gpu, k, n, &b).unwrap();
    let problem = EpilogueProblem::new(a.view(), &b, n, (&bias, &bias_dev), (7 * n + 9, 150 * n + 100));
    let nan_free: Vec<usize> = (0..m * n).collect();
    let clusters = gpu.info().has_clusters();
    for config in tensor_cores_here(gpu, T::DTYPE).into_iter().filter(|c| c.is_wide()) {
        let kernel = SpmmKernel::TensorCore(config);
        let ranges = tilesparse::spmm::tensor_core::split_plan(gpu, &a_dev, &config, n).unwrap().ranges;
        let what = format!("{} {ranges} ranges, {config}", T::DTYPE);
        assert_eq!(ranges, 3, "{what}");
        let fix_up = problem.check(gpu, &format!("{what}, fix-up"), &kernel, &nan_free, |c, e| {
            spmm_tensor_core_paths(gpu, &a_dev, &b_dev, e, c, &config, RangeSum::FixUp, None).map(|_| ())
        });
        if clusters && !config.is_wgmma() {
            let cluster = problem.check(gpu, &format!("{what}, clusters"), &kernel, &nan_free, |c, e| {
                spmm_tensor_core_paths(gpu, &a_dev, &b_dev, e, c, &config, RangeSum::Cluster, None).map(|_| ())
            });
            for (x, y) in fix_up.iter().zip(&cluster) {
                assert!(same_bits(x, y), "{what}: the cluster's epilogue differs from the fix-up's");
            }
        }
        runs += 1;
    }
    runs
}

/// `DeviceCsr::set_values`, `set_values_from_device` and `update_values` (new values, the same structure, the last
/// written in place by the caller, once by a writer that fails after writing): every tensor-core kernel
/// this device runs and a tile, on a matrix whose blocks were built in every layout before the update (rewritten in
/// place by `spmm_tc_values_<order>`) and on one that builds them only after it, against the oracle of the new
/// values on a poisoned C, and bit for bit against a fresh upload of them. 600 x 300: scattered columns (a window's
/// slots are not a row's), a whole empty 64-row window and part of the next, one dense row (many k-blocks), m not a
/// multiple of 64; n = 72 (a column slice part past n). Then the typed errors, Inf/NaN bookkeeping and nnz = 0.
/// Small enough for compute-sanitizer (run-all.sh --sanitize).
#[test]
fn sanitizer_new_values_reach_every_kernel() {
    let Some(gpu) = gpu_or_skip("sanitizer_new_values_reach_every_kernel") else { return };
    for (dtype, runs) in [
        (DType::F32, new_values_case::<f32>(&gpu)),
        (DType::F16, new_values_case::<f16>(&gpu)),
        (DType::Bf16, new_values_case::<bf16>(&gpu)),
    ] {
        // Four sets of values, two matrices each, every tensor-core kernel and one tile.
        assert_eq!(runs, 4 * 2 * (tensor_cores_here(&gpu, dtype).len() + 1), "{dtype}");
    }
    new_values_errors(&gpu);
}

/// 600 x 300 at 6% (seed `seed`) with holes: rows 192-289 empty (a whole 64-row window and part of the next) and
/// row 130 dense (many k-blocks). Scattered columns, so a window's slots are not a row's; m not a multiple of 64.
fn holes_and_a_dense_row(seed: u64) -> CsMat<f32> {
    let (m, k) = (600, 300);
    let mut entries: Vec<(usize, usize, f32)> = gen::uniform_random(m, k, 0.06, seed)
        .iter()
        .filter(|&(_, (r, _))| !(192..290).contains(&r) && r != 130)
        .map(|(&v, (r, c))| (r, c, v))
        .collect();
    entries.extend((0..k).map(|c| (130, c, 0.5)));
    from_triplets(m, k, &entries)
}

/// A with its values replaced by fresh random ones (seed `seed`), rounded to T.
fn with_new_values<T: Scalar>(a: &CsMat<f32>, seed: u64) -> CsMat<T> {
    let values = gen::dense_matrix(1, a.nnz(), seed);
    let (indptr, indices) = (a.proper_indptr().into_owned(), a.indices().to_vec());
    gen::convert(&CsMat::new(a.shape(), indptr, indices, values))
}

/// [`sanitizer_new_values_reach_every_kernel`]'s runs for T; returns how many products it checked.
fn new_values_case<T: Scalar>(gpu: &Gpu) -> usize {
    let (m, k, n) = (600, 300, 72);
    let structure = holes_and_a_dense_row(seed(960));
    let b = dense::<T>(k, n, seed(961));
    let b_dev = DeviceDense::upload(gpu, k, n, &b).unwrap();
    let mut c_dev = DeviceDense::<T>::zeros(gpu, m, n).unwrap();
    let kernels = tensor_cores_and_a_tile::<T>(gpu, (m, k, n), structure.nnz());
    let mut run = |a: &DeviceCsr<T>, kernel: &SpmmKernel| run_poisoned(gpu, a, &b_dev, &mut c_dev, kernel);
    let first: CsMat<T> = with_new_values(&structure, seed(962));
    // Every layout built from the first values; the lazy matrix builds none before its update.
    let mut built = DeviceCsr::upload(gpu, first.view()).unwrap();
    let mut lazy = DeviceCsr::upload(gpu, first.view()).unwrap();
    for kernel in &kernels {
        run(&built, kernel);
    }
    let mut runs = 0;
    // How each round sets them: from the host, from a device buffer, or written in place (`update_values`).
    let (host, device, in_place) = (0, 1, 2);
    for (round, how) in [(0u64, host), (1, device), (2, host), (3, in_place)] {
        let new: CsMat<T> = with_new_values(&structure, seed(963 + round));
        for (i, a) in [&mut built, &mut lazy].into_iter().enumerate() {
            if how == in_place {
                // The writer copies the values in and reports their count; for `built` it then fails, which
                // comes back after the blocks were rewritten from what it wrote.
                let fails = i == 0;
                let r = a.update_values(gpu, |values| {
                    let write = gpu.stream().memcpy_htod(new.data(), values);
                    write.map_err(|source| Error::Driver { what: "the test's write", source })?;
                    if fails {
                        return Err(Error::Usage("the writer failed after writing".into()));
                    }
                    Ok(values.len())
                });
                match r {
                    Ok(len) => assert!(!fails && len == new.nnz()),
                    Err(e) => assert!(fails && matches!(e, Error::Usage(_)), "{e}"),
                }
                assert_eq!(a.holds_non_finite(), None, "values never on the host");
            } else if how == device {
                // A longer buffer: its first nnz elements are the values.
                let mut longer = new.data().to_vec();
                longer.extend([T::from_f32(f32::NAN); 7]);
                let values = gpu.stream().clone_htod(&longer).unwrap();
                a.set_values_from_device(gpu, &values).unwrap();
                assert_eq!(a.holds_non_finite(), None, "values never on the host");
            } else {
                a.set_values(gpu, new.data()).unwrap();
                assert_eq!(a.holds_non_finite(), Some(false));
            }
        }
        let fresh = DeviceCsr::upload(gpu, new.view()).unwrap();
        let oracle = SpmmOracle::new(new.view(), &b, n);
        for kernel in &kernels {
            let expected = run(&fresh, kernel);
            for (name, a) in [("blocks rewritten", &built), ("blocks built after", &lazy)] {
                let what = format!("{} round {round}, {name}, {kernel}", T::DTYPE);
                let got = run(a, kernel);
                oracle.check_kernel(&what, &got, kernel);
                assert!(same_bits(&got, &expected), "{what}: other bits than a fresh upload of the values");
                runs += 1;
            }
        }
    }
    runs
}

/// The typed errors of `set_values`, `set_values_from_device` and `update_values`, the Inf/NaN flag, and nnz = 0.
fn new_values_errors(gpu: &Gpu) {
    let a = gen::uniform_random(40, 30, 0.2, seed(970));
    let mut a_dev = DeviceCsr::upload(gpu, a.view()).unwrap();
    let nnz = a.nnz();
    let length = |r: tilesparse::Result<()>, got: usize| match r {
        Err(Error::InvalidCsr(CsrError::ValuesLength { got: g, nnz: z })) => g == got && z == nnz,
        _ => false,
    };
    let values = a.data().to_vec();
    assert!(length(a_dev.set_values(gpu, &values[1..]), nnz - 1));
    let mut longer = values.clone();
    longer.push(1.0);
    assert!(length(a_dev.set_values(gpu, &longer), nnz + 1));
    let short = gpu.stream().clone_htod(&values[1..]).unwrap();
    assert!(length(a_dev.set_values_from_device(gpu, &short), nnz - 1));
    let other = Gpu::new(0).unwrap();
    let theirs = other.stream().clone_htod(&values).unwrap();
    assert!(matches!(a_dev.set_values_from_device(gpu, &theirs), Err(Error::WrongGpu(_))));
    assert!(matches!(a_dev.set_values(&other, &values), Err(Error::WrongGpu(_))));
    let r = a_dev.update_values(&other, |_| -> tilesparse::Result<()> { panic!("another handle's writer ran") });
    assert!(matches!(r, Err(Error::WrongGpu(_))));
    // A NaN is seen on the host, and taken to the product; finite values clear the flag.
    let mut with_nan = values.clone();
    with_nan[nnz / 2] = f32::NAN;
    a_dev.set_values(gpu, &with_nan).unwrap();
    assert_eq!(a_dev.holds_non_finite(), Some(true));
    let n = 8;
    let b = gen::dense_matrix(30, n, seed(971));
    let b_dev = DeviceDense::upload(gpu, 30, n, &b).unwrap();
    let mut c_dev = DeviceDense::<f32>::zeros(gpu, 40, n).unwrap();
    c_dev.fill(gpu, POISON as f32).unwrap();
    spmm_auto(gpu, &a_dev, &b_dev, &mut c_dev).unwrap();
    let a_nan = CsMat::new(a.shape(), a.proper_indptr().into_owned(), a.indices().to_vec(), with_nan);
    check_spmm("a NaN set on the device", a_nan.view(), &b, n, &c_dev.download(gpu).unwrap());
    a_dev.set_values(gpu, &values).unwrap();
    assert_eq!(a_dev.holds_non_finite(), Some(false));
    // No entries: no values to set, and none taken.
    let empty = from_triplets(5, 7, &[]);
    let mut empty_dev = DeviceCsr::upload(gpu, empty.view()).unwrap();
    empty_dev.set_values(gpu, &[]).unwrap();
    let len = empty_dev.update_values(gpu, |values| Ok::<_, Error>(values.len())).unwrap();
    assert_eq!(len, 0, "no values to write in place");
    assert!(matches!(empty_dev.set_values(gpu, &[1.0]), Err(Error::InvalidCsr(CsrError::ValuesLength { .. }))));
}

/// The tensor-core blocks built on the device (cuda/spmm/tc_build.cuh) hold the same bits as the host's build, in
/// every layout and type: slot columns, masks, starts, values, window heads, busy and empty windows. Shapes: m and
/// k not multiples of 64 or 32, an empty 64-row window and part of the next, one dense row, power-law and
/// block-sparse rows, a column past 2^16, nnz = 0, m = 1, k = 1, a NaN, an Inf and a -0 among the values, and A
/// as wide as the device build takes (the last column stored). One column more is built on the host: its products
/// are checked against the oracle. Small enough for compute-sanitizer (run-all.sh --sanitize).
#[test]
fn sanitizer_blocks_built_on_the_device_equal_the_host_build() {
    let Some(gpu) = gpu_or_skip("sanitizer_blocks_built_on_the_device_equal_the_host_build") else { return };
    use tilesparse::spmm::tensor_core::{compare_block_builds, DEVICE_BUILD_MAX_COLUMNS};
    let widest = DEVICE_BUILD_MAX_COLUMNS;
    let special: Vec<(usize, usize, f32)> =
        vec![(0, 3, f32::NAN), (0, 70_000, f32::INFINITY), (5, 0, -0.0), (17, 69_999, -1.5), (17, 70_001, 2.0)];
    let wide: Vec<(usize, usize, f32)> = gen::uniform_random_nnz(70, 4096, 900, seed(981))
        .iter()
        .map(|(&v, (r, c))| (r, c * (widest / 4096), v))
        .chain([(0, widest - 1, 1.0), (69, widest - 1, -2.0), (69, 1, 3.0)])
        .collect();
    let cases: Vec<(&str, CsMat<f32>)> = vec![
        ("uniform 1000 x 700, 5%", gen::uniform_random(1000, 700, 0.05, seed(982))),
        ("holes and a dense row, 600 x 300", holes_and_a_dense_row(seed(980))),
        ("power-law 3000 x 2000", gen::power_law(3000, 2000, 24.0, 1.6, seed(983))),
        ("blocks 32 x 32, 512 x 544", gen::block_sparse(512, 544, 32, 32, 0.2, seed(984))),
        ("NaN, Inf, -0, 40 x 70 003", from_triplets(40, 70_003, &special)),
        ("nnz = 0, 100 x 50", from_triplets(100, 50, &[])),
        ("m = 1, 1 x 300", gen::uniform_random(1, 300, 0.5, seed(985))),
        ("k = 1, 130 x 1", gen::uniform_random(130, 1, 0.5, seed(986))),
        ("the widest, 70 x DEVICE_BUILD_MAX_COLUMNS", from_triplets(70, widest, &wide)),
    ];
    fn compare<T: Scalar>(gpu: &Gpu, what: &str, a: &CsMat<f32>) {
        let a_dev = DeviceCsr::upload(gpu, gen::convert::<T>(a).view()).unwrap();
        let differences = compare_block_builds(gpu, &a_dev).unwrap_or_else(|e| panic!("{what} {}: {e}", T::DTYPE));
        assert!(differences.is_empty(), "{what} {}: {differences:#?}", T::DTYPE);
    }
    for (what, a) in &cases {
        compare::<f32>(&gpu, what, a);
        compare::<f16>(&gpu, what, a);
        compare::<bf16>(&gpu, what, a);
    }
    // One column past: the host builds (the comparison says why it cannot), and every kernel is right on it.
    let past: Vec<(usize, usize, f32)> = wide.iter().map(|&(r, c, v)| (r, c + 1, v)).collect();
    let past = from_triplets(70, widest + 1, &past);
    let a_dev = DeviceCsr::upload(&gpu, gen::convert::<f16>(&past).view()).unwrap();
    assert!(matches!(compare_block_builds(&gpu, &a_dev), Err(Error::Unsupported { .. })));
    assert!(check_tensor_core::<f16>(&gpu, "host build, one column past", &past, 8, seed(987)) > 0);
    assert!(check_tensor_core::<f32>(&gpu, "host build, one column past", &past, 8, seed(988)) > 0);
}

/// `spmm_tune` with `values_change` (each tensor-core candidate timed with the rewrite of its blocks an update
/// costs): C holds the chosen kernel's product, no tensor-core candidate is skipped, and the rewrites left every
/// layout's blocks as they were: each tensor-core kernel gives the bits it gave before the tuning. Then, only the
/// chosen kernel's blocks kept (`keep_tensor_core_blocks_of`), new values reach it and every tensor-core kernel.
/// f32 and f16, 600 x 300 with an empty window and a dense row, n = 72.
#[test]
fn tuned_for_changing_values_leaves_the_blocks_as_they_were() {
    let Some(gpu) = gpu_or_skip("tuned_for_changing_values_leaves_the_blocks_as_they_were") else { return };
    tuned_for_changing_values_case::<f32>(&gpu);
    tuned_for_changing_values_case::<f16>(&gpu);
}

fn tuned_for_changing_values_case<T: Scalar>(gpu: &Gpu) {
    let (k, n) = (300, 72);
    let structure = holes_and_a_dense_row(seed(990));
    let (oracle, mut a_dev, b_dev, mut c_dev) = upload_problem::<T>(gpu, &structure, n, seed(991));
    let tensor_cores: Vec<SpmmKernel> =
        tensor_cores_here(gpu, T::DTYPE).into_iter().map(SpmmKernel::TensorCore).collect();
    assert!(!tensor_cores.is_empty(), "{}: no tensor-core kernel runs here", T::DTYPE);
    let run =
        |a: &DeviceCsr<T>, kernel: &SpmmKernel, c_dev: &mut DeviceDense<T>| run_poisoned(gpu, a, &b_dev, c_dev, kernel);
    let before: Vec<Vec<T>> = tensor_cores.iter().map(|kernel| run(&a_dev, kernel, &mut c_dev)).collect();
    let opts = TuneOptions { values_change: true, ..TuneOptions::default() };
    c_dev.fill(gpu, T::from_f64(POISON)).unwrap();
    let t = spmm_tune(gpu, &a_dev, &b_dev, &mut c_dev, &opts).unwrap();
    let what = format!("{}, tuned for changing values ({})", T::DTYPE, t.kernel);
    oracle.check_kernel(&what, &c_dev.download(gpu).unwrap(), &t.kernel);
    assert!(
        t.skipped.iter().all(|(kernel, _)| !matches!(kernel, SpmmKernel::TensorCore(_))),
        "{what}: {:?}",
        t.skipped
    );
    for (kernel, expected) in tensor_cores.iter().zip(&before) {
        assert!(same_bits(&run(&a_dev, kernel, &mut c_dev), expected), "{what}: {kernel} changed by the tuning");
    }
    // Only the chosen kernel's blocks kept, then new values: the chosen kernel and every other (their blocks built
    // again, from the new values) are right.
    a_dev.keep_tensor_core_blocks_of(&t.kernel);
    let new: CsMat<T> = with_new_values(&structure, seed(992));
    a_dev.set_values(gpu, new.data()).unwrap();
    let b: Vec<T> = dense::<T>(k, n, seed(991));
    let new_oracle = SpmmOracle::new(new.view(), &b, n);
    for kernel in std::iter::once(&t.kernel).chain(&tensor_cores) {
        let got = run(&a_dev, kernel, &mut c_dev);
        new_oracle.check_kernel(&format!("{what}, new values, {kernel}"), &got, kernel);
    }
}

/// C = A^T B through [`DeviceCsr::transpose`] in f32, f16 and bf16, and the transpose itself in f64: on A with holes
/// and a dense row, rectangular shapes both ways, m = 1 and k = 1 (A^T of one column, of one row), nnz = 0 (which the
/// host transposes), and a power law. A^T's arrays must be sprs's transpose's,
/// bit for bit; every tensor-core kernel this device runs, the automatic choice and a tile must match the oracle
/// of sprs's A^T at an odd and an even n, on a poisoned C. Then new values for A (from the host, then written in
/// place, one of them NaN) reach A^T through `CsrTranspose::refresh`, blocks included: the same bits as a fresh
/// transposition, and the NaN in C. A refresh from another matrix is `PatternMismatch`; another handle's matrix
/// `WrongGpu`. In f32, cuSPARSE's baselines too: its CSR to CSC conversion gives the same arrays, and its SpMM with
/// A transposed matches the oracle (each algorithm that takes it; at least one must).
#[test]
fn sanitizer_transposed_products_match_the_oracle() {
    let Some(gpu) = gpu_or_skip("sanitizer_transposed_products_match_the_oracle") else { return };
    let cases = [
        ("holes and a dense row", holes_and_a_dense_row(seed(1100))),
        ("37 x 1000", gen::uniform_random(37, 1000, 0.05, seed(1101))),
        ("1000 x 37", gen::uniform_random(1000, 37, 0.2, seed(1102))),
        ("m = 1", gen::uniform_random(1, 500, 0.3, seed(1103))),
        ("k = 1", gen::uniform_random(500, 1, 0.3, seed(1104))),
        ("nnz = 0", CsMat::zero((20, 30))),
        ("power law", gen::power_law(4000, 6000, 20.0, 1.5, seed(1105))),
    ];
    for (name, a) in &cases {
        let runs = transposed_case::<f32>(&gpu, name, a) + transposed_case::<f16>(&gpu, name, a);
        let runs = runs + transposed_case::<bf16>(&gpu, name, a);
        assert!(runs > 0, "{name}");
        transposed_arrays_match::<f64>(&gpu, name, &gen::convert(a));
    }
    transposed_errors(&gpu);
    transposed_cusparse_baselines(&gpu, &cases[0].1);
}

/// The transposition and its refresh alone, no product (so that compute-sanitizer's racecheck, slow on the products'
/// kernels, covers the transposition's and the gather's kernels quickly): in f16, f32 and f64 (the gather's 2-, 4-
/// and 8-byte forms), A^T's arrays against sprs's, after the transposition and after new values, on a 600 x 300 A
/// with holes and a dense row and on 3000 x 50 (on the device), and on 300 x 400,000 at 0.1% (on the host).
#[test]
fn sanitizer_transpose_and_refresh_alone() {
    let Some(gpu) = gpu_or_skip("sanitizer_transpose_and_refresh_alone") else { return };
    fn case<T: Scalar>(gpu: &Gpu, name: &str, a32: &CsMat<f32>) {
        let a: CsMat<T> = gen::convert(a32);
        let mut a_dev = DeviceCsr::upload(gpu, a.view()).unwrap();
        let mut at = a_dev.transpose(gpu).unwrap();
        assert_transpose_of(gpu, &format!("{name}, {}", T::DTYPE), at.matrix(), &a);
        let new: CsMat<T> = with_new_values(a32, seed(1140));
        a_dev.set_values(gpu, new.data()).unwrap();
        at.refresh(gpu, &a_dev).unwrap();
        assert_transpose_of(gpu, &format!("{name}, {}, new values", T::DTYPE), at.matrix(), &new);
    }
    for (name, a) in [
        ("holes and a dense row", holes_and_a_dense_row(seed(1141))),
        ("3000 x 50", gen::uniform_random(3000, 50, 0.5, seed(1142))),
        // Very wide and very sparse: transposed on the host (`device_parts`), in parts on all cores.
        ("300 x 400000", gen::uniform_random(300, 400_000, 0.001, seed(1143))),
    ] {
        case::<f16>(&gpu, name, &a);
        case::<f32>(&gpu, name, &a);
        case::<f64>(&gpu, name, &a);
    }
}

/// `DeviceCsr::transposed`, the transpose kept with A: made once (the same A^T on a second call), then every way of
/// changing A's values reaches it with no call of its own: from the host (one round with a NaN, which
/// `holds_non_finite` reports), from a device buffer, and written in place. After each, A^T's arrays must be sprs's
/// transpose of the new values, and every tensor-core kernel here and a tile on it must match the oracle and a fresh
/// transposition's bits (its blocks rewritten). `forget_transposed` frees it and the next call makes it again;
/// `keep_transposed_tensor_core_blocks_of` keeps one layout, which later updates still reach.
#[test]
fn sanitizer_transposed_follows_every_update() {
    let Some(gpu) = gpu_or_skip("sanitizer_transposed_follows_every_update") else { return };
    fn case<T: Scalar>(gpu: &Gpu) {
        let structure = holes_and_a_dense_row(seed(1150));
        let (m, k, n) = (structure.rows(), structure.cols(), 40);
        let first: CsMat<T> = with_new_values(&structure, seed(1151));
        let mut a_dev = DeviceCsr::upload(gpu, first.view()).unwrap();
        let made = a_dev.transposed(gpu).unwrap() as *const DeviceCsr<T>;
        assert_eq!(made, a_dev.transposed(gpu).unwrap() as *const _, "made once");
        assert_transpose_of(gpu, &format!("{} made", T::DTYPE), a_dev.transposed(gpu).unwrap(), &first);
        let b = dense::<T>(m, n, seed(1152));
        let b_dev = DeviceDense::upload(gpu, m, n, &b).unwrap();
        let mut c_dev = DeviceDense::<T>::zeros(gpu, k, n).unwrap();
        let kernels = tensor_cores_and_a_tile::<T>(gpu, (k, m, n), structure.nnz());
        let mut run = |at: &DeviceCsr<T>, kernel: &SpmmKernel| run_poisoned(gpu, at, &b_dev, &mut c_dev, kernel);
        // Every layout built from the first values.
        for kernel in &kernels {
            run(a_dev.transposed(gpu).unwrap(), kernel);
        }
        for round in 0..4u64 {
            let mut new: CsMat<T> = with_new_values(&structure, seed(1153 + round));
            if round == 3 {
                new.data_mut()[17] = T::from_f32(f32::NAN);
            }
            match round {
                1 => {
                    let values = gpu.stream().clone_htod(new.data()).unwrap();
                    a_dev.set_values_from_device(gpu, &values).unwrap();
                }
                2 => a_dev
                    .update_values(gpu, |values| {
                        let write = gpu.stream().memcpy_htod(new.data(), values);
                        write.map_err(|source| Error::Driver { what: "the test's write", source })
                    })
                    .unwrap(),
                _ => a_dev.set_values(gpu, new.data()).unwrap(),
            }
            let what = format!("{} round {round}", T::DTYPE);
            let at = a_dev.transposed(gpu).unwrap();
            assert_eq!(at as *const _, made, "{what}: A^T made again");
            assert_transpose_of(gpu, &what, at, &new);
            assert_eq!(at.holds_non_finite(), a_dev.holds_non_finite(), "{what}");
            // Known where the values were on the host (rounds 0 and 3), as for A.
            let known = match round {
                1 | 2 => None,
                _ => Some(round == 3),
            };
            assert_eq!(at.holds_non_finite(), known, "{what}");
            let fresh = DeviceCsr::upload(gpu, new.view()).unwrap().transpose(gpu).unwrap();
            let oracle = SpmmOracle::new(sprs_transpose(&new).view(), &b, n);
            for kernel in &kernels {
                let got = run(a_dev.transposed(gpu).unwrap(), kernel);
                oracle.check_kernel(&format!("{what}, {kernel}"), &got, kernel);
                assert!(
                    same_bits(&got, &run(fresh.matrix(), kernel)),
                    "{what}, {kernel}: not a fresh transpose's bits"
                );
            }
        }
        // Kept to one layout, then freed and made again.
        let kept = kernels[0];
        a_dev.keep_transposed_tensor_core_blocks_of(&kept);
        let last: CsMat<T> = with_new_values(&structure, seed(1160));
        a_dev.set_values(gpu, last.data()).unwrap();
        let oracle = SpmmOracle::new(sprs_transpose(&last).view(), &b, n);
        oracle.check_kernel(&format!("{} kept {kept}", T::DTYPE), &run(a_dev.transposed(gpu).unwrap(), &kept), &kept);
        a_dev.forget_transposed();
        assert_transpose_of(gpu, &format!("{} made again", T::DTYPE), a_dev.transposed(gpu).unwrap(), &last);
    }
    case::<f32>(&gpu);
    case::<f16>(&gpu);
}

/// sprs's transpose of `a` (an independent reference) in CSR.
fn sprs_transpose<T: Scalar>(a: &CsMat<T>) -> CsMat<T> {
    a.transpose_view().to_csr()
}

/// Asserts that A^T's arrays on the device are those of sprs's transpose of `a`, values bit for bit.
fn assert_transpose_of<T: Scalar>(gpu: &Gpu, what: &str, at: &DeviceCsr<T>, a: &CsMat<T>) {
    let want = sprs_transpose(a);
    let got = at.download(gpu).unwrap();
    assert_eq!((got.rows(), got.cols()), (a.cols(), a.rows()), "{what}: shape");
    assert_eq!(got.indptr().to_proper(), want.indptr().to_proper(), "{what}: row pointer");
    assert_eq!(got.indices(), want.indices(), "{what}: column indices");
    assert!(same_bits(got.data(), want.data()), "{what}: values");
}

/// The transpose of `a` uploaded in T: its arrays against sprs's.
fn transposed_arrays_match<T: Scalar>(gpu: &Gpu, name: &str, a: &CsMat<T>) {
    let a_dev = DeviceCsr::upload(gpu, a.view()).unwrap();
    let at = a_dev.transpose(gpu).unwrap();
    assert_transpose_of(gpu, &format!("{name}, {}", T::DTYPE), at.matrix(), a);
    assert_eq!(at.matrix().holds_non_finite(), a_dev.holds_non_finite());
}

/// [`sanitizer_transposed_products_match_the_oracle`]'s products for T on A; returns how many it checked.
fn transposed_case<T: Scalar>(gpu: &Gpu, name: &str, a32: &CsMat<f32>) -> usize {
    let a: CsMat<T> = gen::convert(a32);
    let (m, k) = (a.rows(), a.cols());
    let mut a_dev = DeviceCsr::upload(gpu, a.view()).unwrap();
    let mut at = a_dev.transpose(gpu).unwrap();
    assert_transpose_of(gpu, &format!("{name}, {}", T::DTYPE), at.matrix(), &a);
    let mut runs = 0;
    for n in [33, 64] {
        // C (k x n) = A^T (k x m) B (m x n).
        let b = dense::<T>(m, n, seed(1110 + n as u64));
        let b_dev = DeviceDense::upload(gpu, m, n, &b).unwrap();
        let mut c_dev = DeviceDense::<T>::zeros(gpu, k, n).unwrap();
        let kernels = tensor_cores_and_a_tile::<T>(gpu, (k, m, n), a.nnz());
        let mut run = |at: &DeviceCsr<T>, kernel: Option<&SpmmKernel>| {
            c_dev.fill(gpu, T::from_f64(POISON)).unwrap();
            let used = match kernel {
                Some(kernel) => spmm_kernel(gpu, at, &b_dev, &mut c_dev, kernel).map(|_| *kernel),
                None => spmm_auto(gpu, at, &b_dev, &mut c_dev),
            };
            let used = used.unwrap_or_else(|e| panic!("{name}, {}, n = {n}: {e}", T::DTYPE));
            (c_dev.download(gpu).unwrap(), used)
        };
        let oracle = SpmmOracle::new(sprs_transpose(&a).view(), &b, n);
        for kernel in kernels.iter().map(Some).chain([None]) {
            let (got, used) = run(at.matrix(), kernel);
            oracle.check_kernel(&format!("A^T of {name}, {}, n = {n}, {used}", T::DTYPE), &got, &used);
            runs += 1;
        }
        if n != 64 {
            continue;
        }
        // New values, each round from the host or written in place; the third round holds a NaN.
        for round in 0..3u64 {
            let mut new: CsMat<T> = with_new_values(a32, seed(1120 + round));
            if round == 2 && new.nnz() > 0 {
                let last = new.nnz() - 1;
                new.data_mut()[last / 2] = T::from_f32(f32::NAN);
            }
            if round == 1 {
                a_dev
                    .update_values(gpu, |values| {
                        let write = gpu.stream().memcpy_htod(new.data(), values);
                        write.map_err(|source| Error::Driver { what: "the test's write", source })
                    })
                    .unwrap();
            } else {
                a_dev.set_values(gpu, new.data()).unwrap();
            }
            at.refresh(gpu, &a_dev).unwrap();
            let what = format!("A^T of {name}, {}, round {round}", T::DTYPE);
            assert_transpose_of(gpu, &what, at.matrix(), &new);
            assert_eq!(at.matrix().holds_non_finite(), a_dev.holds_non_finite(), "{what}");
            let fresh = a_dev.transpose(gpu).unwrap();
            let oracle = SpmmOracle::new(sprs_transpose(&new).view(), &b, n);
            for kernel in &kernels {
                let (got, _) = run(at.matrix(), Some(kernel));
                let what = format!("{what}, {kernel}");
                oracle.check_kernel(&what, &got, kernel);
                let (expected, _) = run(fresh.matrix(), Some(kernel));
                assert!(same_bits(&got, &expected), "{what}: other bits than a fresh transposition");
                if round == 2 && new.nnz() > 0 {
                    assert!(got.iter().any(|v| v.to_f64().is_nan()), "{what}: the NaN is lost");
                }
                runs += 1;
            }
        }
    }
    runs
}

/// The transposition's typed errors: a refresh from another matrix (even of the same structure and values), and
/// another handle's matrix or transpose.
fn transposed_errors(gpu: &Gpu) {
    let a = gen::uniform_random(40, 30, 0.2, seed(1130));
    let a_dev = DeviceCsr::upload(gpu, a.view()).unwrap();
    let mut at = a_dev.transpose(gpu).unwrap();
    let twin = DeviceCsr::upload(gpu, a.view()).unwrap();
    let r = at.refresh(gpu, &twin);
    assert!(matches!(r, Err(Error::PatternMismatch(_))), "{r:?}");
    let other = Gpu::new(0).unwrap();
    assert!(matches!(a_dev.transpose(&other).map(drop), Err(Error::WrongGpu(_))));
    assert!(matches!(at.refresh(&other, &a_dev), Err(Error::WrongGpu(_))));
    let theirs = DeviceCsr::upload(&other, a.view()).unwrap();
    assert!(matches!(at.refresh(gpu, &theirs), Err(Error::WrongGpu(_))));
    // After the errors it still refreshes from its own matrix.
    at.refresh(gpu, &a_dev).unwrap();
    assert_transpose_of(gpu, "after the errors", at.matrix(), &a);
}

/// cuSPARSE's CSR to CSC conversion and its SpMM with A transposed, against sprs and the oracle.
fn transposed_cusparse_baselines(gpu: &Gpu, a: &CsMat<f32>) {
    use tilesparse::baseline::cusparse::{Cusparse, CusparseCsr2Csc, CusparseSpmm, SpmmAlg};
    let lib = Cusparse::new(gpu).unwrap();
    let a_dev = DeviceCsr::upload(gpu, a.view()).unwrap();
    let mut conversion = CusparseCsr2Csc::new(gpu, &lib, &a_dev).unwrap();
    conversion.run(gpu).unwrap();
    let (ptr, ind, values) = conversion.download(gpu).unwrap();
    let want = sprs_transpose(a);
    let ptr: Vec<usize> = ptr.iter().map(|&x| x as usize).collect();
    let ind: Vec<usize> = ind.iter().map(|&x| x as usize).collect();
    assert_eq!((&ptr[..], &ind[..]), (&want.indptr().to_proper()[..], want.indices()), "csr2csc");
    assert!(same_bits(&values, want.data()), "csr2csc values");
    let (m, k, n) = (a.rows(), a.cols(), 48);
    let b = dense::<f32>(m, n, seed(1131));
    let oracle = SpmmOracle::new(want.view(), &b, n);
    let b_dev = DeviceDense::upload(gpu, m, n, &b).unwrap();
    let mut c_dev = DeviceDense::<f32>::zeros(gpu, k, n).unwrap();
    let mut ran = 0;
    for alg in SpmmAlg::ALL {
        c_dev.fill(gpu, POISON as f32).unwrap();
        match CusparseSpmm::new_transposed(gpu, &lib, &a_dev, &b_dev, &mut c_dev, alg).and_then(|mut op| op.run(gpu)) {
            Ok(()) => {
                oracle.check(&format!("cuSPARSE {} with A transposed", alg.name()), &c_dev.download(gpu).unwrap());
                ran += 1;
            }
            Err(Error::Cusparse { .. }) => eprintln!("cuSPARSE {} does not take A transposed", alg.name()),
            Err(e) => panic!("{}: {e}", alg.name()),
        }
    }
    assert!(ran > 0, "no cuSPARSE algorithm took A transposed");
    let mut wrong = DeviceDense::<f32>::zeros(gpu, m, n).unwrap();
    let r = CusparseSpmm::new_transposed(gpu, &lib, &a_dev, &b_dev, &mut wrong, SpmmAlg::CsrAlg1).map(drop);
    assert!(matches!(r, Err(Error::ShapeMismatch(_))), "{r:?}");
}

/// The row-major `cols x rows` transpose of a row-major `rows x cols` matrix on the host: a column-major matrix's
/// storage, and back.
fn host_transpose<T: Copy>(x: &[T], rows: usize, cols: usize) -> Vec<T> {
    assert_eq!(x.len(), rows * cols);
    (0..cols).flat_map(|j| (0..rows).map(move |i| x[i * cols + j])).collect()
}

/// `DeviceDense::transpose_into` alone (so that racecheck covers its kernels quickly): in f16, f32 and f64 (their
/// 2-, 4- and 8-byte forms), on shapes for the narrow kernel (small or odd: one row, one column, empty ones) and
/// the wide one (large, partial tiles), each type running both, and on each a matrix of more than 65535 row tiles
/// (walked from a capped grid); every element's bits against the host's transpose, into a poisoned matrix, with a
/// NaN among them. And its typed error.
#[test]
fn sanitizer_dense_transpose_alone() {
    let Some(gpu) = gpu_or_skip("sanitizer_dense_transpose_alone") else { return };
    fn case<T: Scalar>(gpu: &Gpu, rows: usize, cols: usize) {
        let mut x = dense::<T>(rows, cols, seed(1200 + (rows * 7 + cols) as u64));
        if let Some(v) = x.get_mut(rows * cols / 2) {
            *v = T::from_f32(f32::NAN);
        }
        let x_dev = DeviceDense::upload(gpu, rows, cols, &x).unwrap();
        let mut out = DeviceDense::<T>::zeros(gpu, cols, rows).unwrap();
        out.fill(gpu, T::from_f64(POISON)).unwrap();
        x_dev.transpose_into(gpu, &mut out).unwrap();
        let what = format!("{rows} x {cols}, {}", T::DTYPE);
        assert!(same_bits(&out.download(gpu).unwrap(), &host_transpose(&x, rows, cols)), "{what}");
        let made = x_dev.transpose(gpu).unwrap();
        assert_eq!((made.rows(), made.cols()), (cols, rows), "{what}");
        let back = made.transpose(gpu).unwrap().download(gpu).unwrap();
        assert!(same_bits(&back, &x), "{what}: transposed twice");
    }
    // Small or odd shapes go to the narrow kernel; large ones whose sides are multiples of 4 (f16) or 2 (f32, f64)
    // to the wide one, with partial tiles (1000 x 600, 2048 x 1028, 1028 x 2048).
    let shapes = [(1, 1), (1, 77), (77, 1), (33, 65), (64, 32), (300, 1000), (1000, 300), (1000, 600), (2048, 1028)];
    let mut wide = [0usize; 3];
    for (rows, cols) in shapes.into_iter().chain([(1028, 2048), (2050, 1), (0, 5), (5, 0)]) {
        case::<f16>(&gpu, rows, cols);
        case::<f32>(&gpu, rows, cols);
        case::<f64>(&gpu, rows, cols);
        wide[0] += usize::from(tilesparse::dense::transposes_in_wide_tiles::<f16>(&gpu, rows, cols));
        wide[1] += usize::from(tilesparse::dense::transposes_in_wide_tiles::<f32>(&gpu, rows, cols));
        wide[2] += usize::from(tilesparse::dense::transposes_in_wide_tiles::<f64>(&gpu, rows, cols));
    }
    assert!(wide.iter().all(|w| (2..=11).contains(w)), "each kernel runs for each type: {wide:?} wide of 13");
    // More row tiles than the grid's height (65535 tiles), on each kernel.
    let (narrow_tall, wide_tall) = ((65_536 * 32 + 5, 3), (65_536 * 64 + 2, 2));
    assert!(!tilesparse::dense::transposes_in_wide_tiles::<f32>(&gpu, narrow_tall.0, narrow_tall.1));
    assert!(tilesparse::dense::transposes_in_wide_tiles::<f32>(&gpu, wide_tall.0, wide_tall.1));
    case::<f32>(&gpu, narrow_tall.0, narrow_tall.1);
    case::<f32>(&gpu, wide_tall.0, wide_tall.1);
    let x = DeviceDense::<f32>::zeros(&gpu, 4, 6).unwrap();
    let mut wrong = DeviceDense::<f32>::zeros(&gpu, 4, 6).unwrap();
    let r = x.transpose_into(&gpu, &mut wrong);
    assert!(matches!(r, Err(Error::ShapeMismatch(_))), "{r:?}");
}

/// `spmm_layouts`: C = A * B with B and C each row-major or column-major, on seven shapes (holes and a dense row,
/// rectangular both ways, m = 1, k = 1, nnz = 0, a power law) in f32, f16 and bf16 at n = 33 and 64, by every
/// tensor-core kernel here, a tile and the automatic choice, plain, scaled (beta reading a random C, stored in C's
/// layout) and with bias + ReLU. Each result, read back in its layout, must match the oracle and hold the bits of the
/// row-major product on the same values; C is poisoned first. One round puts a NaN in B, which must reach C.
#[test]
fn sanitizer_dense_layouts_match_the_oracle() {
    let Some(gpu) = gpu_or_skip("sanitizer_dense_layouts_match_the_oracle") else { return };
    let cases = [
        ("holes and a dense row", holes_and_a_dense_row(seed(1210))),
        ("37 x 1000", gen::uniform_random(37, 1000, 0.05, seed(1211))),
        ("1000 x 37", gen::uniform_random(1000, 37, 0.2, seed(1212))),
        ("m = 1", gen::uniform_random(1, 500, 0.3, seed(1213))),
        ("k = 1", gen::uniform_random(500, 1, 0.3, seed(1214))),
        ("nnz = 0", CsMat::zero((20, 30))),
        ("power law", gen::power_law(3000, 2000, 12.0, 1.5, seed(1215))),
    ];
    for (name, a) in &cases {
        let runs = layouts_case::<f32>(&gpu, name, a) + layouts_case::<f16>(&gpu, name, a);
        assert!(layouts_case::<bf16>(&gpu, name, a) + runs > 0, "{name}");
    }
    layouts_errors(&gpu);
    layouts_cusparse_baselines(&gpu, &cases[0].1);
}

/// The four combinations of B's and C's layouts.
const LAYOUTS: [tilesparse::DenseLayouts; 4] = {
    use tilesparse::Layout::{ColMajor, RowMajor};
    [
        tilesparse::DenseLayouts { b: RowMajor, c: RowMajor },
        tilesparse::DenseLayouts { b: ColMajor, c: RowMajor },
        tilesparse::DenseLayouts { b: RowMajor, c: ColMajor },
        tilesparse::DenseLayouts { b: ColMajor, c: ColMajor },
    ]
};

/// A row-major `rows x cols` matrix stored in `layout` on the device.
fn upload_in<T: Scalar>(gpu: &Gpu, x: &[T], rows: usize, cols: usize, layout: tilesparse::Layout) -> DeviceDense<T> {
    match layout {
        tilesparse::Layout::RowMajor => DeviceDense::upload(gpu, rows, cols, x).unwrap(),
        tilesparse::Layout::ColMajor => DeviceDense::upload(gpu, cols, rows, &host_transpose(x, rows, cols)).unwrap(),
    }
}

/// A matrix stored in `layout` read back row-major (`rows x cols` as the product has it).
fn download_from<T: Scalar>(gpu: &Gpu, d: &DeviceDense<T>, layout: tilesparse::Layout) -> Vec<T> {
    let x = d.download(gpu).unwrap();
    match layout {
        tilesparse::Layout::RowMajor => x,
        tilesparse::Layout::ColMajor => host_transpose(&x, d.rows(), d.cols()),
    }
}

fn layouts_case<T: Scalar>(gpu: &Gpu, name: &str, a32: &CsMat<f32>) -> usize {
    use tilesparse::spmm_layouts;
    let a: CsMat<T> = gen::convert(a32);
    let (m, k) = (a.rows(), a.cols());
    let a_dev = DeviceCsr::upload(gpu, a.view()).unwrap();
    let bias: Vec<f32> = gen::dense_matrix(m, 1, seed(1216));
    let bias_dev = tilesparse::spmm::upload_bias(gpu, &bias).unwrap();
    let mut runs = 0;
    for n in [33, 64] {
        let mut b = dense::<T>(k, n, seed(1217 + n as u64));
        if n == 64 && a.nnz() > 0 {
            // A NaN in the row of B that A's first entry reads.
            let (_, (_, col)) = a.iter().next().unwrap();
            b[col * n + 5] = T::from_f32(f32::NAN);
        }
        let c0 = dense::<T>(m, n, seed(1218 + n as u64));
        let plain = SpmmOracle::new(a.view(), &b, n);
        let b_rows = DeviceDense::upload(gpu, k, n, &b).unwrap();
        let epilogues = [
            ("plain", SpmmEpilogue::default(), plain.epilogue::<T>(1.0, 0.0, &c0, None, n)),
            ("scaled", SpmmEpilogue::scaled(0.5, -1.5), plain.epilogue::<T>(0.5, -1.5, &c0, None, n)),
            ("bias + ReLU", SpmmEpilogue::bias_relu(&bias_dev), plain.bias_relu::<T>(&bias, n)),
        ];
        let kernels = tensor_cores_and_a_tile::<T>(gpu, (m, k, n), a.nnz());
        for kernel in kernels.iter().map(Some).chain([None]) {
            for (label, epilogue, oracle) in &epilogues {
                // The row-major product on the same values, C starting from c0.
                let mut c_rows = DeviceDense::upload(gpu, m, n, &c0).unwrap();
                let used = match kernel {
                    Some(kernel) => {
                        spmm_kernel_with(gpu, &a_dev, &b_rows, &mut c_rows, kernel, *epilogue).map(|_| *kernel)
                    }
                    None => tilesparse::spmm_auto_with(gpu, &a_dev, &b_rows, &mut c_rows, *epilogue),
                };
                let used = used.unwrap_or_else(|e| panic!("{name}, {}, n = {n}: {e}", T::DTYPE));
                let want = c_rows.download(gpu).unwrap();
                for layouts in LAYOUTS {
                    let what = format!("{name}, {}, n = {n}, {used}, {label}, {layouts:?}", T::DTYPE);
                    let b_dev = upload_in(gpu, &b, k, n, layouts.b);
                    let mut c_dev = upload_in(gpu, &c0, m, n, layouts.c);
                    if !epilogue.reads_c() {
                        c_dev.fill(gpu, T::from_f64(POISON)).unwrap();
                    }
                    let ran = spmm_layouts(gpu, &a_dev, &b_dev, &mut c_dev, layouts, kernel, *epilogue)
                        .unwrap_or_else(|e| panic!("{what}: {e}"));
                    assert_eq!(ran, used, "{what}: the kernel");
                    let got = download_from(gpu, &c_dev, layouts.c);
                    oracle.check_kernel(&what, &got, &used);
                    assert!(same_bits(&got, &want), "{what}: other bits than the row-major product");
                    if n == 64 && a.nnz() > 0 && *label == "plain" {
                        assert!(got.iter().any(|v| v.to_f64().is_nan()), "{what}: B's NaN is lost");
                    }
                    runs += 1;
                }
            }
        }
    }
    runs
}

/// `spmm_layouts`' typed errors: B or C held in the other layout's shape, a bias of the wrong length, a tile whose
/// dense vector width does not divide n; a failed call leaves a column-major C as it was.
fn layouts_errors(gpu: &Gpu) {
    use tilesparse::{spmm_layouts, DenseLayouts, Layout};
    let a = gen::uniform_random(40, 30, 0.2, seed(1220));
    let (m, k, n) = (40, 30, 18);
    let a_dev = DeviceCsr::upload(gpu, a.view()).unwrap();
    let b_rows = DeviceDense::<f32>::zeros(gpu, k, n).unwrap();
    let b_cols = DeviceDense::<f32>::zeros(gpu, n, k).unwrap();
    let mut c_rows = DeviceDense::<f32>::zeros(gpu, m, n).unwrap();
    let mut c_cols = DeviceDense::<f32>::zeros(gpu, n, m).unwrap();
    let none = SpmmEpilogue::default();
    let col_b = DenseLayouts { b: Layout::ColMajor, c: Layout::RowMajor };
    let r = spmm_layouts(gpu, &a_dev, &b_rows, &mut c_rows, col_b, None, none);
    assert!(matches!(r, Err(Error::ShapeMismatch(_))), "B row-major passed as column-major: {r:?}");
    let r = spmm_layouts(gpu, &a_dev, &b_cols, &mut c_rows, DenseLayouts::COL_MAJOR, None, none);
    assert!(matches!(r, Err(Error::ShapeMismatch(_))), "C row-major passed as column-major: {r:?}");
    let r = spmm_layouts(gpu, &a_dev, &b_cols, &mut c_cols, DenseLayouts::ROW_MAJOR, None, none);
    assert!(matches!(r, Err(Error::ShapeMismatch(_))), "column-major passed as row-major: {r:?}");
    let short = tilesparse::spmm::upload_bias(gpu, &[0.5; 39]).unwrap();
    let r =
        spmm_layouts(gpu, &a_dev, &b_cols, &mut c_cols, DenseLayouts::COL_MAJOR, None, SpmmEpilogue::bias_relu(&short));
    assert!(matches!(r, Err(Error::ShapeMismatch(_))), "bias: {r:?}");
    // n = 18 is not a multiple of 4: a tile of dense vector width 4 is refused, and C is left as it was.
    c_cols.fill(gpu, POISON as f32).unwrap();
    let tile = compiled_spmm_variants_for(DType::F32).into_iter().find(|c| c.dense_vector_width == 4).unwrap();
    let r =
        spmm_layouts(gpu, &a_dev, &b_cols, &mut c_cols, DenseLayouts::COL_MAJOR, Some(&SpmmKernel::Tiled(*tile)), none);
    assert!(r.is_err(), "{tile}: {r:?}");
    assert!(c_cols.download(gpu).unwrap().iter().all(|&v| v == POISON as f32), "{tile}: C changed by a failed call");
}

/// cuSPARSE's SpMM with B and C in each layout (`CusparseSpmm::new_with_layouts`) against the oracle; an algorithm
/// may refuse a layout (a cuSPARSE error), but one must take each.
fn layouts_cusparse_baselines(gpu: &Gpu, a: &CsMat<f32>) {
    use tilesparse::baseline::cusparse::{Cusparse, CusparseSpmm, SpmmAlg};
    let lib = Cusparse::new(gpu).unwrap();
    let a_dev = DeviceCsr::upload(gpu, a.view()).unwrap();
    let (m, k, n) = (a.rows(), a.cols(), 48);
    let b = dense::<f32>(k, n, seed(1230));
    let oracle = SpmmOracle::new(a.view(), &b, n);
    for layouts in LAYOUTS {
        let b_dev = upload_in(gpu, &b, k, n, layouts.b);
        let mut c_dev = upload_in(gpu, &vec![0.0f32; m * n], m, n, layouts.c);
        let mut ran = 0;
        for alg in SpmmAlg::ALL {
            c_dev.fill(gpu, POISON as f32).unwrap();
            let op = CusparseSpmm::new_with_layouts(gpu, &lib, &a_dev, &b_dev, &mut c_dev, alg, layouts);
            match op.and_then(|mut op| op.run(gpu)) {
                Ok(()) => {
                    let what = format!("cuSPARSE {}, {layouts:?}", alg.name());
                    oracle.check(&what, &download_from(gpu, &c_dev, layouts.c));
                    ran += 1;
                }
                Err(Error::Cusparse { .. }) => eprintln!("cuSPARSE {} does not take {layouts:?}", alg.name()),
                Err(e) => panic!("{}: {e}", alg.name()),
            }
        }
        assert!(ran > 0, "no cuSPARSE algorithm took {layouts:?}");
    }
    let b_rows = DeviceDense::<f32>::zeros(gpu, k, n).unwrap();
    let mut c = DeviceDense::<f32>::zeros(gpu, n, m).unwrap();
    let r = CusparseSpmm::new_with_layouts(gpu, &lib, &a_dev, &b_rows, &mut c, SpmmAlg::CsrAlg1, LAYOUTS[3]).map(drop);
    assert!(matches!(r, Err(Error::ShapeMismatch(_))), "{r:?}");
}

/// What one recorded product computes: C = A * B plain, scaled (beta reading C) or with bias + ReLU, A^T times B
/// (`DeviceCsr::transposed`), or with B and C column-major.
#[derive(Clone, Copy, Debug)]
enum RecordedForm {
    Plain,
    Scaled,
    BiasRelu,
    Transposed,
    ColMajor,
}

/// One recorded product: its form, its kernel (None: the automatic choice) and its C (row-major m x n; k x n for
/// A^T; n x m holding the column-major C).
struct RecordedJob<T: Scalar> {
    form: RecordedForm,
    kernel: Option<SpmmKernel>,
    c: DeviceDense<T>,
}

/// The inputs of a [`RecordedJob`] list: A's new values on the device, B (k x n), B of A^T's product (m x n), B
/// column-major (n x k) and the bias.
struct RecordedInputs<T: Scalar> {
    values: cudarc::driver::CudaSlice<T>,
    b: DeviceDense<T>,
    b_t: DeviceDense<T>,
    b_cols: DeviceDense<T>,
    bias: cudarc::driver::CudaSlice<f32>,
}

/// A training step's products on A: A's values from a device buffer (`set_values_from_device` in f32, a copy through
/// `update_values` in f16 and bf16), then every job. Returns the kernels that ran.
fn recorded_step<T: Scalar>(
    gpu: &Gpu,
    a: &mut DeviceCsr<T>,
    inputs: &RecordedInputs<T>,
    jobs: &mut [RecordedJob<T>],
) -> tilesparse::Result<Vec<SpmmKernel>> {
    use tilesparse::{spmm_auto_with, spmm_layouts, DenseLayouts};
    if T::DTYPE == DType::F32 {
        a.set_values_from_device(gpu, &inputs.values)?;
    } else {
        let nnz = a.nnz();
        a.update_values(gpu, |dst| {
            let copied = if nnz == 0 { Ok(()) } else { gpu.stream().memcpy_dtod(&inputs.values.slice(..nnz), dst) };
            copied.map_err(|source| Error::Driver { what: "copying new values", source })
        })?;
    }
    let mut used = Vec::new();
    for job in jobs.iter_mut() {
        let epilogue = match job.form {
            RecordedForm::Scaled => SpmmEpilogue::scaled(0.5, -1.5),
            RecordedForm::BiasRelu => SpmmEpilogue::bias_relu(&inputs.bias),
            _ => SpmmEpilogue::default(),
        };
        let c = &mut job.c;
        let kernel = match (job.form, &job.kernel) {
            (RecordedForm::Transposed, _) => spmm_auto_with(gpu, a.transposed(gpu)?, &inputs.b_t, c, epilogue)?,
            (RecordedForm::ColMajor, kernel) => {
                spmm_layouts(gpu, a, &inputs.b_cols, c, DenseLayouts::COL_MAJOR, kernel.as_ref(), epilogue)?
            }
            (_, Some(kernel)) => spmm_kernel_with(gpu, a, &inputs.b, c, kernel, epilogue).map(|_| *kernel)?,
            (_, None) => spmm_auto_with(gpu, a, &inputs.b, c, epilogue)?,
        };
        used.push(kernel);
    }
    Ok(used)
}

/// A training step recorded once (`Gpu::record`) and replayed over three rounds of new inputs written into the same
/// buffers: A's values (copied in by the recording itself, so the tensor-core blocks and A^T are rewritten in it),
/// B, and C where beta reads it. The products: every tensor-core kernel here and a tile, plain, scaled and with
/// bias and ReLU in turn; the automatic choice; the automatic choice on A^T; B and C column-major. Each replay's C must
/// match the oracle of that round's inputs, and the bits of the same step run eagerly; recording runs nothing; the
/// last round's NaN in B reaches C. Returns the products checked.
fn recorded_case<T: Scalar>(gpu: &Gpu, name: &str, a32: &CsMat<f32>, n: usize) -> usize {
    let mut a: CsMat<T> = gen::convert(a32);
    let (m, k) = (a.rows(), a.cols());
    let mut a_dev = DeviceCsr::upload(gpu, a.view()).unwrap();
    let bias: Vec<f32> = gen::dense_matrix(m, 1, seed(1300));
    let mut inputs = RecordedInputs {
        // The device holds no empty buffer: without entries, one unread element.
        values: gpu.stream().clone_htod(&[a.data(), &[T::default()]].concat()).unwrap(),
        b: DeviceDense::<T>::zeros(gpu, k, n).unwrap(),
        b_t: DeviceDense::<T>::zeros(gpu, m, n).unwrap(),
        b_cols: DeviceDense::<T>::zeros(gpu, n, k).unwrap(),
        bias: tilesparse::spmm::upload_bias(gpu, &bias).unwrap(),
    };
    let forms = [RecordedForm::Plain, RecordedForm::Scaled, RecordedForm::BiasRelu];
    let zeros = |rows, cols| DeviceDense::<T>::zeros(gpu, rows, cols).unwrap();
    let mut jobs: Vec<RecordedJob<T>> = tensor_cores_and_a_tile::<T>(gpu, (m, k, n), a.nnz())
        .into_iter()
        .enumerate()
        .map(|(i, kernel)| RecordedJob { form: forms[i % 3], kernel: Some(kernel), c: zeros(m, n) })
        .collect();
    jobs.push(RecordedJob { form: RecordedForm::Plain, kernel: None, c: zeros(m, n) });
    jobs.push(RecordedJob { form: RecordedForm::Transposed, kernel: None, c: zeros(k, n) });
    jobs.push(RecordedJob { form: RecordedForm::ColMajor, kernel: None, c: zeros(n, m) });
    // The first run builds what the products keep (the blocks, A^T, the statistics); recording it could not.
    let warm = recorded_step(gpu, &mut a_dev, &inputs, &mut jobs).unwrap_or_else(|e| panic!("{name}: {e}"));
    let c0 = dense::<T>(m, n, seed(1301));
    let prepare_c = |jobs: &mut [RecordedJob<T>]| {
        for job in jobs.iter_mut() {
            match job.form {
                RecordedForm::Scaled => job.c.overwrite(gpu, &c0).unwrap(),
                _ => job.c.fill(gpu, T::from_f64(POISON)).unwrap(),
            }
        }
    };
    prepare_c(&mut jobs);
    let (recording, used) = gpu.record(|g| recorded_step(g, &mut a_dev, &inputs, &mut jobs)).unwrap();
    assert_eq!(used, warm, "{name}: the recorded kernels");
    assert!(!gpu.is_recording().unwrap(), "{name}: still recording");
    let poison = T::from_f64(POISON).to_f64();
    for job in &jobs {
        if !matches!(job.form, RecordedForm::Scaled) {
            let c = job.c.download(gpu).unwrap();
            assert!(c.iter().all(|v| v.to_f64() == poison), "{name}: recording ran a product ({:?})", job.form);
        }
    }
    let mut checked = 0;
    for round in 0..3u64 {
        let values: Vec<T> = gen::dense_matrix(a.nnz(), 1, seed(1310 + round)).into_iter().map(T::from_f32).collect();
        a.data_mut().copy_from_slice(&values);
        let mut b = dense::<T>(k, n, seed(1320 + round));
        if round == 2 && a.nnz() > 0 {
            // A NaN in the row of B that A's first entry reads.
            let (_, (_, col)) = a.iter().next().unwrap();
            b[col * n + n / 2] = T::from_f32(f32::NAN);
        }
        let b_t = dense::<T>(m, n, seed(1330 + round));
        if a.nnz() > 0 {
            let mut dst = inputs.values.slice_mut(..a.nnz());
            gpu.stream().memcpy_htod(&values, &mut dst).unwrap();
        }
        inputs.b.overwrite(gpu, &b).unwrap();
        inputs.b_t.overwrite(gpu, &b_t).unwrap();
        inputs.b_cols.overwrite(gpu, &host_transpose(&b, k, n)).unwrap();
        prepare_c(&mut jobs);
        // SAFETY: every buffer the step used (A's arrays, its blocks and A^T, the inputs, each C) is alive and
        // unmoved: the recording is dropped at the end of this function, before any of them.
        unsafe { recording.replay(gpu) }.unwrap_or_else(|e| panic!("{name}: replay: {e}"));
        let replayed: Vec<Vec<T>> = jobs.iter().map(|j| j.c.download(gpu).unwrap()).collect();
        // The same step run eagerly on the same inputs: the replay must give its bits.
        prepare_c(&mut jobs);
        recorded_step(gpu, &mut a_dev, &inputs, &mut jobs).unwrap();
        let at: CsMat<T> = a.transpose_view().to_csr();
        let plain = SpmmOracle::new(a.view(), &b, n);
        let scaled = plain.epilogue::<T>(0.5, -1.5, &c0, None, n);
        let bias_relu = plain.bias_relu::<T>(&bias, n);
        let transposed = SpmmOracle::new(at.view(), &b_t, n);
        for ((job, got), kernel) in jobs.iter().zip(&replayed).zip(&used) {
            let what = format!("{name}, {}, n = {n}, round {round}, {kernel}, {:?}", T::DTYPE, job.form);
            let got = match job.form {
                RecordedForm::ColMajor => host_transpose(got, n, m),
                _ => got.clone(),
            };
            let oracle = match job.form {
                RecordedForm::Plain | RecordedForm::ColMajor => &plain,
                RecordedForm::Scaled => &scaled,
                RecordedForm::BiasRelu => &bias_relu,
                RecordedForm::Transposed => &transposed,
            };
            oracle.check_kernel(&what, &got, kernel);
            let eager = job.c.download(gpu).unwrap();
            let eager = match job.form {
                RecordedForm::ColMajor => host_transpose(&eager, n, m),
                _ => eager,
            };
            assert!(same_bits(&got, &eager), "{what}: other bits than the step run eagerly");
            if round == 2 && a.nnz() > 0 && matches!(job.form, RecordedForm::Plain | RecordedForm::ColMajor) {
                assert!(got.iter().any(|v| v.to_f64().is_nan()), "{what}: B's NaN is lost");
            }
            checked += 1;
        }
    }
    drop(recording);
    checked
}

/// `Gpu::record`'s refusals: what cannot be recorded is `Error::Recording` (a product's first use of the tensor-core
/// blocks, allocations that would outlive it, copies to and from the host, tuning, a nested recording), a closure's
/// own error comes back as it is, a panic inside ends the recording, and a replay on another handle is `WrongGpu`.
/// After each, the stream runs as before: the refused product then runs eagerly and matches the oracle.
fn recording_errors(gpu: &Gpu) {
    let a = gen::uniform_random(128, 96, 0.5, seed(1340));
    let (k, n) = (96, 32);
    let (oracle, mut a_dev, mut b_dev, mut c_dev) = upload_problem::<f16>(gpu, &a, n, seed(1341));
    let kernel = SpmmKernel::TensorCore(tensor_cores_here(gpu, DType::F16)[0]);
    let refused = |r: tilesparse::Result<()>, what: &str| {
        assert!(matches!(r, Err(Error::Recording(_))), "{what}: {r:?}");
        assert!(!gpu.is_recording().unwrap(), "{what}: the stream still records");
    };
    let r = gpu.record(|g| spmm_kernel(g, &a_dev, &b_dev, &mut c_dev, &kernel)).map(drop);
    refused(r, "the first use of the tensor-core blocks");
    let got = run_poisoned(gpu, &a_dev, &b_dev, &mut c_dev, &kernel);
    oracle.check_kernel("after a refused recording", &got, &kernel);
    refused(gpu.record(|g| DeviceDense::<f16>::zeros(g, 4, 4)).map(drop), "zeros");
    refused(gpu.record(|g| c_dev.download(g)).map(drop), "download");
    refused(gpu.record(|g| c_dev.fill(g, f16::ZERO)).map(drop), "fill");
    let b_host = dense::<f16>(k, n, seed(1342));
    refused(gpu.record(|g| b_dev.overwrite(g, &b_host)).map(drop), "overwrite");
    refused(gpu.record(|g| DeviceCsr::<f32>::upload(g, a.view())).map(drop), "upload");
    refused(gpu.record(|g| b_dev.transpose(g)).map(drop), "transpose into a new matrix");
    refused(gpu.record(|g| a_dev.transpose(g)).map(drop), "a sparse transposition");
    let opts = TuneOptions::default();
    refused(gpu.record(|g| spmm_tune(g, &a_dev, &b_dev, &mut c_dev, &opts)).map(drop), "tuning");
    refused(gpu.record(|g| g.record(|_| Ok(())).map(drop)).map(drop), "a nested recording");
    let r = gpu.record(|_| Err::<(), _>(Error::Usage("the closure's own".into())));
    assert!(matches!(&r, Err(Error::Usage(s)) if s == "the closure's own"), "{r:?}");
    assert!(!gpu.is_recording().unwrap(), "after the closure's own error");
    let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        gpu.record(|g| -> tilesparse::Result<()> {
            spmm_kernel(g, &a_dev, &b_dev, &mut c_dev, &kernel)?;
            panic!("a panic inside a recording")
        })
    }));
    assert!(unwound.is_err(), "the panic did not reach the caller");
    assert!(!gpu.is_recording().unwrap(), "after a panic inside a recording");
    assert!(matches!(b_dev.overwrite(gpu, &b_host[1..]), Err(Error::ShapeMismatch(_))), "a short overwrite");
    // A replay on another handle.
    let (recording, ()) = gpu.record(|g| spmm_kernel(g, &a_dev, &b_dev, &mut c_dev, &kernel)).unwrap();
    let other = Gpu::new(0).unwrap();
    // SAFETY: the recording's buffers are alive (and the call is refused before anything launches).
    let r = unsafe { recording.replay(&other) };
    assert!(matches!(r, Err(Error::WrongGpu(_))), "{r:?}");
    // And on its own handle, on B written anew: the oracle of the new B.
    b_dev.overwrite(gpu, &b_host).unwrap();
    c_dev.fill(gpu, f16::from_f64(POISON)).unwrap();
    // SAFETY: as above.
    unsafe { recording.replay(gpu) }.unwrap();
    let mut a16: CsMat<f16> = gen::convert(&a);
    SpmmOracle::new(a16.view(), &b_host, n).check_kernel("replayed", &c_dev.download(gpu).unwrap(), &kernel);
    // New values of A from the host (`set_values`, outside the recording: same buffers, blocks rewritten in place).
    let values: Vec<f16> = dense::<f16>(a16.nnz(), 1, seed(1343));
    a16.data_mut().copy_from_slice(&values);
    a_dev.set_values(gpu, &values).unwrap();
    c_dev.fill(gpu, f16::from_f64(POISON)).unwrap();
    // SAFETY: as above.
    unsafe { recording.replay(gpu) }.unwrap();
    let got = c_dev.download(gpu).unwrap();
    SpmmOracle::new(a16.view(), &b_host, n).check_kernel("replayed on A's new values", &got, &kernel);
}

/// Recorded products replay on new inputs ([`recorded_case`]) in f32, f16 and bf16, on uniform rows at an even
/// n, skewed rows (the row split) at an odd n, rows with holes (empty rows written by a second kernel), m = 1 and
/// nnz = 0; and [`recording_errors`].
#[test]
fn sanitizer_recorded_products_replay_on_new_inputs() {
    let Some(gpu) = gpu_or_skip("sanitizer_recorded_products_replay_on_new_inputs") else { return };
    let uniform = gen::uniform_random(300, 200, 0.2, seed(1350));
    let cases = [
        ("uniform 300 x 200", uniform.clone(), 64),
        ("skewed 2000 x 1500", skewed_matrix(2000, 1500, seed(1351)), 33),
        ("holes", rows_cleared(&uniform, 20..170), 48),
        ("m = 1", gen::uniform_random(1, 500, 0.3, seed(1352)), 40),
        ("nnz = 0", gen::uniform_random(50, 60, 0.0, seed(1353)), 16),
    ];
    let mut checked = 0;
    for (name, a, n) in &cases {
        checked += recorded_case::<f32>(&gpu, name, a, *n);
        checked += recorded_case::<f16>(&gpu, name, a, *n);
        checked += recorded_case::<bf16>(&gpu, name, a, *n);
    }
    eprintln!("recorded products checked: {checked}");
    recording_errors(&gpu);
}

/// `spmm_concurrent` on ten jobs of T (more than `MAX_BRANCHES`, so branches take several in turn): matrices shared
/// by several jobs and one of their own, B shared, every tensor-core kernel here, tiles and the automatic choice,
/// plain, scaled (beta reading C) and with bias and ReLU, m = 1 and nnz = 0. Each C, poisoned first, must match the
/// oracle and the bits of the same product run alone; then again from a recording replayed on a new B. A refused
/// job (a C of the wrong shape, an operand of another handle, a tile whose vector width does not divide n) queues
/// nothing: every C keeps its poison.
fn concurrent_case<T: Scalar>(gpu: &Gpu) {
    use tilesparse::spmm::concurrent::MAX_BRANCHES;
    use tilesparse::{spmm_concurrent, SpmmJob};
    let (k, n) = (300, 48);
    let shapes = [
        gen::uniform_random(400, k, 0.2, seed(1400)),
        skewed_matrix(900, k, seed(1401)),
        gen::uniform_random(1, k, 0.3, seed(1402)),
        gen::uniform_random(60, k, 0.0, seed(1403)),
    ];
    let mats: Vec<CsMat<T>> = shapes.iter().map(gen::convert).collect();
    let a_dev: Vec<DeviceCsr<T>> = mats.iter().map(|a| DeviceCsr::upload(gpu, a.view()).unwrap()).collect();
    let bias: Vec<Vec<f32>> = mats.iter().map(|a| gen::dense_matrix(a.rows(), 1, seed(1404))).collect();
    let bias_dev: Vec<_> = bias.iter().map(|b| tilesparse::spmm::upload_bias(gpu, b).unwrap()).collect();
    let mut b_host = dense::<T>(k, n, seed(1405));
    let mut b_dev = DeviceDense::upload(gpu, k, n, &b_host).unwrap();
    // (matrix, kernel, form): 0 plain, 1 scaled, 2 bias + ReLU.
    let tile = SpmmKernel::Tiled(SpmmConfig::select(900, k, n, mats[1].nnz(), T::DTYPE));
    let mut plan: Vec<(usize, Option<SpmmKernel>, usize)> =
        vec![(1, Some(tile), 1), (1, None, 2), (0, None, 0), (2, None, 1), (3, None, 2), (2, Some(tile), 0)];
    let tensor_cores = tensor_cores_here(gpu, T::DTYPE).into_iter().map(SpmmKernel::TensorCore);
    plan.extend(tensor_cores.enumerate().map(|(i, kernel)| (i % 2, Some(kernel), i % 3)));
    while plan.len() <= MAX_BRANCHES {
        plan.push((plan.len() % 4, None, plan.len() % 3));
    }
    let c0: Vec<Vec<T>> = mats.iter().map(|a| dense::<T>(a.rows(), n, seed(1406))).collect();
    let mut cs: Vec<DeviceDense<T>> =
        plan.iter().map(|&(i, ..)| DeviceDense::<T>::zeros(gpu, mats[i].rows(), n).unwrap()).collect();
    let poison = T::from_f64(POISON);
    let reset = |cs: &mut [DeviceDense<T>]| {
        for (c, &(i, _, form)) in cs.iter_mut().zip(&plan) {
            match form {
                1 => c.overwrite(gpu, &c0[i]).unwrap(),
                _ => c.fill(gpu, poison).unwrap(),
            }
        }
    };
    let epilogue = |i: usize, form: usize| match form {
        1 => SpmmEpilogue::scaled(0.5, -1.5),
        2 => SpmmEpilogue::bias_relu(&bias_dev[i]),
        _ => SpmmEpilogue::default(),
    };
    let jobs_of = |b: &DeviceDense<T>, cs: &mut [DeviceDense<T>]| -> tilesparse::Result<Vec<SpmmKernel>> {
        let mut jobs: Vec<SpmmJob<T>> = cs
            .iter_mut()
            .zip(&plan)
            .map(|(c, &(i, kernel, form))| SpmmJob { a: &a_dev[i], b, c, kernel, epilogue: epilogue(i, form) })
            .collect();
        spmm_concurrent(gpu, &mut jobs)
    };
    // Each job alone, then all side by side, then replayed from a recording on a new B.
    let check = |b_host: &[T], cs: &[DeviceDense<T>], used: &[SpmmKernel], what: &str| {
        for (j, ((c, &(i, _, form)), kernel)) in cs.iter().zip(&plan).zip(used).enumerate() {
            let what = format!("{}, {what}, job {j} ({kernel}, form {form})", T::DTYPE);
            let plain = SpmmOracle::new(mats[i].view(), b_host, n);
            let oracle = match form {
                1 => plain.epilogue::<T>(0.5, -1.5, &c0[i], None, n),
                2 => plain.bias_relu::<T>(&bias[i], n),
                _ => plain,
            };
            let got = c.download(gpu).unwrap();
            oracle.check_kernel(&what, &got, kernel);
            let mut alone = DeviceDense::<T>::zeros(gpu, mats[i].rows(), n).unwrap();
            if form == 1 {
                alone.overwrite(gpu, &c0[i]).unwrap();
            }
            let b_dev = DeviceDense::upload(gpu, k, n, b_host).unwrap();
            spmm_kernel_with(gpu, &a_dev[i], &b_dev, &mut alone, kernel, epilogue(i, form)).unwrap();
            assert!(same_bits(&got, &alone.download(gpu).unwrap()), "{what}: other bits than alone");
        }
    };
    reset(&mut cs);
    let used = jobs_of(&b_dev, &mut cs).unwrap_or_else(|e| panic!("{}: {e}", T::DTYPE));
    for (&(_, kernel, _), ran) in plan.iter().zip(&used) {
        if let Some(kernel) = kernel {
            assert_eq!(kernel, *ran, "a job's own kernel");
        }
    }
    check(&b_host, &cs, &used, "side by side");
    reset(&mut cs);
    let (recording, recorded) = gpu.record(|_| jobs_of(&b_dev, &mut cs)).unwrap();
    assert_eq!(recorded, used);
    b_host = dense::<T>(k, n, seed(1407));
    b_dev.overwrite(gpu, &b_host).unwrap();
    // SAFETY: every buffer of the jobs outlives the recording, dropped below.
    unsafe { recording.replay(gpu) }.unwrap();
    check(&b_host, &cs, &used, "replayed");
    drop(recording);
    // Refusals queue nothing: three valid jobs on A[0] and a fourth refused, every C poisoned and left so.
    let refused =
        |c4: &mut [DeviceDense<T>], n: usize, last: Option<(&DeviceDense<T>, SpmmKernel)>, b: &DeviceDense<T>| {
            c4.iter_mut().for_each(|c| c.fill(gpu, poison).unwrap());
            let mut jobs: Vec<SpmmJob<T>> = c4.iter_mut().map(|c| SpmmJob::new(&a_dev[0], b, c)).collect();
            if let Some((b_last, kernel)) = last {
                jobs[3].b = b_last;
                jobs[3].kernel = Some(kernel);
            }
            let r = spmm_concurrent(gpu, &mut jobs);
            drop(jobs);
            for c in c4.iter() {
                assert!(c.download(gpu).unwrap().iter().all(|v| v.to_f64() == poison.to_f64()), "{n}: a C was written");
            }
            r
        };
    let auto = SpmmKernel::Tiled(SpmmConfig::select(400, k, n, mats[0].nnz(), T::DTYPE));
    let mut c4: Vec<DeviceDense<T>> = (0..4).map(|_| DeviceDense::<T>::zeros(gpu, 400, n).unwrap()).collect();
    c4[3] = DeviceDense::<T>::zeros(gpu, 5, n).unwrap();
    let r = refused(&mut c4, n, None, &b_dev);
    assert!(matches!(r, Err(Error::ShapeMismatch(_))), "a C of the wrong shape: {r:?}");
    c4[3] = DeviceDense::<T>::zeros(gpu, 400, n).unwrap();
    let other = Gpu::new(0).unwrap();
    let b_other = DeviceDense::upload(&other, k, n, &b_host).unwrap();
    let r = refused(&mut c4, n, Some((&b_other, auto)), &b_dev);
    assert!(matches!(r, Err(Error::WrongGpu(_))), "B of another handle: {r:?}");
    // At n = 42 the widest dense vector of T does not divide n.
    let n2 = 42;
    let b2 = DeviceDense::upload(gpu, k, n2, &dense::<T>(k, n2, seed(1408))).unwrap();
    let mut c4: Vec<DeviceDense<T>> = (0..4).map(|_| DeviceDense::<T>::zeros(gpu, 400, n2).unwrap()).collect();
    let narrow = compiled_spmm_variants_for(T::DTYPE).find(|c| n2 % c.dense_vector_width as usize != 0).unwrap();
    let r = refused(&mut c4, n2, Some((&b2, SpmmKernel::Tiled(*narrow))), &b2);
    assert!(r.is_err(), "{narrow} at n = {n2}: {r:?}");
}

#[test]
fn sanitizer_concurrent_products_match_alone() {
    let Some(gpu) = gpu_or_skip("sanitizer_concurrent_products_match_alone") else { return };
    concurrent_case::<f32>(&gpu);
    concurrent_case::<f16>(&gpu);
}
