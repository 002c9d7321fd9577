//! The seed and the production SpMV on the GPU against the f64 oracle.

mod common;

use common::{gpu_or_skip, seed, seed_note, POISON};
use half::{bf16, f16};
use sprs::CsMat;
use tilesparse::cpu::oracle;
use tilesparse::spmv::{spmv_error_bound, spmv_gather_probe, GatherProbe, SeedSpmvWorkspace, THREADS_PER_ROW};
use tilesparse::{gen, spmv, spmv_seed, DeviceCsr, Error, Gpu, Scalar, SpmvPlan, SpmvStrategy};

/// gamma(j) = j u / (1 - j u): the relative error bound of j roundings of unit roundoff u (Higham, Lemma 3.1).
fn gamma(j: usize, u: f64) -> f64 {
    let ju = j as f64 * u;
    assert!(ju < 1.0, "gamma({j}) is unbounded");
    ju / (1.0 - ju)
}

/// The seed kernel's error bound per row of y = alpha A x + beta y_in (f32).
///
/// How the seed sums (cuda/spmv/spmv.cu; shared/seeds/spmv-csr-shared-prefix-sum.md): every product
/// p_s = a_s x_s is formed once in f32 (one rounding). Each 32-entry block of the nnz products takes an inclusive
/// Hillis-Steele scan in shared memory: five rounds (offsets 1, 2, 4, 8, 16), each adding into a partial sum at
/// most once, so each prefix P[t] holds every p_s through at most 5 roundings. Row [r0, r1) then sums, in
/// order, starting from 0.0f: the totals P[j + 31] of the nf blocks j in [floor32(r0), floor32(r1)), the
/// partial prefix P[r1 - 1] when r1 is not a block start, minus P[r0 - 1] when r0 is not one. That is t <= nf + 2
/// terms; a term passes at most t - 1 additions (the first, onto 0.0f, is exact), counted here as t. Then
/// alpha * sum and the add of beta * y (or one FMA): 2 roundings. So every product reaches y_i through at most
/// depth = 1 + 5 + t + 2 roundings, and by Higham's Lemma 3.1 the computed sum is the exact sum of its terms'
/// products, each times (1 + theta), |theta| <= gamma(depth).
///
/// Which products: the row's own, once each, and the products in [floor32(r0), r0) (earlier rows' entries in
/// the row's first block) twice, once in that block's total (or in P[r1 - 1] when the row ends in that block)
/// and once in the subtracted P[r0 - 1]: they cancel exactly in exact arithmetic, their roundings do not. With
/// M = sum over the row of |p_s| + 2 * sum over [floor32(r0), r0) of |p_s|:
///
/// |y_i - exact| <= gamma(depth) |alpha| M + gamma(2) |beta y_i|
///
/// (no y term when beta = 0: y is not read then and may hold NaN), plus the f64 oracle's own error,
/// gamma_f64(l + 2) (|alpha| sum_row |p_s| + |beta y_i|) for a row of l entries, plus 1e-30 for underflow (a
/// product or alpha * sum below f32's normal range loses at most 2^-150; sums of subnormals are exact). The depth
/// grows with the number of blocks (at most l / 32 + 11), so the bound grows like the row length times its
/// magnitude, not like its square: a 20 000-entry row with A and x uniform in [-1, 1) gets about 0.19 where one
/// of its 32-entry blocks sums to about 1.9 in magnitude (`seed_bound_catches_a_dropped_block`).
fn seed_bound(a: &CsMat<f32>, x: &[f32], alpha: f32, beta: f32, y_in: &[f32]) -> Vec<f64> {
    let (u32_, u64_) = (f32::EPSILON as f64 / 2.0, f64::EPSILON / 2.0);
    let products: Vec<f64> = a.data().iter().zip(a.indices()).map(|(&v, &j)| (v as f64 * x[j] as f64).abs()).collect();
    let indptr = a.proper_indptr();
    let alpha = (alpha as f64).abs();
    (0..a.rows())
        .map(|i| {
            let (r0, r1) = (indptr[i], indptr[i + 1]);
            let y_term = if beta == 0.0 { 0.0 } else { (beta as f64 * y_in[i] as f64).abs() };
            let (j_first, j_last) = (r0 / 32 * 32, r1 / 32 * 32);
            // An empty row sums nothing: y_i = alpha * 0 + beta * y_i.
            let terms = if r1 > r0 {
                (j_last - j_first) / 32 + usize::from(j_last != r1) + usize::from(j_first != r0)
            } else {
                0
            };
            let depth = 1 + 5 + terms + 2;
            let row: f64 = products[r0..r1].iter().sum();
            let before: f64 = if r1 > r0 { products[j_first..r0].iter().sum() } else { 0.0 };
            gamma(depth, u32_) * alpha * (row + 2.0 * before)
                + gamma(2, u32_) * y_term
                + gamma(r1 - r0 + 2, u64_) * (alpha * row + y_term)
                + 1e-30
        })
        .collect()
}

/// Runs the seed kernel on A and a fresh x and checks it within [`seed_bound`]. y holds `y_in` and one more
/// element, a poison sentinel that must survive; x has a NaN past its end that must never be read.
fn check(gpu: &Gpu, what: &str, a: &CsMat<f32>, alpha: f32, beta: f32, y_in: &[f32]) {
    let (m, k) = (a.rows(), a.cols());
    let x = gen::dense_matrix(k, 1, seed(99));
    let a_dev = DeviceCsr::upload(gpu, a.view()).unwrap();
    let x_dev = gpu.stream().clone_htod(&[&x[..], &[f32::NAN]].concat()).unwrap();
    let mut y_dev = gpu.stream().clone_htod(&[y_in, &[POISON as f32]].concat()).unwrap();
    let mut ws = SeedSpmvWorkspace::new(gpu, a.nnz()).unwrap();
    spmv_seed(gpu, &a_dev, &x_dev, alpha, beta, &mut y_dev, &mut ws).unwrap_or_else(|e| panic!("{what}: {e}"));
    let mut y = gpu.stream().clone_dtoh(&y_dev).unwrap();
    assert_eq!(y.pop(), Some(POISON as f32), "{what}: the element past y was written");
    let want = oracle::spmv(a.view(), &x, alpha as f64, Some(y_in), beta as f64);
    let bound = seed_bound(a, &x, alpha, beta, y_in);
    let got: Vec<f64> = y.iter().map(|v| *v as f64).collect();
    assert_eq!(got.len(), m);
    let cmp = oracle::compare(&got, &want, &bound);
    assert_eq!(
        cmp.mismatches,
        0,
        "{what}: {} of {m} mismatch; first (index, got, want) {:?} ({})",
        cmp.mismatches,
        cmp.first_mismatch,
        seed_note()
    );
}

/// The seed's prefix kernel (cuda/spmv/spmv.cu), emulated operation for operation in f32.
fn seed_prefix_emulated(a: &CsMat<f32>, x: &[f32]) -> Vec<f32> {
    let nnz = a.nnz();
    let mut prefix = vec![0f32; nnz];
    for (block, out) in prefix.chunks_mut(32).enumerate() {
        let mut tile = [0f32; 32];
        for (t, v) in tile.iter_mut().enumerate() {
            let i = block * 32 + t;
            *v = if i < nnz { a.data()[i] * x[a.indices()[i]] } else { 0.0 };
        }
        let mut offset = 1;
        while offset < 32 {
            let before = tile;
            for (t, v) in tile.iter_mut().enumerate() {
                *v += if t >= offset { before[t - offset] } else { 0.0 };
            }
            offset *= 2;
        }
        out.copy_from_slice(&tile[..out.len()]);
    }
    prefix
}

/// The seed's row combine (cuda/spmv/spmv.cu) emulated in f32; `skip` leaves that block's total out of every row
/// that spans it, as a kernel that lost a block would.
fn seed_combine_emulated(
    a: &CsMat<f32>,
    prefix: &[f32],
    alpha: f32,
    beta: f32,
    y_in: &[f32],
    skip: Option<usize>,
) -> Vec<f32> {
    let indptr = a.proper_indptr();
    (0..a.rows())
        .map(|row| {
            let (r0, r1) = (indptr[row], indptr[row + 1]);
            let mut sum = 0.0f32;
            if r1 > r0 {
                let (j_first, j_last) = (r0 & !31, r1 & !31);
                for j in (j_first..j_last).step_by(32) {
                    if skip != Some(j / 32) {
                        sum += prefix[j + 31];
                    }
                }
                if j_last != r1 {
                    sum += prefix[r1 - 1];
                }
                if j_first != r0 {
                    sum -= prefix[r0 - 1];
                }
            }
            if beta == 0.0 {
                alpha * sum
            } else {
                alpha * sum + beta * y_in[row]
            }
        })
        .collect()
}

/// An m x k matrix with rows of `lens` entries at evenly spread columns, values uniform in [lo, 1).
fn rows_of(lens: &[usize], k: usize, lo: f64, rng: &mut gen::Rng) -> CsMat<f32> {
    let mut tri = sprs::TriMat::new((lens.len(), k));
    for (i, &len) in lens.iter().enumerate() {
        for c in 0..len {
            tri.add_triplet(i, c * (k / len), rng.range(lo, 1.0) as f32);
        }
    }
    tri.to_csr()
}

/// No GPU: [`seed_bound`] holds for the seed's algorithm (emulated in f32 on the CPU) on fresh inputs, the GPU
/// tests' shapes included, and it is tight enough to catch a kernel that drops one 32-entry block of a
/// 20 000-entry row (row 1, starting at offset 5: its first block is shared with row 0). The previous bound,
/// 66 u * (sum of the blocks' |products|) * (blocks + 2), was about 12 on such a row whose |y| is about 47 and
/// let a dropped block pass.
#[test]
fn seed_bound_catches_a_dropped_block() {
    let mut rng = gen::Rng::new(seed(1));
    // The emulated seed's result on (A, x, alpha, beta, y_in) must pass; with each block of `skips` dropped in
    // turn, returns how many of those results fail.
    let emulate = |what: &str, a: &CsMat<f32>, x: &[f32], alpha: f32, beta: f32, y_in: &[f32], skips: &[usize]| {
        let prefix = seed_prefix_emulated(a, x);
        let want = oracle::spmv(a.view(), x, alpha as f64, Some(y_in), beta as f64);
        let bound = seed_bound(a, x, alpha, beta, y_in);
        let run = |skip: Option<usize>| {
            let got = seed_combine_emulated(a, &prefix, alpha, beta, y_in, skip);
            let got: Vec<f64> = got.iter().map(|&v| v as f64).collect();
            oracle::compare(&got, &want, &bound)
        };
        let cmp = run(None);
        assert_eq!(cmp.mismatches, 0, "{what}: the emulated seed fails its bound: {cmp:?} ({})", seed_note());
        skips.iter().filter(|&&skip| run(Some(skip)).mismatches > 0).count()
    };
    // The bound holds on the GPU tests' shapes and on the long row.
    let shapes: Vec<(&str, CsMat<f32>)> = vec![
        ("power-law 5000x5000", gen::power_law(5000, 5000, 12.0, 1.5, seed(2))),
        ("one very long row", gen::with_dense_row(&gen::uniform_random(200, 20000, 0.0005, seed(3)), 100)),
        ("empty rows", gen::with_empty_rows(&gen::uniform_random(300, 300, 0.05, seed(4)), 0.5, seed(5))),
        ("k = 1", gen::uniform_random(300, 1, 0.6, seed(6))),
    ];
    for (what, a) in &shapes {
        let x = gen::dense_matrix(a.cols(), 1, seed(7));
        let y_in = gen::dense_matrix(a.rows(), 1, seed(8));
        for (alpha, beta) in [(1.0f32, 0.0f32), (-0.5, 2.0)] {
            emulate(what, a, &x, alpha, beta, &y_in, &[]);
        }
    }
    // Products all of one sign ([0.25, 1)), then of both ([-1, 1)).
    let (k, lens) = (20_000, [5, 20_000, 7, 40]);
    for (what, lo) in [("positive products", 0.5), ("mixed signs", -1.0)] {
        let a = rows_of(&lens, k, lo, &mut rng);
        let x: Vec<f32> = (0..k).map(|_| rng.range(lo, 1.0) as f32).collect();
        let y_in: Vec<f32> = (0..lens.len()).map(|_| rng.range(-1.0, 1.0) as f32).collect();
        for (alpha, beta) in [(1.0f32, 0.0f32), (-2.5, 0.5)] {
            let what = format!("{what}, alpha {alpha}, beta {beta}");
            let bound = seed_bound(&a, &x, alpha, beta, &y_in)[1];
            // Row 1 spans entries 5..20005: blocks 1..625 lie inside it.
            let inside: Vec<usize> = (1..625).collect();
            let exceed = inside
                .iter()
                .filter(|&&block| {
                    let contribution: f64 = (block * 32..block * 32 + 32)
                        .map(|s| alpha as f64 * a.data()[s] as f64 * x[a.indices()[s]] as f64)
                        .sum();
                    contribution.abs() > bound
                })
                .count();
            let caught = emulate(&what, &a, &x, alpha, beta, &y_in, &inside);
            let blocks = inside.len();
            if lo > 0.0 {
                // Every block adds at least 32 * 0.25 |alpha| = 8 |alpha|; the bound is about 0.43 |alpha|.
                assert_eq!((exceed, caught), (blocks, blocks), "{what}: bound {bound} ({})", seed_note());
            } else {
                // A block sums to about N(0, 1.9 |alpha|) against a bound of about 0.19 |alpha|: about 92% of them
                // exceed it (at least 80% with overwhelming probability), and so many dropped blocks are caught.
                let note = seed_note();
                assert!(exceed * 10 >= blocks * 8, "{what}: {exceed} of {blocks} blocks exceed {bound} ({note})");
                assert!(caught * 10 >= blocks * 8, "{what}: {caught} of {blocks} dropped blocks caught ({note})");
            }
        }
    }
}

#[test]
fn seed_spmv_matches_the_oracle() {
    let Some(gpu) = gpu_or_skip("seed_spmv_matches_the_oracle") else { return };
    let cases: Vec<(&str, CsMat<f32>)> = vec![
        ("uniform 1000x800", gen::uniform_random(1000, 800, 0.02, seed(1))),
        ("power-law 5000x5000", gen::power_law(5000, 5000, 12.0, 1.5, seed(2))),
        ("empty rows", gen::with_empty_rows(&gen::uniform_random(300, 300, 0.05, seed(3)), 0.5, seed(4))),
        ("one very long row", gen::with_dense_row(&gen::uniform_random(200, 20000, 0.0005, seed(5)), 100)),
        ("rectangular 50x3000", gen::uniform_random(50, 3000, 0.01, seed(6))),
        ("nnz = 0", CsMat::zero((17, 9))),
        ("m = 1", gen::uniform_random(1, 100, 0.3, seed(7))),
        ("m = 0", CsMat::zero((0, 9))),
        ("k = 1", gen::uniform_random(300, 1, 0.6, seed(8))),
        ("k = 0", CsMat::zero((17, 0))),
    ];
    for (what, a) in &cases {
        let m = a.rows();
        let y_in: Vec<f32> = gen::dense_matrix(m, 1, seed(9));
        for (alpha, beta) in [(1.0f32, 0.0f32), (2.5, 0.0), (1.0, 1.0), (-0.5, 2.0), (0.0, 1.0)] {
            check(&gpu, &format!("{what}, alpha {alpha}, beta {beta}"), a, alpha, beta, &y_in);
        }
    }
}

#[test]
fn seed_spmv_with_beta_zero_does_not_read_y() {
    let Some(gpu) = gpu_or_skip("seed_spmv_with_beta_zero_does_not_read_y") else { return };
    let a = gen::uniform_random(500, 500, 0.03, seed(8));
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
        let y_in = gen::dense_matrix(a.rows(), 1, seed(3));
        check(&gpu, file, &a, 1.0, 0.5, &y_in);
    }
}

/// The plan's 16-bit column offsets: used exactly when every column - row fits in an i16 (both ends of the
/// range included), and the results match the oracle and the 32-bit path (check_production) for every vector
/// width and split, in f32, f64, f16 and bf16.
#[test]
fn production_spmv_16_bit_offsets_at_the_edges_of_their_range() {
    let Some(gpu) = gpu_or_skip("production_spmv_16_bit_offsets_at_the_edges_of_their_range") else { return };
    let (m, k) = (40_000, 70_000);
    let band = |extra: &[(usize, usize)]| -> CsMat<f32> {
        let mut t = sprs::TriMat::new((m, k));
        let mut rng = gen::Rng::new(seed(31));
        for r in 0..m {
            for c in r.saturating_sub(9)..(r + 3 * (r % 7)).min(k) {
                t.add_triplet(r, c, rng.range(-1.0, 1.0) as f32);
            }
        }
        for &(r, c) in extra {
            t.add_triplet(r, c, 0.5);
        }
        t.to_csr()
    };
    let fits = band(&[(0, 32_767), (32_768, 0), (5, 5 + 32_767), (39_999, 39_999 - 32_768)]);
    let over = band(&[(0, 32_767), (1, 32_769)]);
    let under = band(&[(32_769, 0)]);
    let x = gen::dense_matrix(k, 1, seed(32));
    let y_in = gen::dense_matrix(m, 1, seed(33));
    for (what, a, expect) in [("fits", &fits, true), ("column - row = 32768", &over, false), ("-32769", &under, false)]
    {
        let a_dev = DeviceCsr::upload(&gpu, a.view()).unwrap();
        for strategy in all_strategies() {
            let plan = SpmvPlan::with_strategy(&gpu, &a_dev, strategy).unwrap();
            let vector = matches!(strategy, SpmvStrategy::Vector { .. } | SpmvStrategy::Split { .. });
            assert_eq!(plan.offsets16(), expect && vector, "{what}, {strategy}");
            check_production::<f32>(&gpu, what, a, &x, Some(strategy), 1.0, 0.5, &y_in);
        }
    }
    for strategy in all_strategies() {
        check_production::<f64>(&gpu, "fits", &fits, &x, Some(strategy), -1.0, 0.0, &y_in);
        check_production::<f16>(&gpu, "fits", &fits, &x, Some(strategy), 1.0, 0.0, &y_in);
        check_production::<bf16>(&gpu, "fits", &fits, &x, Some(strategy), 1.0, 1.0, &y_in);
    }
    // The chosen plan for a banded matrix uses them, and SpmvPlan::with_options can turn them off.
    let a_dev = DeviceCsr::upload(&gpu, fits.view()).unwrap();
    assert!(SpmvPlan::new(&gpu, &a_dev).unwrap().offsets16());
    let strategy = SpmvPlan::new(&gpu, &a_dev).unwrap().strategy();
    assert!(!SpmvPlan::with_options(&gpu, &a_dev, strategy, false).unwrap().offsets16());
}

/// Small enough for compute-sanitizer in run-all.sh --sanitize.
#[test]
fn sanitizer_spmv_seed_small() {
    let Some(gpu) = gpu_or_skip("sanitizer_spmv_seed_small") else { return };
    let a = gen::power_law(300, 200, 9.0, 1.5, seed(9));
    check(&gpu, "sanitizer", &a, 1.0, 1.0, &gen::dense_matrix(300, 1, seed(1)));
}

/// Every strategy, forced: each vector width, block per row, splits with a low threshold (many long rows,
/// several chunks each) and with the default-like one, and the entry tiles.
fn all_strategies() -> Vec<SpmvStrategy> {
    let mut v: Vec<SpmvStrategy> =
        THREADS_PER_ROW.iter().map(|&threads_per_row| SpmvStrategy::Vector { threads_per_row }).collect();
    v.push(SpmvStrategy::BlockPerRow);
    v.push(SpmvStrategy::Split { threads_per_row: 4, long_row: 8 });
    v.push(SpmvStrategy::Split { threads_per_row: 32, long_row: 1024 });
    v.push(SpmvStrategy::Segmented);
    v
}

/// The production SpMV on A, x and y_in rounded to T, with `strategy` (None: the plan's own choice), checked
/// against the f64 oracle on the same rounded inputs within [`spmv_error_bound`] (its doc comment derives the
/// bound from the accumulation length). y is first filled with `y_in`; with beta = 0 that content must neither
/// be read (NaN) nor survive (poison). y has one more element, a poison sentinel that must survive, and x a NaN
/// past its end that must never be read. When the plan uses 16-bit column offsets, the same plan without them
/// must give the same bits. Returns y.
#[allow(clippy::too_many_arguments)]
fn check_production<T: Scalar>(
    gpu: &Gpu,
    what: &str,
    a: &CsMat<f32>,
    x: &[f32],
    strategy: Option<SpmvStrategy>,
    alpha: f64,
    beta: f64,
    y_in: &[f32],
) -> Vec<T> {
    let a_t: CsMat<T> = gen::convert(a);
    let x_t: Vec<T> = x.iter().map(|&v| T::from_f32(v)).collect();
    let y_t: Vec<T> = y_in.iter().map(|&v| T::from_f32(v)).collect();
    let a_dev = DeviceCsr::upload(gpu, a_t.view()).unwrap();
    let plan = match strategy {
        Some(s) => SpmvPlan::with_strategy(gpu, &a_dev, s).unwrap(),
        None => SpmvPlan::new(gpu, &a_dev).unwrap(),
    };
    let sentinel = T::from_f64(POISON);
    let x_dev = gpu.stream().clone_htod(&[&x_t[..], &[T::from_f64(f64::NAN)]].concat()).unwrap();
    let y_padded = [&y_t[..], &[sentinel]].concat();
    let run = |plan: &SpmvPlan| -> Vec<T> {
        let mut y_dev = gpu.stream().clone_htod(&y_padded).unwrap();
        spmv(gpu, &a_dev, &x_dev, alpha, beta, &mut y_dev, plan)
            .unwrap_or_else(|e| panic!("{what} ({}, {}): {e}", T::DTYPE, plan.strategy()));
        let mut y = gpu.stream().clone_dtoh(&y_dev).unwrap();
        let past = y.pop().map(|v| v.to_f64().to_bits());
        assert_eq!(past, Some(sentinel.to_f64().to_bits()), "{what} ({}): the element past y was written", T::DTYPE);
        y
    };
    let y = run(&plan);
    if plan.offsets16() {
        let plan32 = SpmvPlan::with_options(gpu, &a_dev, plan.strategy(), false).unwrap();
        assert!(!plan32.offsets16());
        let y32 = run(&plan32);
        let same = y.iter().zip(&y32).all(|(p, q)| p.to_f64().to_bits() == q.to_f64().to_bits());
        assert!(same, "{what} ({}, {}): 16-bit offsets and 32-bit indices differ", T::DTYPE, plan.strategy());
    }
    let want = oracle::spmv(a_t.view(), &x_t, alpha, Some(&y_t), beta);
    let bound = spmv_error_bound(a_t.view(), &x_t, alpha, beta, Some(&y_t));
    let got: Vec<f64> = y.iter().map(|v| v.to_f64()).collect();
    let cmp = oracle::compare(&got, &want, &bound);
    assert_eq!(
        cmp.mismatches,
        0,
        "{what} ({}, {}): {} of {} mismatch; first (index, got, want) {:?} ({})",
        T::DTYPE,
        plan.strategy(),
        cmp.mismatches,
        got.len(),
        cmp.first_mismatch,
        seed_note()
    );
    y
}

/// The awkward shapes of the production tests.
fn production_cases() -> Vec<(&'static str, CsMat<f32>)> {
    vec![
        ("uniform 1000x800", gen::uniform_random(1000, 800, 0.02, seed(1))),
        ("power-law 5000x5000", gen::power_law(5000, 5000, 12.0, 1.5, seed(2))),
        ("empty rows", gen::with_empty_rows(&gen::uniform_random(300, 300, 0.05, seed(3)), 0.5, seed(4))),
        ("one row of 200k entries", gen::with_dense_row(&gen::uniform_random(300, 200_000, 0.0001, seed(5)), 100)),
        ("rectangular 50x3000", gen::uniform_random(50, 3000, 0.01, seed(6))),
        ("rectangular 3000x50", gen::uniform_random(3000, 50, 0.1, seed(7))),
        ("nnz = 0", CsMat::zero((17, 9))),
        ("m = 1", gen::uniform_random(1, 100, 0.3, seed(8))),
        ("m = 0", CsMat::zero((0, 9))),
        ("k = 1", gen::uniform_random(3000, 1, 0.6, seed(9))),
        ("k = 0", CsMat::zero((17, 0))),
    ]
}

fn production_all_strategies<T: Scalar>(test: &str) {
    let Some(gpu) = gpu_or_skip(test) else { return };
    for (what, a) in &production_cases() {
        let x = gen::dense_matrix(a.cols(), 1, seed(11));
        let y_in = gen::dense_matrix(a.rows(), 1, seed(12));
        for strategy in all_strategies() {
            for (alpha, beta) in [(1.0, 0.0), (2.5, 0.0), (1.0, 1.0), (-0.5, 2.0), (0.0, 1.0)] {
                let what = format!("{what}, alpha {alpha}, beta {beta}");
                check_production::<T>(&gpu, &what, a, &x, Some(strategy), alpha, beta, &y_in);
            }
        }
        check_production::<T>(&gpu, &format!("{what}, chosen plan"), a, &x, None, 1.5, -1.0, &y_in);
    }
}

#[test]
fn production_spmv_f32_every_strategy_matches_the_oracle() {
    production_all_strategies::<f32>("production_spmv_f32_every_strategy_matches_the_oracle");
}

#[test]
fn production_spmv_f64_every_strategy_matches_the_oracle() {
    production_all_strategies::<f64>("production_spmv_f64_every_strategy_matches_the_oracle");
}

#[test]
fn production_spmv_f16_every_strategy_matches_the_oracle() {
    production_all_strategies::<f16>("production_spmv_f16_every_strategy_matches_the_oracle");
}

#[test]
fn production_spmv_bf16_every_strategy_matches_the_oracle() {
    production_all_strategies::<bf16>("production_spmv_bf16_every_strategy_matches_the_oracle");
}

#[test]
fn production_spmv_with_beta_zero_neither_reads_nor_keeps_y() {
    let Some(gpu) = gpu_or_skip("production_spmv_with_beta_zero_neither_reads_nor_keeps_y") else { return };
    let a = gen::with_dense_row(&gen::power_law(2000, 3000, 8.0, 1.5, seed(9)), 7);
    let x = gen::dense_matrix(3000, 1, seed(1));
    for strategy in all_strategies() {
        for y_fill in [f32::NAN, POISON as f32] {
            let y_in = vec![y_fill; 2000];
            check_production::<f32>(&gpu, &format!("beta 0 over {y_fill}"), &a, &x, Some(strategy), 1.5, 0.0, &y_in);
            check_production::<f16>(&gpu, &format!("beta 0 over {y_fill}"), &a, &x, Some(strategy), 1.0, 0.0, &y_in);
        }
    }
}

#[test]
fn production_spmv_propagates_nan_and_inf_to_their_rows_only() {
    let Some(gpu) = gpu_or_skip("production_spmv_propagates_nan_and_inf_to_their_rows_only") else { return };
    let base = gen::with_dense_row(&gen::uniform_random(600, 5000, 0.004, seed(13)), 300);
    let mut a = base.clone();
    // NaN in a short row and in the long row; Inf in x reaches every row that stores its column.
    a.data_mut()[3] = f32::NAN;
    let long_start = a.proper_indptr()[300];
    a.data_mut()[long_start + 4000] = f32::NAN;
    let mut x = gen::dense_matrix(5000, 1, seed(14));
    x[1234] = f32::INFINITY;
    x[77] = f32::NEG_INFINITY;
    let y_in = gen::dense_matrix(600, 1, seed(15));
    // The test has something to propagate: NaN rows, and rows that are +-Inf (the long row stores every column).
    let want = oracle::spmv(a.view(), &x, 1.0, Some(&y_in), 0.5);
    assert!(want.iter().any(|v| v.is_nan()), "{}", seed_note());
    assert!(want.iter().any(|v| v.is_infinite()), "no row ends at +-Inf ({})", seed_note());
    for strategy in all_strategies() {
        check_production::<f32>(&gpu, "NaN in A, Inf in x", &a, &x, Some(strategy), 1.0, 0.5, &y_in);
        check_production::<f64>(&gpu, "NaN in A, Inf in x", &a, &x, Some(strategy), 1.0, 0.0, &y_in);
        check_production::<f16>(&gpu, "NaN in A, Inf in x", &a, &x, Some(strategy), 1.0, 0.5, &y_in);
        check_production::<bf16>(&gpu, "NaN in A, Inf in x", &a, &x, Some(strategy), -1.0, 0.0, &y_in);
    }
}

#[test]
fn production_spmv_is_deterministic() {
    let Some(gpu) = gpu_or_skip("production_spmv_is_deterministic") else { return };
    let a = gen::with_dense_row(&gen::power_law(20_000, 20_000, 16.0, 1.5, seed(16)), 5);
    let x = gen::dense_matrix(20_000, 1, seed(17));
    let y_in = gen::dense_matrix(20_000, 1, seed(18));
    for strategy in all_strategies() {
        let first = check_production::<f32>(&gpu, "run 1", &a, &x, Some(strategy), 1.0, 1.0, &y_in);
        for run in 2..=3 {
            let again = check_production::<f32>(&gpu, "run again", &a, &x, Some(strategy), 1.0, 1.0, &y_in);
            let same = first.iter().zip(&again).all(|(p, q)| p.to_bits() == q.to_bits());
            assert!(same, "{strategy}: run {run} differs in its bits from run 1");
        }
    }
}

#[test]
fn production_spmv_on_real_matrices() {
    let Some(gpu) = gpu_or_skip("production_spmv_on_real_matrices") else { return };
    for file in ["pores_1.mtx.gz", "lund_a.mtx.gz", "utm300.mtx.gz", "west0479.mtx.gz", "well1850.mtx.gz"] {
        let a = tilesparse::suite::load_matrix(&common::data_path(file)).unwrap();
        let x = gen::dense_matrix(a.cols(), 1, seed(19));
        let y_in = gen::dense_matrix(a.rows(), 1, seed(20));
        for strategy in
            [None, Some(SpmvStrategy::Split { threads_per_row: 8, long_row: 4 }), Some(SpmvStrategy::Segmented)]
        {
            check_production::<f32>(&gpu, file, &a, &x, strategy, 1.0, 0.5, &y_in);
            check_production::<f64>(&gpu, file, &a, &x, strategy, -2.0, 0.0, &y_in);
        }
    }
}

#[test]
fn production_spmv_refuses_bad_operands() {
    let Some(gpu) = gpu_or_skip("production_spmv_refuses_bad_operands") else { return };
    let a = gen::uniform_random(100, 80, 0.1, seed(21));
    let a_dev = DeviceCsr::upload(&gpu, a.view()).unwrap();
    let plan = SpmvPlan::new(&gpu, &a_dev).unwrap();
    let x_short = gpu.stream().alloc_zeros::<f32>(79).unwrap();
    let x = gpu.stream().alloc_zeros::<f32>(80).unwrap();
    let mut y_short = gpu.stream().alloc_zeros::<f32>(99).unwrap();
    let mut y = gpu.stream().alloc_zeros::<f32>(100).unwrap();
    let r = spmv(&gpu, &a_dev, &x_short, 1.0, 0.0, &mut y, &plan);
    assert!(matches!(r, Err(Error::ShapeMismatch(_))), "short x: {r:?}");
    let r = spmv(&gpu, &a_dev, &x, 1.0, 0.0, &mut y_short, &plan);
    assert!(matches!(r, Err(Error::ShapeMismatch(_))), "short y: {r:?}");
    let other = DeviceCsr::upload(&gpu, gen::uniform_random(100, 80, 0.2, seed(22)).view()).unwrap();
    let r = spmv(&gpu, &other, &x, 1.0, 0.0, &mut y, &plan);
    assert!(matches!(r, Err(Error::ShapeMismatch(_))), "plan of another matrix: {r:?}");
    // Same shape and entry count, other columns: a plan's 16-bit offsets would point elsewhere, so refused too.
    let mut mirrored = sprs::TriMat::new((100, 80));
    for (v, (r, c)) in a.iter() {
        mirrored.add_triplet(r, 79 - c, *v);
    }
    let shifted: CsMat<f32> = mirrored.to_csr();
    let shifted_dev = DeviceCsr::upload(&gpu, shifted.view()).unwrap();
    assert_eq!((shifted_dev.rows(), shifted_dev.cols(), shifted_dev.nnz()), (a_dev.rows(), a_dev.cols(), a_dev.nnz()));
    assert!(plan.offsets16());
    let r = spmv(&gpu, &shifted_dev, &x, 1.0, 0.0, &mut y, &plan);
    assert!(matches!(r, Err(Error::ShapeMismatch(_))), "plan of a matrix with the same shape and nnz: {r:?}");
    let r = SpmvPlan::with_strategy(&gpu, &a_dev, SpmvStrategy::Vector { threads_per_row: 3 });
    assert!(matches!(r, Err(Error::InvalidConfig { .. })), "3 threads per row: {:?}", r.err());
}

/// A CSR matrix with these row lengths, k columns: row i's entries at evenly spaced columns, random values.
fn with_row_lengths(lens: &[usize], k: usize, seed: u64) -> CsMat<f32> {
    let mut rng = gen::Rng::new(seed);
    let (mut indptr, mut indices, mut data) = (vec![0usize], Vec::new(), Vec::new());
    for &len in lens {
        assert!(len <= k);
        indices.extend((0..len).map(|i| i * (k / len.max(1)) + (k % len.max(1)) / 2));
        data.extend((0..len).map(|_| rng.range(-1.0, 1.0) as f32));
        indptr.push(indices.len());
    }
    CsMat::new((lens.len(), k), indptr, indices, data)
}

/// The entry tiles' edges (SEGMENT_TILE = 2048 entries): empty rows before the first entry, at a tile's start and
/// after the last entry; a row that fills tile 0 exactly; rows that cross one, two, three and 97 tile boundaries;
/// a crossing row that ends exactly on a boundary; rows of one entry; nnz a multiple of the tile and not.
#[test]
fn production_spmv_segmented_at_tile_edges() {
    let Some(gpu) = gpu_or_skip("production_spmv_segmented_at_tile_edges") else { return };
    let tile = tilesparse::spmv::SEGMENT_TILE;
    let mut lens = vec![0, 0, 0, tile, 0, 0, 5000];
    // From 2048 + 5000 = 7048 to the end of tile 4 (5 * 2048), crossing two boundaries and ending on the third.
    lens.push(5 * tile - (tile + 5000));
    lens.extend([0, 1, 2, 3 * tile + 17, 1, 1, 1]);
    lens.extend(std::iter::repeat_n(7, 600));
    let used: usize = lens.iter().sum();
    let mut exact = lens.clone();
    exact.push(used.next_multiple_of(tile) - used); // nnz a multiple of the tile
    exact.extend([0, 0]);
    let mut long = lens.clone();
    long.push(97 * tile + 5);
    long.extend([3, 0]);
    for (what, lens, whole_tiles) in
        [("ragged end", &lens, false), ("nnz a multiple of the tile", &exact, true), ("a 97-tile row", &long, false)]
    {
        let a = with_row_lengths(lens, 200_000, seed(41));
        assert_eq!(a.nnz() % tile == 0, whole_tiles, "{what}: nnz {}", a.nnz());
        let x = gen::dense_matrix(a.cols(), 1, seed(42));
        let y_in = gen::dense_matrix(a.rows(), 1, seed(43));
        for (alpha, beta) in [(1.0, 0.0), (-0.5, 2.0), (0.0, 1.0)] {
            let what = format!("{what}, alpha {alpha}, beta {beta}");
            check_production::<f32>(&gpu, &what, &a, &x, Some(SpmvStrategy::Segmented), alpha, beta, &y_in);
            check_production::<f64>(&gpu, &what, &a, &x, Some(SpmvStrategy::Segmented), alpha, beta, &y_in);
            check_production::<bf16>(&gpu, &what, &a, &x, Some(SpmvStrategy::Segmented), alpha, beta, &y_in);
        }
    }
}

/// Small enough for compute-sanitizer in run-all.sh --sanitize: every kernel kind once, f32 and f16.
#[test]
fn sanitizer_spmv_production_small() {
    let Some(gpu) = gpu_or_skip("sanitizer_spmv_production_small") else { return };
    let a = gen::with_dense_row(&gen::power_law(300, 5000, 9.0, 1.5, seed(23)), 10);
    let x = gen::dense_matrix(5000, 1, seed(24));
    let y_in = gen::dense_matrix(300, 1, seed(25));
    for strategy in [
        SpmvStrategy::Vector { threads_per_row: 1 },
        SpmvStrategy::Vector { threads_per_row: 32 },
        SpmvStrategy::BlockPerRow,
        SpmvStrategy::Split { threads_per_row: 8, long_row: 16 },
        SpmvStrategy::Segmented,
    ] {
        check_production::<f32>(&gpu, "sanitizer", &a, &x, Some(strategy), 1.0, 1.0, &y_in);
        check_production::<f16>(&gpu, "sanitizer", &a, &x, Some(strategy), 1.0, 0.0, &y_in);
    }
}

/// The bench's x-gather probe gathers x at every column index once: with small positive integers in x every
/// partial sum is exact in f32, so the warps' sums (in a zeroed y with a row for every warp the launch can have)
/// must add up to the oracle's total exactly, whatever the split over threads; a missed gather lowers the total.
/// Small enough for compute-sanitizer.
#[test]
fn sanitizer_spmv_gather_probe() {
    let Some(gpu) = gpu_or_skip("sanitizer_spmv_gather_probe") else { return };
    let a = gen::power_law(3000, 5000, 9.0, 1.5, seed(31));
    assert!(a.rows() >= a.nnz() / 32 + 8, "a row of the sink for every warp ({})", seed_note());
    let x: Vec<f32> = (0..5000u64).map(|j| ((j.wrapping_mul(2_654_435_761) >> 7) % 7) as f32 + 1.0).collect();
    let want: f64 = a.indices().iter().map(|&c| x[c] as f64).sum();
    let dev = DeviceCsr::upload(&gpu, a.view()).unwrap();
    let x_dev = gpu.stream().clone_htod(&x).unwrap();
    assert_ne!(want, 0.0, "a total that a missed gather would change");
    for probe in GatherProbe::ALL {
        let mut sink = gpu.stream().clone_htod(&vec![0.0f32; a.rows()]).unwrap();
        spmv_gather_probe(&gpu, &dev, &x_dev, &mut sink, probe).unwrap();
        let got: f64 = gpu.stream().clone_dtoh(&sink).unwrap().iter().map(|&v| v as f64).sum();
        assert_eq!(got, want, "{probe}: the sum of every gathered x ({})", seed_note());
    }
    let odd = GatherProbe { in_flight: 5, l1_no_allocate: false };
    let mut sink = gpu.stream().clone_htod(&vec![0.0f32; a.rows()]).unwrap();
    assert!(matches!(spmv_gather_probe(&gpu, &dev, &x_dev, &mut sink, odd), Err(Error::Unsupported { .. })));
}

/// Two threads sharing one plan whose strategy keeps scratch partials (the split, the entry tiles): each call's
/// launches hold the plan, so every result has the bits of a call made alone. Memory of another `Gpu` handle
/// is refused.
#[test]
fn production_spmv_plan_shared_by_threads_and_other_handles_refused() {
    let Some(gpu) = gpu_or_skip("production_spmv_plan_shared_by_threads_and_other_handles_refused") else { return };
    let a = gen::power_law(20_000, 20_000, 12.0, 1.5, seed(97));
    let a_dev = DeviceCsr::upload(&gpu, a.view()).unwrap();
    let xs: Vec<Vec<f32>> = (0..2).map(|t| gen::dense_matrix(a.cols(), 1, seed(98 + t))).collect();
    for strategy in [SpmvStrategy::Split { threads_per_row: 4, long_row: 64 }, SpmvStrategy::Segmented] {
        let plan = SpmvPlan::with_strategy(&gpu, &a_dev, strategy).unwrap();
        let alone: Vec<Vec<f32>> = xs
            .iter()
            .map(|x| {
                let x_dev = gpu.stream().clone_htod(x).unwrap();
                let mut y_dev = gpu.stream().clone_htod(&vec![POISON as f32; a.rows()]).unwrap();
                spmv(&gpu, &a_dev, &x_dev, 1.0, 0.0, &mut y_dev, &plan).unwrap();
                gpu.stream().clone_dtoh(&y_dev).unwrap()
            })
            .collect();
        std::thread::scope(|s| {
            for (x, want) in xs.iter().zip(&alone) {
                let (gpu, a_dev, plan) = (&gpu, &a_dev, &plan);
                s.spawn(move || {
                    let x_dev = gpu.stream().clone_htod(x).unwrap();
                    for round in 0..30 {
                        let mut y_dev = gpu.stream().clone_htod(&vec![POISON as f32; a_dev.rows()]).unwrap();
                        spmv(gpu, a_dev, &x_dev, 1.0, 0.0, &mut y_dev, plan).unwrap();
                        let got = gpu.stream().clone_dtoh(&y_dev).unwrap();
                        let same = got.iter().zip(want).all(|(g, w)| g.to_bits() == w.to_bits());
                        assert!(same, "{strategy}: round {round} of a thread differs from the call alone");
                    }
                });
            }
        });
    }
    let other = Gpu::new(0).unwrap();
    let plan = SpmvPlan::new(&gpu, &a_dev).unwrap();
    let x_other = other.stream().clone_htod(&xs[0]).unwrap();
    let mut y_dev = gpu.stream().clone_htod(&vec![0f32; a.rows()]).unwrap();
    let r = spmv(&gpu, &a_dev, &x_other, 1.0, 0.0, &mut y_dev, &plan);
    assert!(matches!(r, Err(Error::WrongGpu(_))), "{r:?}");
    assert!(matches!(SpmvPlan::new(&other, &a_dev), Err(Error::WrongGpu(_))));
}

/// The production SpMV with each strategy recorded once (`Gpu::record`) and replayed over three rounds of new x and y
/// written into the same buffers ([`recorded_spmv_case`]) in f32 and f16, on a power law with a dense row; and a plan
/// made while recording is `Error::Recording` (it reads the matrix back).
#[test]
fn sanitizer_spmv_recorded_replays_on_new_inputs() {
    let Some(gpu) = gpu_or_skip("sanitizer_spmv_recorded_replays_on_new_inputs") else { return };
    let a = gen::with_dense_row(&gen::power_law(300, 5000, 9.0, 1.5, seed(30)), 10);
    recorded_spmv_case::<f32>(&gpu, &a);
    recorded_spmv_case::<f16>(&gpu, &a);
    let a_dev = DeviceCsr::upload(&gpu, a.view()).unwrap();
    let split = SpmvStrategy::Split { threads_per_row: 8, long_row: 16 };
    let r = gpu.record(|g| SpmvPlan::with_strategy(g, &a_dev, split)).map(drop);
    assert!(matches!(r, Err(Error::Recording(_))), "{r:?}");
    assert!(!gpu.is_recording().unwrap());
}

/// y = alpha A x + beta y with every kernel kind (vector at 1 and 32 threads per row, block per row, split, entry
/// tiles), one y each, run once, recorded, then replayed over three rounds of new x and y0 written into the same
/// buffers: each y must match the oracle of its round and the bits of the same step run eagerly after it.
fn recorded_spmv_case<T: Scalar>(gpu: &Gpu, a: &CsMat<f32>) {
    let a_t: CsMat<T> = gen::convert(a);
    let (m, k) = (a.rows(), a.cols());
    let a_dev = DeviceCsr::upload(gpu, a_t.view()).unwrap();
    let plans: Vec<SpmvPlan> = [
        SpmvStrategy::Vector { threads_per_row: 1 },
        SpmvStrategy::Vector { threads_per_row: 32 },
        SpmvStrategy::BlockPerRow,
        SpmvStrategy::Split { threads_per_row: 8, long_row: 16 },
        SpmvStrategy::Segmented,
    ]
    .into_iter()
    .map(|s| SpmvPlan::with_strategy(gpu, &a_dev, s).unwrap())
    .collect();
    let (alpha, beta) = (1.5, -0.5);
    let mut x_dev = gpu.stream().alloc_zeros::<T>(k).unwrap();
    let mut ys: Vec<_> = plans.iter().map(|_| gpu.stream().alloc_zeros::<T>(m).unwrap()).collect();
    let step = |g: &Gpu, x: &cudarc::driver::CudaSlice<T>, ys: &mut [cudarc::driver::CudaSlice<T>]| {
        plans.iter().zip(ys).try_for_each(|(plan, y)| spmv(g, &a_dev, x, alpha, beta, y, plan))
    };
    step(gpu, &x_dev, &mut ys).unwrap();
    let (recording, ()) = gpu.record(|g| step(g, &x_dev, &mut ys)).unwrap();
    let to_t = |v: Vec<f32>| -> Vec<T> { v.into_iter().map(T::from_f32).collect() };
    for round in 0..3 {
        let x = to_t(gen::dense_matrix(k, 1, seed(31 + round)));
        let y0 = to_t(gen::dense_matrix(m, 1, seed(34 + round)));
        gpu.stream().memcpy_htod(&x, &mut x_dev).unwrap();
        ys.iter_mut().for_each(|y| gpu.stream().memcpy_htod(&y0, y).unwrap());
        // SAFETY: A, the plans, x and every y outlive the recording, which is dropped with this function.
        unsafe { recording.replay(gpu) }.unwrap();
        let replayed: Vec<Vec<T>> = ys.iter().map(|y| gpu.stream().clone_dtoh(y).unwrap()).collect();
        ys.iter_mut().for_each(|y| gpu.stream().memcpy_htod(&y0, y).unwrap());
        step(gpu, &x_dev, &mut ys).unwrap();
        let want = oracle::spmv(a_t.view(), &x, alpha, Some(&y0), beta);
        let bound = spmv_error_bound(a_t.view(), &x, alpha, beta, Some(&y0));
        for ((plan, y), got) in plans.iter().zip(&ys).zip(&replayed) {
            let what = format!("{}, {}, round {round}", T::DTYPE, plan.strategy());
            let got64: Vec<f64> = got.iter().map(|v| v.to_f64()).collect();
            let cmp = oracle::compare(&got64, &want, &bound);
            assert_eq!(
                cmp.mismatches,
                0,
                "{what}: first (index, got, want) {:?} ({})",
                cmp.first_mismatch,
                seed_note()
            );
            let eager = gpu.stream().clone_dtoh(y).unwrap();
            let same = eager.iter().zip(got).all(|(p, q)| p.to_f64().to_bits() == q.to_f64().to_bits());
            assert!(same, "{what}: other bits than the step run eagerly");
        }
    }
}
