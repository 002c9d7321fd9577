//! The production SpGEMM (plan, numeric phase, reuse, errors), the seed's ladder (k0..k4, kp) and the
//! COO -> CSR conversion on the GPU against the f64 oracle, and the host-side bins, bounds and kernel names
//! (no GPU needed).

mod common;

use common::{from_triplets, gpu_or_skip, seed, seed_note, POISON};
use sprs::CsMat;
use tilesparse::baseline::cusparse::{self, Cusparse, SpgemmAlg};
use tilesparse::cpu::oracle;
use tilesparse::spgemm::{
    bin_of, check_product, coo_to_csr, output_nnz_bound, spgemm, spgemm_ladder, DeviceCoo, LadderKernel, SpgemmPlan,
    DENSE_BIN, DENSE_TILE, MAX_DENSE_FROM, PLAN_BINS, SPGEMM_K4_GRID,
};
use tilesparse::{gen, DeviceCsr, Error, Gpu};

/// Runs each kernel on A * B, converts to CSR and checks structure and values (`check_product` derives the
/// bound gamma(p + 1) |A||B| from the number p of products per entry).
fn check(gpu: &Gpu, what: &str, a: &CsMat<f32>, b: &CsMat<f32>, kernels: &[LadderKernel]) {
    let a_dev = DeviceCsr::upload(gpu, a.view()).unwrap();
    let b_dev = DeviceCsr::upload(gpu, b.view()).unwrap();
    let note = seed_note();
    for &kernel in kernels {
        let coo =
            spgemm_ladder(gpu, &a_dev, &b_dev, kernel).unwrap_or_else(|e| panic!("{what}, {kernel}: {e} ({note})"));
        assert!(coo.nnz() <= coo.capacity(), "{what}, {kernel}");
        let c = coo_to_csr(gpu, &coo)
            .and_then(|c| c.download(gpu))
            .unwrap_or_else(|e| panic!("{what}, {kernel}: {e} ({note})"));
        check_product(a.view(), b.view(), &c).unwrap_or_else(|e| panic!("{what}, {kernel}: {e} ({note})"));
    }
}

fn transpose(a: &CsMat<f32>) -> CsMat<f32> {
    a.transpose_view().to_csr()
}

/// A * B or A * A^T when A is not square.
fn square_product(a: &CsMat<f32>) -> CsMat<f32> {
    if a.rows() == a.cols() {
        a.clone()
    } else {
        transpose(a)
    }
}

fn cases() -> Vec<(&'static str, CsMat<f32>, CsMat<f32>)> {
    let power = gen::power_law(500, 500, 8.0, 1.8, seed(2));
    let banded = gen::banded(400, 400, 5, seed(3));
    let aat = gen::power_law(300, 400, 10.0, 1.5, seed(4));
    // Product entries that cancel to exactly 0, and a stored zero in A: both stay in C's structure.
    let cancel_a = from_triplets(3, 3, &[(0, 0, 1.0), (0, 1, 1.0), (1, 2, 0.0), (2, 0, 2.0)]);
    let cancel_b = from_triplets(3, 2, &[(0, 0, 1.0), (1, 0, -1.0), (2, 1, 5.0), (0, 1, 3.0)]);
    vec![
        (
            "random rectangular 300x200 * 200x250",
            gen::uniform_random(300, 200, 0.05, seed(1)),
            gen::uniform_random(200, 250, 0.05, seed(11)),
        ),
        ("power-law A * A", power.clone(), power),
        ("banded A * A", banded.clone(), banded),
        (
            "empty rows of A, empty columns of B",
            gen::with_empty_rows(&gen::uniform_random(200, 150, 0.04, seed(5)), 0.4, seed(6)),
            transpose(&gen::with_empty_rows(&gen::uniform_random(180, 150, 0.04, seed(7)), 0.4, seed(8))),
        ),
        ("A * A^T", aat.clone(), transpose(&aat)),
        ("k = 1", gen::uniform_random(50, 1, 0.5, seed(9)), gen::uniform_random(1, 60, 0.5, seed(10))),
        (
            "wide B (many tiles)",
            gen::uniform_random(64, 64, 0.05, seed(12)),
            gen::uniform_random(64, 9000, 0.01, seed(13)),
        ),
        (
            "an output row longer than the shared-memory sort",
            gen::with_dense_row(&gen::uniform_random(100, 100, 0.02, seed(14)), 3),
            gen::uniform_random(100, 6000, 0.01, seed(15)),
        ),
        ("nnz(A) = 0", CsMat::zero((17, 9)), gen::uniform_random(9, 13, 0.3, seed(16))),
        ("nnz(B) = 0", gen::uniform_random(20, 15, 0.3, seed(18)), CsMat::zero((15, 12))),
        ("m = 0", CsMat::zero((0, 5)), gen::uniform_random(5, 7, 0.5, seed(17))),
        ("m = 1", gen::uniform_random(1, 80, 0.3, seed(19)), gen::uniform_random(80, 300, 0.05, seed(20))),
        ("n = 1", gen::uniform_random(120, 90, 0.05, seed(21)), gen::uniform_random(90, 1, 0.5, seed(22))),
        ("cancellation and stored zeros", cancel_a, cancel_b),
    ]
}

/// A * B where A holds a NaN and B +Inf and -Inf: C has NaN (the NaN's row; Inf - Inf; a stored zero times
/// Inf), +Inf and -Inf entries, which must come out exactly so (check_product compares non-finite values
/// exactly), around random rows that meet them or not.
fn nan_inf_problem() -> (CsMat<f32>, CsMat<f32>) {
    let (m, k, n) = (60, 40, 50);
    // Rows 0-4 of A and rows 0-2 of B are fixed, the others random.
    let keep = |x: &CsMat<f32>, from: usize| -> Vec<(usize, usize, f32)> {
        x.iter().filter(|&(_, (r, _))| r >= from).map(|(&v, (r, c))| (r, c, v)).collect()
    };
    let mut a_entries = keep(&gen::uniform_random(m, k, 0.08, seed(31)), 5);
    a_entries.extend([
        (0, 0, f32::NAN), // row 0: NaN wherever B row 0 reaches
        (0, 5, 1.0),
        (1, 1, 2.0),  // row 1: +Inf at column 7 (B row 1)
        (2, 1, -1.0), // row 2: -Inf at column 7
        (3, 1, 1.0),  // row 3: Inf - Inf = NaN at column 7
        (3, 2, 1.0),
        (4, 1, 0.0), // row 4: a stored zero times Inf is NaN
    ]);
    let mut b_entries = keep(&gen::uniform_random(k, n, 0.1, seed(32)), 3);
    b_entries.extend([
        (0, 3, 0.5),
        (0, 20, -2.0),
        (1, 7, f32::INFINITY),
        (1, 8, 0.5),
        (2, 7, f32::NEG_INFINITY),
        (2, 9, 1.5),
    ]);
    (from_triplets(m, k, &a_entries), from_triplets(k, n, &b_entries))
}

/// NaN and Inf through every ladder kernel and the production SpGEMM (one-shot and plan).
#[test]
fn nan_and_inf_propagate_through_spgemm() {
    let (a, b) = nan_inf_problem();
    let want = oracle::spgemm(a.view(), b.view());
    let at = |i: usize, j: usize| *want.get(i, j).expect("an entry of C");
    assert!(at(0, 3).is_nan() && at(0, 20).is_nan() && at(3, 7).is_nan() && at(4, 7).is_nan());
    assert_eq!((at(1, 7), at(2, 7)), (f64::INFINITY, f64::NEG_INFINITY));
    assert!(want.data().iter().any(|v| v.is_finite()));
    let Some(gpu) = gpu_or_skip("nan_and_inf_propagate_through_spgemm") else { return };
    check(&gpu, "NaN and Inf", &a, &b, &LadderKernel::LADDER);
    check_production(&gpu, "NaN and Inf", &a, &b);
}

#[test]
fn ladder_kernels_match_the_oracle() {
    let Some(gpu) = gpu_or_skip("ladder_kernels_match_the_oracle") else { return };
    for (what, a, b) in cases() {
        check(&gpu, what, &a, &b, &LadderKernel::LADDER);
    }
}

#[test]
fn every_k4_and_kp_grid_point_matches_the_oracle() {
    let Some(gpu) = gpu_or_skip("every_k4_and_kp_grid_point_matches_the_oracle") else { return };
    let kernels: Vec<LadderKernel> = SPGEMM_K4_GRID
        .iter()
        .flat_map(|&(block, tile)| [LadderKernel::K4 { block, tile }, LadderKernel::PrefixSum { block, tile }])
        .collect();
    let a = gen::power_law(200, 300, 12.0, 1.5, seed(21));
    let b = gen::uniform_random(300, 5000, 0.004, seed(22));
    check(&gpu, "power-law 200x300 * random 300x5000", &a, &b, &kernels);
}

#[test]
fn ladder_on_real_matrices() {
    let Some(gpu) = gpu_or_skip("ladder_on_real_matrices") else { return };
    for file in ["pores_1.mtx.gz", "lund_a.mtx.gz", "utm300.mtx.gz", "west0479.mtx.gz", "well1850.mtx.gz"] {
        let a = tilesparse::suite::load_matrix(&common::data_path(file)).unwrap();
        check(&gpu, file, &a, &square_product(&a), &LadderKernel::LADDER);
    }
}

#[test]
fn shape_mismatch_is_an_error() {
    let Some(gpu) = gpu_or_skip("shape_mismatch_is_an_error") else { return };
    let a = DeviceCsr::upload(&gpu, gen::uniform_random(10, 20, 0.2, seed(1)).view()).unwrap();
    let b = DeviceCsr::upload(&gpu, gen::uniform_random(21, 5, 0.2, seed(2)).view()).unwrap();
    assert!(matches!(spgemm_ladder(&gpu, &a, &b, LadderKernel::K3), Err(Error::ShapeMismatch(_))));
    assert!(matches!(DeviceCoo::for_product(&gpu, &a, &b), Err(Error::ShapeMismatch(_))));
}

/// Small enough for compute-sanitizer in run-all.sh --sanitize; every ladder kernel and the conversion.
#[test]
fn sanitizer_spgemm_small() {
    let Some(gpu) = gpu_or_skip("sanitizer_spgemm_small") else { return };
    let a = gen::with_empty_rows(&gen::power_law(60, 50, 6.0, 1.5, seed(31)), 0.2, seed(32));
    let b = gen::uniform_random(50, 300, 0.05, seed(33));
    let mut kernels = LadderKernel::LADDER.to_vec();
    kernels.extend([LadderKernel::K4 { block: 64, tile: 64 }, LadderKernel::PrefixSum { block: 1024, tile: 4096 }]);
    check(&gpu, "sanitizer", &a, &b, &kernels);
}

fn bound_of(a: &CsMat<f32>, b: &CsMat<f32>) -> u64 {
    output_nnz_bound(a.indptr().raw_storage(), a.indices(), b.indptr().raw_storage(), b.cols())
}

#[test]
fn output_bound_holds_and_is_tight_where_it_should_be() {
    for (what, a, b) in cases() {
        let nnz = oracle::spgemm(a.view(), b.view()).nnz() as u64;
        assert!(bound_of(&a, &b) >= nnz, "{what}: bound {} < nnz {nnz}", bound_of(&a, &b));
    }
    // A permutation times anything: exactly nnz(B) products, no collisions.
    let p = from_triplets(3, 3, &[(0, 2, 1.0), (1, 0, 1.0), (2, 1, 1.0)]);
    let b = gen::uniform_random(3, 40, 0.3, seed(1));
    assert_eq!(bound_of(&p, &b), b.nnz() as u64);
    // A row with more products than B has columns is capped at B's columns.
    let full = from_triplets(1, 3, &[(0, 0, 1.0), (0, 1, 1.0), (0, 2, 1.0)]);
    let dense_b = from_triplets(3, 2, &[(0, 0, 1.0), (0, 1, 1.0), (1, 0, 1.0), (1, 1, 1.0), (2, 0, 1.0), (2, 1, 1.0)]);
    assert_eq!(bound_of(&full, &dense_b), 2);
    assert_eq!(bound_of(&CsMat::zero((4, 5)), &dense_b.transpose_view().to_csr()), 0);
}

/// `SPGEMM_K4_GRID` and the X-macro that instantiates the kernels are the grid's two copies: they must agree.
#[test]
fn the_rust_grid_matches_the_cuda_x_macro() {
    let cu = include_str!("../cuda/spgemm/spgemm.cu");
    let start = cu.find("#define TILESPARSE_SPGEMM_K4_GRID(X)").expect("the X-macro is in spgemm.cu");
    let body = &cu[start..start + cu[start..].find("\n\n").expect("the X-macro ends with a blank line")];
    let points: Vec<(u32, u32)> = body
        .split("X(")
        .skip(1) // the macro's name, before the first point
        .map(|p| {
            let (block, rest) = p.split_once(',').unwrap();
            let tile = rest.split_once(')').unwrap().0;
            (block.trim().parse().unwrap(), tile.trim().parse().unwrap())
        })
        .collect();
    assert_eq!(points, SPGEMM_K4_GRID);
}

#[test]
fn kernel_names_parse_and_the_grid_is_complete() {
    assert_eq!(SPGEMM_K4_GRID.len(), 35);
    for block in [64, 128, 256, 512, 1024] {
        for tile in [64, 128, 256, 512, 1024, 2048, 4096] {
            assert!(SPGEMM_K4_GRID.contains(&(block, tile)), "({block}, {tile}) missing");
        }
    }
    for &(block, tile) in SPGEMM_K4_GRID {
        for k in [LadderKernel::K4 { block, tile }, LadderKernel::PrefixSum { block, tile }] {
            assert_eq!(k.to_string().parse::<LadderKernel>().unwrap(), k);
            assert!(k.kernel_name().starts_with("spgemm_k"), "{}", k.kernel_name());
        }
    }
    for k in LadderKernel::LADDER {
        assert_eq!(k.to_string().parse::<LadderKernel>().unwrap(), k);
    }
    assert_eq!("k4".parse::<LadderKernel>().unwrap(), LadderKernel::LADDER[4]);
    assert_eq!("kp".parse::<LadderKernel>().unwrap(), LadderKernel::LADDER[5]);
    assert!(matches!("k4_b100_t64".parse::<LadderKernel>(), Err(Error::NotCompiled { .. })));
    assert!(matches!("k9".parse::<LadderKernel>(), Err(Error::Usage(_))));
}

// ---------------------------------------------------------------------------------------------------------
// The production SpGEMM.

/// A x B where A has rows whose products fill every bin: row i of A takes `lens[i]` distinct columns, B has
/// `b_row_len` entries per row over `n` columns, so row i has about lens[i] * b_row_len products.
fn binned_problem(lens: &[usize], k: usize, n: usize, b_row_len: usize, seed: u64) -> (CsMat<f32>, CsMat<f32>) {
    let mut rng = gen::Rng::new(seed);
    let mut tri = sprs::TriMat::new((lens.len(), k));
    for (i, &len) in lens.iter().enumerate() {
        let mut cols: Vec<usize> = (0..k).collect();
        for c in 0..len.min(k) {
            let j = c + rng.below(k - c);
            cols.swap(c, j);
            tri.add_triplet(i, cols[c], rng.range(-1.0, 1.0) as f32);
        }
    }
    let density = b_row_len as f64 / n as f64;
    (tri.to_csr(), gen::uniform_random(k, n, density, seed.wrapping_add(1)))
}

/// The same pattern with fresh random values.
fn with_new_values(a: &CsMat<f32>, seed: u64) -> CsMat<f32> {
    let mut rng = gen::Rng::new(seed);
    let values: Vec<f32> = a.data().iter().map(|_| rng.range(-2.0, 2.0) as f32).collect();
    CsMat::new(a.shape(), a.indptr().raw_storage().to_vec(), a.indices().to_vec(), values)
}

/// A device matrix of C's shape and nnz (C's row lengths; `numeric_into` rewrites the row pointer anyway) for the
/// numeric phase to overwrite: every value POISON, and in each row the first columns of the matrix, or the last
/// ones where those are the row's own pattern, so that a row whose columns are left unwritten fails the
/// structure check unless the row is full.
fn poisoned_like(gpu: &Gpu, c: &CsMat<f32>) -> DeviceCsr<f32> {
    let n = c.cols();
    let mut indices = Vec::with_capacity(c.nnz());
    for row in c.outer_iterator() {
        let len = row.nnz();
        let first: Vec<usize> = (0..len).collect();
        indices.extend(if row.indices() == &first[..] { ((n - len)..n).collect() } else { first });
    }
    let indptr = c.proper_indptr();
    DeviceCsr::from_parts(gpu, c.rows(), n, &indptr, &indices, &vec![POISON as f32; c.nnz()]).unwrap()
}

/// Best effort for the paths that allocate C themselves (`spgemm`, `SpgemmPlan::numeric`): allocates and frees
/// buffers of C's column indices (-1, never a valid column) and values (POISON), so that the stream-ordered
/// pool is likely to hand these blocks to the next allocations of that size rather than blocks still holding a
/// correct earlier C. Whether it does is the pool's choice; `numeric_into` with [`poisoned_like`] is the
/// guaranteed check.
fn poison_pool(gpu: &Gpu, nnz: usize) {
    let nnz = nnz.max(1);
    let columns = gpu.stream().clone_htod(&vec![-1i32; nnz]).unwrap();
    let values = gpu.stream().clone_htod(&vec![POISON as f32; nnz]).unwrap();
    drop((columns, values));
}

/// The plan's numeric phase into a poisoned C of `pattern`'s structure ([`poisoned_like`]), downloaded.
fn numeric_poisoned(
    gpu: &Gpu,
    plan: &mut SpgemmPlan,
    a_dev: &DeviceCsr<f32>,
    b_dev: &DeviceCsr<f32>,
    pattern: &CsMat<f32>,
) -> tilesparse::Result<CsMat<f32>> {
    let mut c = poisoned_like(gpu, pattern);
    plan.numeric_into(gpu, a_dev, b_dev, &mut c)?;
    c.download(gpu)
}

/// The oracle's structure of A * B with f32 values (for [`poisoned_like`]).
fn oracle_pattern(a: &CsMat<f32>, b: &CsMat<f32>) -> CsMat<f32> {
    oracle::spgemm(a.view(), b.view()).map(|&v| v as f32)
}

/// Runs the production SpGEMM and checks the result against the oracle (structure exact, values within
/// gamma(p + 1) |A||B|) and the structure against sprs. Returns the plan's bins (symbolic, numeric).
fn check_production(gpu: &Gpu, what: &str, a: &CsMat<f32>, b: &CsMat<f32>) -> (Vec<usize>, Vec<usize>) {
    check_plan(gpu, what, a, b, None)
}

/// check_production with the dense-bin threshold `dense_from` (None: the default): the one-shot `spgemm` (after
/// [`poison_pool`]), a plan's numeric phase into a poisoned C (`numeric_into`), and into a C it allocates (after
/// [`poison_pool`]).
fn check_plan(
    gpu: &Gpu,
    what: &str,
    a: &CsMat<f32>,
    b: &CsMat<f32>,
    dense_from: Option<usize>,
) -> (Vec<usize>, Vec<usize>) {
    let note = seed_note();
    let a_dev = DeviceCsr::upload(gpu, a.view()).unwrap();
    let b_dev = DeviceCsr::upload(gpu, b.view()).unwrap();
    poison_pool(gpu, oracle::spgemm(a.view(), b.view()).nnz());
    let one_shot = match dense_from {
        None => spgemm(gpu, &a_dev, &b_dev),
        Some(d) => tilesparse::spgemm::spgemm_with_dense_from(gpu, &a_dev, &b_dev, d),
    };
    let c = one_shot.and_then(|c| c.download(gpu)).unwrap_or_else(|e| panic!("{what}: {e} ({note})"));
    check_product(a.view(), b.view(), &c).unwrap_or_else(|e| panic!("{what}: {e} ({note})"));
    if c.nnz() < 2_000_000 {
        // A second, independent reference for the structure: sprs's SMMP product.
        let theirs = a * b;
        assert_eq!(theirs.indptr().raw_storage(), c.indptr().raw_storage(), "{what}: row pointer vs sprs");
        assert_eq!(theirs.indices(), c.indices(), "{what}: columns vs sprs");
    }
    let mut plan = match dense_from {
        None => SpgemmPlan::new(gpu, &a_dev, &b_dev),
        Some(d) => SpgemmPlan::with_dense_from(gpu, &a_dev, &b_dev, d),
    }
    .unwrap();
    assert_eq!(plan.nnz(), c.nnz(), "{what}");
    // c's structure is the oracle's (checked above).
    let into = numeric_poisoned(gpu, &mut plan, &a_dev, &b_dev, &c).unwrap_or_else(|e| panic!("{what}: {e}"));
    check_product(a.view(), b.view(), &into).unwrap_or_else(|e| panic!("{what}, plan into poison: {e} ({note})"));
    poison_pool(gpu, c.nnz());
    let again = plan.numeric(gpu, &a_dev, &b_dev).and_then(|c| c.download(gpu)).unwrap();
    check_product(a.view(), b.view(), &again).unwrap_or_else(|e| panic!("{what}, plan: {e} ({note})"));
    (plan.symbolic_bins().to_vec(), plan.numeric_bins().to_vec())
}

#[test]
fn production_matches_the_oracle() {
    let Some(gpu) = gpu_or_skip("production_matches_the_oracle") else { return };
    for (what, a, b) in cases() {
        check_production(&gpu, what, &a, &b);
    }
}

/// Rows in every hash bin and in the dense bin (several column tiles), in both phases: the test fails if a bin
/// goes unexercised, so every compiled bin kernel is checked against the oracle.
#[test]
fn production_covers_every_bin() {
    let Some(gpu) = gpu_or_skip("production_covers_every_bin") else { return };
    let mut symbolic = vec![0usize; DENSE_BIN + 1];
    let mut numeric = vec![0usize; DENSE_BIN + 1];
    let mut add = |(s, n): (Vec<usize>, Vec<usize>)| {
        symbolic.iter_mut().zip(&s).for_each(|(t, x)| *t += x);
        numeric.iter_mut().zip(&n).for_each(|(t, x)| *t += x);
    };
    // About 10 products per entry of A: row lengths from 0 to 2500 give 0 to about 25 000 products per row,
    // one or more rows per bin; 80 000 columns make 3 dense tiles.
    const LENS: [usize; 14] = [0, 1, 2, 3, 5, 9, 18, 36, 70, 140, 280, 560, 1200, 2500];
    let lens: Vec<usize> = (0..140).map(|i| LENS[i % LENS.len()]).collect();
    // The largest threshold, so that every hash bin gets rows. The seeds stay fixed: which bin a row lands in
    // depends on its random product count, and a fresh draw could leave a bin empty.
    let (a, b) = binned_problem(&lens, 4000, 2 * DENSE_TILE + 14_000, 10, 41);
    add(check_plan(&gpu, "rows in every bin, 3 column tiles", &a, &b, Some(MAX_DENSE_FROM)));
    check_production(&gpu, "rows in every bin, default threshold", &a, &b);
    // Few columns: products far above n, so rows land by n, and the dense bin has one (partial) tile.
    let (a, b) = binned_problem(&lens, 4000, 9000, 40, 43);
    add(check_plan(&gpu, "products above n = 9000", &a, &b, Some(MAX_DENSE_FROM)));
    check_production(&gpu, "products above n = 9000, default threshold", &a, &b);
    for bin in 0..=DENSE_BIN {
        assert!(symbolic[bin] > 0, "symbolic bin {bin} got no row: {symbolic:?}");
        assert!(numeric[bin] > 0, "numeric bin {bin} got no row: {numeric:?}");
    }
}

/// Low dense-bin thresholds send rows of every size through the dense column tiles (both phases), and rows
/// dense in the symbolic phase but hashed in the numeric one (products far above nnz).
#[test]
fn production_dense_bin_at_any_threshold() {
    let Some(gpu) = gpu_or_skip("production_dense_bin_at_any_threshold") else { return };
    const LENS: [usize; 9] = [0, 1, 2, 5, 12, 40, 150, 600, 1500];
    let lens: Vec<usize> = (0..45).map(|i| LENS[i % LENS.len()]).collect();
    for (n, b_row_len) in [(DENSE_TILE + 5000, 10), (3000, 30)] {
        // Rows of 1500 entries have about 15 000 and 45 000 products: dense at every threshold, whatever the seed.
        let (a, b) = binned_problem(&lens, 2000, n, b_row_len, seed(47));
        let (a_dev, b_dev) = (DeviceCsr::upload(&gpu, a.view()).unwrap(), DeviceCsr::upload(&gpu, b.view()).unwrap());
        let pattern = oracle_pattern(&a, &b);
        for dense_from in [1, 16, 300, 2500] {
            let what = format!("n = {n}, dense_from = {dense_from} ({})", seed_note());
            let mut plan = SpgemmPlan::with_dense_from(&gpu, &a_dev, &b_dev, dense_from).unwrap();
            assert!(plan.symbolic_bins()[DENSE_BIN] > 0, "{what}: no dense row");
            let c = numeric_poisoned(&gpu, &mut plan, &a_dev, &b_dev, &pattern).unwrap();
            check_product(a.view(), b.view(), &c).unwrap_or_else(|e| panic!("{what}: {e}"));
            poison_pool(&gpu, pattern.nnz());
            let one_shot = tilesparse::spgemm::spgemm_with_dense_from(&gpu, &a_dev, &b_dev, dense_from).unwrap();
            check_product(a.view(), b.view(), &one_shot.download(&gpu).unwrap())
                .unwrap_or_else(|e| panic!("{what}, one-shot: {e}"));
        }
    }
    let a_dev = DeviceCsr::upload(&gpu, gen::uniform_random(10, 10, 0.3, seed(1)).view()).unwrap();
    for bad in [0, MAX_DENSE_FROM + 1] {
        assert!(matches!(SpgemmPlan::with_dense_from(&gpu, &a_dev, &a_dev, bad), Err(Error::InvalidConfig { .. })));
    }
}

#[test]
fn production_on_real_matrices() {
    let Some(gpu) = gpu_or_skip("production_on_real_matrices") else { return };
    for file in
        ["pores_1.mtx.gz", "lund_a.mtx.gz", "utm300.mtx.gz", "west0479.mtx.gz", "well1850.mtx.gz", "add32.mtx.gz"]
    {
        let a = tilesparse::suite::load_matrix(&common::data_path(file)).unwrap();
        check_production(&gpu, file, &a, &square_product(&a));
    }
}

/// The SpGEMM suite matrices (A^2), from the folder the GPU bundle carries (TILESPARSE_MATRICES).
#[test]
fn production_on_the_suite_matrices() {
    let Some(gpu) = gpu_or_skip("production_on_the_suite_matrices") else { return };
    let Some(dir) = common::matrices_dir("production_on_the_suite_matrices") else { return };
    for file in ["4elt.mtx.gz", "copter2.mtx.gz", "email-Enron.mtx.gz", "case_ACTIVSg70k_ybus_im.mtx.gz"] {
        let a = tilesparse::suite::load_matrix(&dir.join(file)).unwrap();
        check_production(&gpu, file, &a, &a);
    }
}

/// Entries whose products cancel to exactly 0 are kept, as cuSPARSE and sprs keep them. The exact zeros are
/// checked in a C poisoned beforehand (a zeroed or reused buffer would hold them already): through
/// `numeric_into`, and through the one-shot `spgemm` after [`poison_pool`].
#[test]
fn production_keeps_cancelled_entries_like_cusparse() {
    let Some(gpu) = gpu_or_skip("production_keeps_cancelled_entries_like_cusparse") else { return };
    let a = from_triplets(3, 3, &[(0, 0, 1.0), (0, 1, 1.0), (1, 2, 0.0), (2, 0, 2.0)]);
    let b = from_triplets(3, 2, &[(0, 0, 1.0), (1, 0, -1.0), (2, 1, 5.0), (0, 1, 3.0)]);
    let (a_dev, b_dev) = (DeviceCsr::upload(&gpu, a.view()).unwrap(), DeviceCsr::upload(&gpu, b.view()).unwrap());
    poison_pool(&gpu, 5);
    let one_shot = spgemm(&gpu, &a_dev, &b_dev).unwrap().download(&gpu).unwrap();
    let mut plan = SpgemmPlan::new(&gpu, &a_dev, &b_dev).unwrap();
    let into = numeric_poisoned(&gpu, &mut plan, &a_dev, &b_dev, &oracle_pattern(&a, &b)).unwrap();
    for (what, c) in [("one-shot", &one_shot), ("into poison", &into)] {
        // Row 0: column 0 gets 1 * 1 + 1 * (-1) = 0 and stays; row 1: 0 * 5 stays.
        assert_eq!(c.get(0, 0), Some(&0.0), "{what}");
        assert_eq!(c.get(1, 1), Some(&0.0), "{what}");
        assert_eq!(c.nnz(), 5, "{what}");
        check_product(a.view(), b.view(), c).unwrap_or_else(|e| panic!("{what}: {e}"));
    }
    let c = one_shot;
    let sprs_c = &a * &b;
    assert_eq!(sprs_c.nnz(), c.nnz(), "sprs keeps them too");
    let lib = Cusparse::new(&gpu).unwrap();
    for alg in SpgemmAlg::ALL {
        let theirs = cusparse::spgemm(&gpu, &lib, &a_dev, &b_dev, alg).unwrap().download(&gpu).unwrap();
        assert_eq!(theirs.indptr().raw_storage(), c.indptr().raw_storage(), "cuSPARSE {alg:?}");
        assert_eq!(theirs.indices(), c.indices(), "cuSPARSE {alg:?}");
    }
}

/// cuSPARSE's SpGEMM through our wrapper agrees with the oracle (the baseline is checked, not assumed).
#[test]
fn cusparse_spgemm_baseline_matches_the_oracle() {
    let Some(gpu) = gpu_or_skip("cusparse_spgemm_baseline_matches_the_oracle") else { return };
    let lib = Cusparse::new(&gpu).unwrap();
    let a = gen::power_law(700, 600, 9.0, 1.7, seed(51));
    let b = gen::uniform_random(600, 900, 0.01, seed(52));
    let (a_dev, b_dev) = (DeviceCsr::upload(&gpu, a.view()).unwrap(), DeviceCsr::upload(&gpu, b.view()).unwrap());
    for alg in SpgemmAlg::ALL {
        let c = cusparse::spgemm(&gpu, &lib, &a_dev, &b_dev, alg).unwrap().download(&gpu).unwrap();
        check_product(a.view(), b.view(), &c).unwrap_or_else(|e| panic!("cuSPARSE {alg:?}: {e}"));
    }
}

/// The plan is reused for new values on the same patterns (a new C, and into an existing C), and refuses
/// operands of another pattern with a typed error, never a wrong C.
#[test]
fn production_plan_reuse_and_pattern_checks() {
    let Some(gpu) = gpu_or_skip("production_plan_reuse_and_pattern_checks") else { return };
    let lens: Vec<usize> = (0..90).map(|i| 1 + (i * 37) % 900).collect();
    let (a, b) = binned_problem(&lens, 1000, 40_000, 12, seed(61));
    let (a_dev, b_dev) = (DeviceCsr::upload(&gpu, a.view()).unwrap(), DeviceCsr::upload(&gpu, b.view()).unwrap());
    let mut plan = SpgemmPlan::new(&gpu, &a_dev, &b_dev).unwrap();
    let mut c_dev = plan.numeric(&gpu, &a_dev, &b_dev).unwrap();
    check_product(a.view(), b.view(), &c_dev.download(&gpu).unwrap()).unwrap();
    // New values, same patterns.
    let a2 = with_new_values(&a, seed(62));
    let b2 = with_new_values(&b, seed(63));
    let (a2_dev, b2_dev) = (DeviceCsr::upload(&gpu, a2.view()).unwrap(), DeviceCsr::upload(&gpu, b2.view()).unwrap());
    let c2 = plan.numeric(&gpu, &a2_dev, &b2_dev).unwrap().download(&gpu).unwrap();
    check_product(a2.view(), b2.view(), &c2).unwrap();
    plan.numeric_into(&gpu, &a2_dev, &b_dev, &mut c_dev).unwrap();
    check_product(a2.view(), b.view(), &c_dev.download(&gpu).unwrap()).unwrap();
    // Another pattern with the same shape and nnz: one entry of A moved to a column not in its row.
    let mut moved = a.to_dense();
    let row = lens.iter().position(|&l| l > 50).unwrap();
    let from = (0..a.cols()).find(|&j| moved[[row, j]] != 0.0).unwrap();
    let to = (0..a.cols()).find(|&j| moved[[row, j]] == 0.0).unwrap();
    moved[[row, to]] = moved[[row, from]];
    moved[[row, from]] = 0.0;
    let moved = CsMat::csr_from_dense(moved.view(), 0.0);
    assert_eq!(moved.nnz(), a.nnz());
    let moved_dev = DeviceCsr::upload(&gpu, moved.view()).unwrap();
    // The plan keeps a fingerprint of each operand's structure: a moved entry is refused, whatever the rows.
    match plan.numeric(&gpu, &moved_dev, &b_dev) {
        Err(Error::PatternMismatch(_)) => {}
        Ok(_) => panic!("a plan reused for another pattern of the same shape and nnz must be refused"),
        Err(e) => panic!("expected PatternMismatch, got {e}"),
    }
    let mut c_moved = plan.numeric(&gpu, &a_dev, &b_dev).unwrap();
    assert!(matches!(plan.numeric_into(&gpu, &moved_dev, &b_dev, &mut c_moved), Err(Error::PatternMismatch(_))));
    // Another nnz or shape: refused before any launch.
    let other = DeviceCsr::upload(&gpu, gen::uniform_random(90, 1000, 0.02, seed(63)).view()).unwrap();
    assert!(matches!(plan.numeric(&gpu, &other, &b_dev), Err(Error::PatternMismatch(_))));
    let wrong_c = DeviceCsr::upload(&gpu, gen::uniform_random(90, 40_000, 0.001, seed(64)).view()).unwrap();
    let mut wrong_c = wrong_c;
    assert!(matches!(plan.numeric_into(&gpu, &a_dev, &b_dev, &mut wrong_c), Err(Error::ShapeMismatch(_))));
    // The plan still works after the refusals.
    poison_pool(&gpu, plan.nnz());
    let c3 = plan.numeric(&gpu, &a_dev, &b_dev).unwrap().download(&gpu).unwrap();
    check_product(a.view(), b.view(), &c3).unwrap();
}

#[test]
fn production_shape_errors() {
    let Some(gpu) = gpu_or_skip("production_shape_errors") else { return };
    let a = DeviceCsr::upload(&gpu, gen::uniform_random(10, 20, 0.2, seed(1)).view()).unwrap();
    let b = DeviceCsr::upload(&gpu, gen::uniform_random(21, 5, 0.2, seed(2)).view()).unwrap();
    assert!(matches!(spgemm(&gpu, &a, &b), Err(Error::ShapeMismatch(_))));
    assert!(matches!(SpgemmPlan::new(&gpu, &a, &b), Err(Error::ShapeMismatch(_))));
}

/// Out of device memory is a typed error, and the device is usable again afterwards.
#[test]
fn production_out_of_memory_is_an_error() {
    let Some(gpu) = gpu_or_skip("production_out_of_memory_is_an_error") else { return };
    // C = A * B has about 16.7 M entries (134 MB); A and B are on the device before memory is exhausted.
    let a = gen::uniform_random(65536, 65536, 16.0 / 65536.0, seed(71));
    let (a_dev, b_dev) = (DeviceCsr::upload(&gpu, a.view()).unwrap(), DeviceCsr::upload(&gpu, a.view()).unwrap());
    let hog = common::exhaust_device_memory(&gpu, 32 << 20);
    let r = spgemm(&gpu, &a_dev, &b_dev);
    assert!(matches!(r, Err(Error::OutOfDeviceMemory { .. })), "expected OutOfDeviceMemory, got {:?}", r.err());
    drop(hog);
    gpu.synchronize().unwrap();
    let c = spgemm(&gpu, &a_dev, &b_dev).unwrap();
    assert!(c.nnz() > 16_000_000);
}

/// Small enough for compute-sanitizer in run-all.sh --sanitize: every bin kernel of both phases, the dense
/// bin with two column tiles, and a reused plan.
#[test]
fn sanitizer_spgemm_production() {
    let Some(gpu) = gpu_or_skip("sanitizer_spgemm_production") else { return };
    let lens: Vec<usize> = (0..40).map(|i| [0, 1, 2, 3, 5, 9, 14, 30, 60, 120, 240, 400][i % 12]).collect();
    let (a, b) = binned_problem(&lens, 600, DENSE_TILE + 3000, 30, seed(81));
    let (s, n) = check_production(&gpu, "sanitizer", &a, &b);
    assert!(s[DENSE_BIN] > 0 && n[DENSE_BIN] > 0, "the dense bin must run: {s:?} {n:?}");
    let (a_dev, b_dev) = (DeviceCsr::upload(&gpu, a.view()).unwrap(), DeviceCsr::upload(&gpu, b.view()).unwrap());
    let mut plan = SpgemmPlan::new(&gpu, &a_dev, &b_dev).unwrap();
    // Into a poisoned C: check_production's last C, freed just before, held this very product.
    let c = numeric_poisoned(&gpu, &mut plan, &a_dev, &b_dev, &oracle_pattern(&a, &b)).unwrap();
    check_product(a.view(), b.view(), &c).unwrap_or_else(|e| panic!("sanitizer, plan reused: {e} ({})", seed_note()));
}

#[test]
fn bins_match_the_cuda_table() {
    let cu = include_str!("../cuda/spgemm/plan_common.cuh");
    let start = cu.find("#define TILESPARSE_SPGEMM_BINS(X)").expect("the X-macro is in plan_common.cuh");
    let body = &cu[start..start + cu[start..].find("\n\n").expect("the X-macro ends with a blank line")];
    let rows: Vec<(u32, u32, u32)> = body
        .split("X(")
        .skip(1) // the macro's name
        .map(|p| {
            let fields: Vec<u32> = p.split(')').next().unwrap().split(',').map(|f| f.trim().parse().unwrap()).collect();
            (fields[1], fields[2], fields[3])
        })
        .collect();
    assert_eq!(rows, PLAN_BINS);
    for (bin, &(bound, threads, block)) in PLAN_BINS.iter().enumerate() {
        assert_eq!(bound as usize, 16 << bin, "bin {bin}'s bound must be 16 * 2^bin (bin_of)");
        assert!(block % threads == 0 && (threads <= 32 || threads == block), "bin {bin}: groups within a warp");
        assert_eq!(bin_of(bound as usize, MAX_DENSE_FROM), bin);
        assert_eq!(bin_of(bound as usize + 1, MAX_DENSE_FROM), bin + 1);
    }
    assert_eq!(bin_of(1, MAX_DENSE_FROM), 0);
    assert_eq!(bin_of(usize::MAX, MAX_DENSE_FROM), DENSE_BIN);
    assert_eq!(bin_of(300, 256), DENSE_BIN);
    assert_eq!(bin_of(256, 256), 4);
}

/// The audit's case: A (2 x 2) at (0,0), (0,1) and B (2 x 1) at (0,0), (1,0); the plan finds row 1 of C empty.
/// A' at (0,0), (1,1) has the same shape and nnz, and its row 1 has a product: reusing the plan used to return
/// Ok with that entry missing.
#[test]
fn a_plan_refuses_a_pattern_that_fills_a_row_it_found_empty() {
    let Some(gpu) = gpu_or_skip("a_plan_refuses_a_pattern_that_fills_a_row_it_found_empty") else { return };
    let a = from_triplets(2, 2, &[(0, 0, 1.0), (0, 1, 2.0)]);
    let moved = from_triplets(2, 2, &[(0, 0, 1.0), (1, 1, 2.0)]);
    let b = from_triplets(2, 1, &[(0, 0, 3.0), (1, 0, 4.0)]);
    let (a_dev, b_dev) = (DeviceCsr::upload(&gpu, a.view()).unwrap(), DeviceCsr::upload(&gpu, b.view()).unwrap());
    let mut plan = SpgemmPlan::new(&gpu, &a_dev, &b_dev).unwrap();
    let c = plan.numeric(&gpu, &a_dev, &b_dev).unwrap().download(&gpu).unwrap();
    check_product(a.view(), b.view(), &c).unwrap();
    let moved_dev = DeviceCsr::upload(&gpu, moved.view()).unwrap();
    assert!(matches!(plan.numeric(&gpu, &moved_dev, &b_dev), Err(Error::PatternMismatch(_))));
    // The right plan for it gives both rows.
    let c = spgemm(&gpu, &moved_dev, &b_dev).unwrap().download(&gpu).unwrap();
    assert_eq!(c.nnz(), 2);
    check_product(moved.view(), b.view(), &c).unwrap();
}

/// Memory of another `Gpu` handle (another stream, which this handle's launches would not wait for) is refused.
#[test]
fn spgemm_refuses_another_handles_operands() {
    let Some(gpu) = gpu_or_skip("spgemm_refuses_another_handles_operands") else { return };
    let other = Gpu::new(0).unwrap();
    let a = gen::uniform_random(50, 40, 0.1, seed(90));
    let (a_dev, a_other) = (DeviceCsr::upload(&gpu, a.view()).unwrap(), DeviceCsr::upload(&other, a.view()).unwrap());
    let at = a.transpose_view().to_csr();
    let at_dev = DeviceCsr::upload(&gpu, at.view()).unwrap();
    assert!(matches!(spgemm(&gpu, &a_other, &at_dev), Err(Error::WrongGpu(_))));
    assert!(matches!(SpgemmPlan::new(&other, &a_dev, &at_dev), Err(Error::WrongGpu(_))));
    let mut plan = SpgemmPlan::new(&gpu, &a_dev, &at_dev).unwrap();
    assert!(matches!(plan.numeric(&other, &a_dev, &at_dev), Err(Error::WrongGpu(_))));
    assert!(matches!(a_dev.download(&other), Err(Error::WrongGpu(_))));
    check_product(a.view(), at.view(), &plan.numeric(&gpu, &a_dev, &at_dev).unwrap().download(&gpu).unwrap()).unwrap();
}
