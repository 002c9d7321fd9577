//! The SpMM benchmark suite of NOTES.md and the runner behind `tilesparse bench spmm` and the criterion
//! benches: every figure is a ratio against cuSPARSE and cuBLAS measured in the same run.

use std::path::{Path, PathBuf};

use sprs::CsMat;

use crate::baseline::cublas::Cublas;
use crate::baseline::cusparse::{Cusparse, CusparseCsr2Csc, CusparseSpmm, HostBlockedEll, HostBsr, SpmmAlg};
use crate::cpu::oracle::{SpmmReference, Summation, POISON};
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::kernels::compiled_spmm_variants_for;
use crate::scalar::Scalar;
use crate::spmm::{
    auto_kernel, check_config, spmm, spmm_kernel, spmm_tensor_core, spmm_tensor_core_with, RangeSum, SpmmKernel,
    TensorCoreConfig, TuneOptions,
};
use crate::timing::time_op;
use crate::{gen, mtx, DeviceCsr, DeviceDense};

/// One SpMM problem: a sparse matrix and the width n of B.
pub struct SpmmProblem {
    pub name: String,
    pub a: CsMat<f32>,
    pub n: usize,
}

/// Where the real matrices are: `TILESPARSE_MATRICES`, else `../shared/matrices` beside the crate.
pub fn matrices_dir() -> PathBuf {
    std::env::var_os("TILESPARSE_MATRICES")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/matrices"))
}

/// Reads a real matrix as f32 CSR.
pub fn load_matrix(path: &Path) -> Result<CsMat<f32>> {
    let (a, _) = mtx::read_matrix_market(path)?;
    Ok(a.map(|&v| v as f32))
}

/// The real matrix `name` of the suites (`<dir>/<name>.mtx.gz`), or None after a line on stderr when the file
/// is not there (the suite then runs without it and its report says which problems ran).
pub(crate) fn load_suite_matrix(dir: &Path, name: &str) -> Result<Option<CsMat<f32>>> {
    let path = dir.join(format!("{name}.mtx.gz"));
    if !path.exists() {
        eprintln!("suite: {} not found, skipped", path.display());
        return Ok(None);
    }
    load_matrix(&path).map(Some)
}

/// The fp32 suite of issue 3. `filter` keeps problems whose name contains it. Real matrices that are not
/// found are skipped with a line on stderr (the report says which ran).
pub fn spmm_suite(filter: Option<&str>) -> Result<Vec<SpmmProblem>> {
    let keep = |name: &str| filter.is_none_or(|f| name.contains(f));
    let mut out = Vec::new();
    for &sparsity in &[0.5, 0.8, 0.9, 0.95, 0.98] {
        for &n in &[128usize, 256, 4096] {
            let name = format!("uniform_4096x4096_s{:02}_n{n}", (sparsity * 100.0) as u32);
            if keep(&name) {
                out.push(SpmmProblem { name, a: gen::uniform_random(4096, 4096, 1.0 - sparsity, 42), n });
            }
        }
    }
    for &sparsity in &[0.8, 0.9] {
        let name = format!("uniform_8192x2048_s{:02}_n128", (sparsity * 100.0) as u32);
        if keep(&name) {
            out.push(SpmmProblem { name, a: gen::uniform_random(8192, 2048, 1.0 - sparsity, 43), n: 128 });
        }
    }
    let dir = matrices_dir();
    let mut real: Vec<(String, Vec<usize>)> = Vec::new();
    for layer in ["attn_q_384x384", "ffn_in_1536x384", "ffn_out_384x1536"] {
        for s in ["70", "90", "98"] {
            real.push((format!("minilm_l0_{layer}_s{s}"), vec![256, 1024]));
        }
    }
    real.push(("email-Enron".into(), vec![32, 128]));
    real.push(("copter2".into(), vec![32, 128]));
    for (file, ns) in real {
        if !ns.iter().any(|n| keep(&format!("{file}_n{n}"))) {
            continue;
        }
        let Some(a) = load_suite_matrix(&dir, &file)? else { continue };
        for n in ns {
            let name = format!("{file}_n{n}");
            if keep(&name) {
                out.push(SpmmProblem { name, a: a.clone(), n });
            }
        }
    }
    Ok(out)
}

/// SpMM problems from the caller's Matrix Market files (`tilesparse bench spmm --matrix`), each at every width in
/// `ns`, named `<file name less .mtx[.gz]>_n<n>`; `filter` keeps names that contain it, as for the suite. Checked
/// before B or C is allocated: at least one width, no width 0, and B (k x n) and C (m x n) within the i32 element
/// offsets the kernels use.
pub fn spmm_file_problems(paths: &[PathBuf], ns: &[usize], filter: Option<&str>) -> Result<Vec<SpmmProblem>> {
    check_widths(ns)?;
    let keep = |name: &str| filter.is_none_or(|f| name.contains(f));
    let mut out = Vec::new();
    for path in paths {
        let file = path.file_name().map_or_else(|| path.display().to_string(), |f| f.to_string_lossy().into_owned());
        let stem = file.strip_suffix(".gz").unwrap_or(&file);
        let stem = stem.strip_suffix(".mtx").unwrap_or(stem).to_string();
        if !ns.iter().any(|n| keep(&format!("{stem}_n{n}"))) {
            continue;
        }
        push_widths(&mut out, &stem, &load_matrix(path)?, ns, &keep)?;
    }
    Ok(out)
}

/// SpMM problems on generated matrices (`tilesparse bench spmm --gen`), each at every width in `ns`. A spec is
/// `GENERATOR:MxK:DENSITY[:SEED[:eFRACTION]]` (seed 1 when left out), with the generators and density of
/// [`gen::by_name`], e.g. `uniform:8192x2048:0.085`; `eFRACTION` then empties that share of the rows, drawn at
/// random ([`gen::with_empty_rows`]), e.g. `powerlaw:16384x4096:0.002:7:e0.5`. The problems are named
/// `<generator>_<m>x<k>_d<density>[_seed<seed>[_e<fraction>]]_n<n>`. Checked as [`spmm_file_problems`] checks, and
/// every spec is parsed before any matrix is drawn.
pub fn spmm_generated_problems(specs: &[String], ns: &[usize], filter: Option<&str>) -> Result<Vec<SpmmProblem>> {
    check_widths(ns)?;
    let keep = |name: &str| filter.is_none_or(|f| name.contains(f));
    let parsed = specs.iter().map(|spec| parse_gen_spec(spec)).collect::<Result<Vec<_>>>()?;
    let mut out = Vec::new();
    for GenSpec { generator, m, k, density, seed, empty } in parsed {
        let mut stem = format!("{generator}_{m}x{k}_d{density}");
        if let Some(seed) = seed {
            stem.push_str(&format!("_seed{seed}"));
        }
        if let Some(empty) = empty {
            stem.push_str(&format!("_e{empty}"));
        }
        if !ns.iter().any(|n| keep(&format!("{stem}_n{n}"))) {
            continue;
        }
        let mut a = gen::by_name(generator, m, k, density, seed.unwrap_or(1))?;
        if let Some(empty) = empty {
            a = gen::with_empty_rows(&a, empty, seed.unwrap_or(1));
        }
        push_widths(&mut out, &stem, &a, ns, &keep)?;
    }
    Ok(out)
}

/// A parsed `--gen` spec ([`spmm_generated_problems`]).
struct GenSpec<'a> {
    generator: &'a str,
    m: usize,
    k: usize,
    density: f64,
    seed: Option<u64>,
    /// The share of the rows emptied after drawing.
    empty: Option<f64>,
}

/// `GENERATOR:MxK:DENSITY[:SEED[:eFRACTION]]`.
fn parse_gen_spec(spec: &str) -> Result<GenSpec<'_>> {
    let bad = |why: &str| {
        Error::Usage(format!(
            "--gen {spec}: {why} (expected GENERATOR:MxK:DENSITY[:SEED[:eFRACTION]], e.g. uniform:4096x4096:0.1)"
        ))
    };
    let parts: Vec<&str> = spec.split(':').collect();
    if !(3..=5).contains(&parts.len()) {
        return Err(bad("three to five fields separated by ':'"));
    }
    let (m, k) = parts[1].split_once('x').ok_or_else(|| bad("the shape is not MxK"))?;
    let dim = |d: &str| d.parse::<usize>().map_err(|_| bad(&format!("'{d}' is not a dimension")));
    let (m, k) = (dim(m)?, dim(k)?);
    let density = parts[2].parse::<f64>().map_err(|_| bad(&format!("'{}' is not a density", parts[2])))?;
    if !(0.0..=1.0).contains(&density) {
        return Err(bad(&format!("density {density} is not a fraction in [0, 1]")));
    }
    let seed = match parts.get(3) {
        Some(s) => Some(s.parse::<u64>().map_err(|_| bad(&format!("'{s}' is not a seed")))?),
        None => None,
    };
    let empty = match parts.get(4) {
        Some(e) => {
            let fraction = e.strip_prefix('e').and_then(|f| f.parse::<f64>().ok());
            match fraction {
                Some(f) if (0.0..=1.0).contains(&f) => Some(f),
                _ => return Err(bad(&format!("'{e}' is not eFRACTION, a share of the rows to empty in [0, 1]"))),
            }
        }
        None => None,
    };
    Ok(GenSpec { generator: parts[0], m, k, density, seed, empty })
}

/// The caller's widths: at least one, none of them 0.
fn check_widths(ns: &[usize]) -> Result<()> {
    if ns.is_empty() {
        return Err(Error::Usage("no width n of B to run the matrices at".into()));
    }
    if ns.contains(&0) {
        return Err(Error::Usage("n = 0: B and C need at least one column".into()));
    }
    Ok(())
}

/// Pushes `a` at every width in `ns` that `keep` keeps, as `<stem>_n<n>`, after checking that B (k x n) and C
/// (m x n) stay within the kernels' i32 element offsets.
fn push_widths(
    out: &mut Vec<SpmmProblem>,
    stem: &str,
    a: &CsMat<f32>,
    ns: &[usize],
    keep: &dyn Fn(&str) -> bool,
) -> Result<()> {
    for &n in ns {
        let name = format!("{stem}_n{n}");
        if !keep(&name) {
            continue;
        }
        for (rows, what) in [(a.cols(), "B"), (a.rows(), "C")] {
            if rows.checked_mul(n).is_none_or(|e| e > i32::MAX as usize) {
                return Err(Error::TooLarge(format!(
                    "{name}: {what} would be {rows} x {n} elements, past i32::MAX (the kernels' offsets)"
                )));
            }
        }
        out.push(SpmmProblem { name, a: a.clone(), n });
    }
    Ok(())
}

/// How long to measure.
#[derive(Clone, Debug)]
pub struct BenchOptions {
    pub warmup: usize,
    pub iters: usize,
    /// Time every compiled tiled variant that can run the problem (else only the selected one). The tensor-core
    /// kernels that run on the device are timed either way.
    pub all_variants: bool,
    /// Skip cuBLAS when the densified A would exceed this many bytes.
    pub cublas_limit_bytes: usize,
    /// Check every result we time against the f64 oracle ([`Check`]): C poisoned, one run, then the timed runs.
    pub verify: bool,
    /// Also choose a kernel by timing ([`crate::spmm::spmm_tune`] with its default options) and time that choice as
    /// the selected one is timed ([`SpmmReport::tuned`]).
    pub tune: bool,
    /// Also time C = ReLU(A * B + bias), a random bias per row, fused into the selected kernel and as cuSPARSE's
    /// fastest CSR algorithm followed by a bias + ReLU pass ([`SpmmReport::bias_relu`]).
    pub bias_relu: bool,
    /// Also time C = alpha * A * B + beta * C with these (alpha, beta), fused into the selected kernel and as
    /// cuSPARSE's fastest CSR algorithm with its own scalars ([`SpmmReport::scaled`]).
    pub scaled: Option<(f32, f32)>,
    /// Bench C = A^T * B instead: A is uploaded and transposed on the device ([`DeviceCsr::transpose`], its
    /// wall-clock time reported), every kernel and baseline runs on A^T as on any matrix, and cuSPARSE's SpMM with A
    /// transposed and its CSR to CSC conversion, both on A, are timed beside them ([`SpmmReport::transposed`]).
    pub transpose: bool,
    /// Also time the product with B and C column-major ([`crate::spmm::spmm_layouts`] with the selected kernel,
    /// which transposes them on the device around the row-major product) against cuSPARSE's SpMM with both
    /// column-major (`CUSPARSE_ORDER_COL`), each CSR algorithm ([`SpmmReport::col_major`]).
    pub col_major: bool,
}

impl Default for BenchOptions {
    fn default() -> Self {
        BenchOptions {
            warmup: 5,
            iters: 30,
            all_variants: true,
            cublas_limit_bytes: 4 << 30,
            verify: false,
            tune: false,
            bias_relu: false,
            scaled: None,
            transpose: false,
            col_major: false,
        }
    }
}

/// A timed entry: a name and its median event time, or why it did not run; and, where the bench verifies, how its
/// result compared with the f64 oracle.
#[derive(Clone, Debug)]
pub struct Entry {
    pub name: String,
    pub ms: std::result::Result<f64, String>,
    pub check: Option<Check>,
}

/// The fastest entry that ran and did not fail its check.
pub(crate) fn fastest(entries: &[Entry]) -> Option<&Entry> {
    entries
        .iter()
        .filter(|e| e.check.as_ref().is_none_or(Check::passed))
        .filter_map(|e| e.ms.as_ref().ok().map(|ms| (e, *ms)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(e, _)| e)
}

impl Entry {
    /// The median of a timing, or the error that stopped it.
    pub(crate) fn timed(name: String, r: Result<crate::timing::Timings>) -> Entry {
        Entry { name, ms: r.map(|t| t.median_ms()).map_err(|e| e.to_string()), check: None }
    }

    /// An entry that did not run, and why.
    pub(crate) fn failed(name: String, why: String) -> Entry {
        Entry { name, ms: Err(why), check: None }
    }
}

/// One result against the f64 oracle ([`SpmmReference`]), with the bound of the way its kernel sums.
#[derive(Clone, Debug, PartialEq)]
pub struct Check {
    /// Elements of C outside their bound (an unwritten element keeps the poison and counts here).
    pub mismatches: usize,
    /// The largest error over its bound: 0 when exact, infinite for a non-finite mismatch.
    pub worst: f64,
    /// The first mismatch, as `C[row][column]: got ..., want ...`.
    pub first: Option<String>,
}

impl Check {
    /// Every element within its bound.
    pub fn passed(&self) -> bool {
        self.mismatches == 0
    }

    /// `got` (C, `n` columns, as stored) against `reference` with `summation`'s bound.
    pub fn of<T: Scalar>(reference: &SpmmReference, got: &[T], n: usize, summation: Summation) -> Result<Check> {
        let bound = reference
            .bound(summation)
            .ok_or_else(|| Error::Verification(format!("no {summation:?} bound for {} results", T::DTYPE)))?;
        let cmp = reference.compare(got, summation).expect("the bound exists");
        // Passing pairs of NaN or Inf count as exact in the comparison, so an infinite error is a mismatch (its
        // ratio is NaN under an infinite bound, which the comparison's largest ratio passes over).
        let worst = if cmp.max_abs_err.is_infinite() { f64::INFINITY } else { cmp.worst_ratio };
        let at = |i: usize| (i / n.max(1), i % n.max(1));
        let first = cmp.first_mismatch.map(|(i, g, w)| {
            let (r, c) = at(i);
            format!("C[{r}][{c}]: got {g:e}, want {w:e}, bound {:.3e}", bound[i])
        });
        Ok(Check { mismatches: cmp.mismatches, worst, first })
    }
}

/// Poisons C, runs `op` once and checks C against `reference` ([`Check::of`]).
fn poisoned_run<T: Scalar>(
    gpu: &Gpu,
    reference: &SpmmReference,
    c: &mut DeviceDense<T>,
    summation: Summation,
    op: &mut impl FnMut(&mut DeviceDense<T>) -> Result<()>,
) -> Result<Check> {
    c.fill(gpu, T::from_f64(POISON))?;
    op(c)?;
    Check::of(reference, &c.download(gpu)?, c.cols(), summation)
}

/// [`time_op`] over `op`, first checked once against `reference` where there is one ([`poisoned_run`]).
fn measure<T: Scalar>(
    gpu: &Gpu,
    opts: &BenchOptions,
    reference: Option<&SpmmReference>,
    c: &mut DeviceDense<T>,
    name: String,
    summation: Summation,
    mut op: impl FnMut(&mut DeviceDense<T>) -> Result<()>,
) -> Entry {
    let check = match reference.map(|r| poisoned_run(gpu, r, c, summation, &mut op)).transpose() {
        Ok(check) => check,
        Err(e) => return Entry::failed(name, e.to_string()),
    };
    Entry { check, ..Entry::timed(name, time_op(gpu, opts.warmup, opts.iters, || op(c))) }
}

/// One problem's figures.
#[derive(Clone, Debug)]
pub struct SpmmReport {
    pub problem: String,
    pub m: usize,
    pub k: usize,
    pub n: usize,
    pub nnz: usize,
    pub variants: Vec<Entry>,
    pub selected: Entry,
    pub cusparse: Vec<Entry>,
    /// cuSPARSE's SpMM on A in BSR and in Blocked-ELL at each block size tried (`blocked_baselines`), failures
    /// included; empty where no block size qualifies. Beside the CSR algorithms, not among them: `best_cusparse` is
    /// the CSR algorithms' best.
    pub cusparse_blocked: Vec<BlockedEntry>,
    pub cublas: Entry,
    /// max |ours - cuSPARSE| / max |cuSPARSE| for the selected variant: a sanity check, not the test.
    pub agreement: f64,
    /// Where the bench tunes ([`BenchOptions::tune`]): the tuned kernel timed as `selected` is, and the tuning's
    /// host time in milliseconds.
    pub tuned: Option<(Entry, f64)>,
    /// Where the bench times the epilogue ([`BenchOptions::bias_relu`]): C = ReLU(A * B + bias) both ways.
    pub bias_relu: Option<BiasReluReport>,
    /// Where the bench times the scalars ([`BenchOptions::scaled`]): C = alpha * A * B + beta * C both ways.
    pub scaled: Option<ScaledReport>,
    /// Where the bench takes the transpose ([`BenchOptions::transpose`]; the problem is then A^T): what a cuSPARSE
    /// user runs instead, and our transposition's time.
    pub transposed: Option<TransposedReport>,
    /// Where the bench takes B and C column-major ([`BenchOptions::col_major`]): ours and cuSPARSE's.
    pub col_major: Option<ColMajorReport>,
}

/// C = A * B with B and C column-major, both ways ([`BenchOptions::col_major`]).
#[derive(Clone, Debug)]
pub struct ColMajorReport {
    /// [`crate::spmm::spmm_layouts`] with the selected kernel: B transposed, the product, C transposed.
    pub ours: Entry,
    /// cuSPARSE's SpMM with B and C column-major, each CSR algorithm (some refuse it).
    pub cusparse: Vec<Entry>,
}

/// C = A^T * B as a cuSPARSE user runs it, beside our transposition ([`BenchOptions::transpose`]).
#[derive(Clone, Debug)]
pub struct TransposedReport {
    /// [`DeviceCsr::transpose`] of A after its upload, wall-clock milliseconds, one run.
    pub transpose_ms: f64,
    /// cuSPARSE's CSR to CSC conversion of A ([`CusparseCsr2Csc`]), event-timed.
    pub csr2csc: Entry,
    /// cuSPARSE's SpMM with A transposed ([`CusparseSpmm::new_transposed`]), each CSR algorithm.
    pub cusparse: Vec<Entry>,
}

impl SpmmReport {
    /// The fastest of cuSPARSE's SpMM with A transposed / our selected time on A^T.
    pub fn speedup_vs_transposed(&self) -> Option<f64> {
        let t = self.transposed.as_ref()?;
        Some(fastest(&t.cusparse)?.ms.as_ref().ok()? / self.selected.ms.as_ref().ok()?)
    }

    /// The fastest of cuSPARSE's SpMM with B and C column-major / ours with both column-major.
    pub fn speedup_col_major(&self) -> Option<f64> {
        let r = self.col_major.as_ref()?;
        Some(fastest(&r.cusparse)?.ms.as_ref().ok()? / r.ours.ms.as_ref().ok()?)
    }

    /// Our time with B and C column-major / the selected kernel's row-major time: what the transpositions cost.
    pub fn col_major_cost(&self) -> Option<f64> {
        Some(self.col_major.as_ref()?.ours.ms.as_ref().ok()? / self.selected.ms.as_ref().ok()?)
    }

    /// After how many products transposing once and multiplying by A^T has cost less than cuSPARSE's SpMM with A
    /// transposed; None where ours is not faster per product.
    pub fn transposed_pays_after(&self) -> Option<f64> {
        let t = self.transposed.as_ref()?;
        let (theirs, ours) = (*fastest(&t.cusparse)?.ms.as_ref().ok()?, *self.selected.ms.as_ref().ok()?);
        (theirs > ours).then(|| (t.transpose_ms / (theirs - ours)).ceil())
    }
}

/// C = alpha * A * B + beta * C timed two ways on one problem, each with its own fused scalars.
#[derive(Clone, Debug)]
pub struct ScaledReport {
    pub alpha: f32,
    pub beta: f32,
    /// The selected kernel with the scalars in its epilogue ([`crate::spmm_kernel_with`]), checked against the f64
    /// oracle's alpha * A * B + beta * C (one run on the starting C) where the bench verifies.
    pub ours: Entry,
    /// cuSPARSE's fastest CSR algorithm on this problem, with the same scalars ([`CusparseSpmm::run_scaled`]).
    pub cusparse: Entry,
}

impl ScaledReport {
    /// cuSPARSE's time / ours.
    pub fn speedup(&self) -> Option<f64> {
        Some(self.cusparse.ms.as_ref().ok()? / self.ours.ms.as_ref().ok()?)
    }
}

/// C = ReLU(A * B + bias) timed two ways on one problem: what a user of this library runs, and what a user of
/// cuSPARSE runs, whose SpMM has no epilogue.
#[derive(Clone, Debug)]
pub struct BiasReluReport {
    /// The selected kernel with its fused epilogue ([`crate::spmm_kernel_bias_relu`]), checked against the f64
    /// oracle's ReLU(A * B + bias) where the bench verifies.
    pub fused: Entry,
    /// cuSPARSE's fastest CSR algorithm on this problem, then the bias + ReLU pass over C
    /// ([`CusparseSpmm::run_bias_relu`]); not checked (cuSPARSE's results never are: see `agreement`).
    pub unfused: Entry,
}

impl BiasReluReport {
    /// The unfused time / the fused one.
    pub fn speedup(&self) -> Option<f64> {
        Some(self.unfused.ms.as_ref().ok()? / self.fused.ms.as_ref().ok()?)
    }
}

impl SpmmReport {
    /// GFLOP/s of a run of `ms` milliseconds (2 * nnz * n flops).
    pub fn gflops(&self, ms: f64) -> f64 {
        2.0 * self.nnz as f64 * self.n as f64 / ms / 1e6
    }
    /// The fastest of our variants.
    pub fn best_variant(&self) -> Option<&Entry> {
        fastest(&self.variants)
    }
    /// The fastest cuSPARSE algorithm.
    pub fn best_cusparse(&self) -> Option<&Entry> {
        fastest(&self.cusparse)
    }
    /// cuSPARSE best time / our selected time.
    pub fn speedup_vs_cusparse(&self) -> Option<f64> {
        Some(self.best_cusparse()?.ms.as_ref().ok()? / self.selected.ms.as_ref().ok()?)
    }
    /// The fastest block size of cuSPARSE's SpMM on A in `format`, else its first failure; None where no block
    /// size was tried.
    pub fn best_blocked(&self, format: BlockedFormat) -> Option<&Entry> {
        let tried = self.cusparse_blocked.iter().filter(|b| b.format == format).map(|b| &b.entry);
        let first = tried.clone().next();
        let ran = tried.filter_map(|e| e.ms.as_ref().ok().map(|ms| (e, *ms)));
        ran.min_by(|x, y| x.1.total_cmp(&y.1)).map(|(e, _)| e).or(first)
    }
    /// cuSPARSE's fastest time in `format` / our selected time (None where no block size ran).
    pub fn speedup_vs_blocked(&self, format: BlockedFormat) -> Option<f64> {
        Some(self.best_blocked(format)?.ms.as_ref().ok()? / self.selected.ms.as_ref().ok()?)
    }
    /// cuSPARSE best time / the tuned kernel's time.
    pub fn tuned_vs_cusparse(&self) -> Option<f64> {
        let (tuned, _) = self.tuned.as_ref()?;
        Some(self.best_cusparse()?.ms.as_ref().ok()? / tuned.ms.as_ref().ok()?)
    }
    /// cuBLAS time / our selected time.
    pub fn speedup_vs_cublas(&self) -> Option<f64> {
        Some(self.cublas.ms.as_ref().ok()? / self.selected.ms.as_ref().ok()?)
    }
}

/// Measures our variants, the selected config, every cuSPARSE CSR algorithm and cuBLAS on one problem.
pub fn bench_spmm<T: Scalar>(gpu: &Gpu, problem: &SpmmProblem, opts: &BenchOptions) -> Result<SpmmReport> {
    let given: CsMat<T> = gen::convert(&problem.a);
    // With `transpose`: A as given on the device (`source`), and A^T as the problem: sprs's on the host (the oracle,
    // the blocked baselines, cuBLAS), ours on the device, its transposition timed.
    let source = if opts.transpose { Some(DeviceCsr::upload(gpu, given.view())?) } else { None };
    let a_host = if opts.transpose { given.transpose_view().to_csr() } else { given };
    let (m, k, n) = (a_host.rows(), a_host.cols(), problem.n);
    let b_host: Vec<T> = gen::dense_matrix(k, n, 7).into_iter().map(T::from_f32).collect();
    let (a, transpose_ms) = match &source {
        Some(given) => {
            gpu.synchronize()?;
            let start = std::time::Instant::now();
            let at = given.transpose(gpu)?.into_matrix();
            gpu.synchronize()?;
            (at, start.elapsed().as_secs_f64() * 1e3)
        }
        None => (DeviceCsr::upload(gpu, a_host.view())?, f64::NAN),
    };
    let b = DeviceDense::upload(gpu, k, n, &b_host)?;
    let mut c = DeviceDense::<T>::zeros(gpu, m, n)?;
    let reference = opts.verify.then(|| SpmmReference::new(a_host.view(), &b_host, n));
    let reference = reference.as_ref();

    let selected_kernel = auto_kernel(gpu, &a, n)?;
    let mut variants = Vec::new();
    if opts.all_variants {
        for config in compiled_spmm_variants_for(T::DTYPE) {
            if check_config(config, T::DTYPE, m, k, n).is_ok() {
                let name = config.kernel_name();
                let op = |c: &mut DeviceDense<T>| spmm(gpu, &a, &b, c, config);
                variants.push(measure(gpu, opts, reference, &mut c, name, Summation::Fma, op));
            }
        }
    }
    let tensor_cores = TensorCoreConfig::all(T::DTYPE);
    if !tensor_cores.is_empty() {
        for config in tensor_cores.into_iter().filter(|c| c.runs_on(gpu.info())) {
            // The blocks are built once per layout and kept with A; the fill is read from the mma-order ones of the
            // config's window height (the wgmma kernel's hold the same entries in another order).
            let fill = crate::spmm::tensor_core::block_fill(gpu, &a, config.window as usize)?;
            let summation = SpmmKernel::TensorCore(config).summation();
            let plan = crate::spmm::tensor_core::split_plan(gpu, &a, &config, n)?;
            let name = if plan.ranges == 1 {
                format!("{config} (blocks {:.1}% full)", 100.0 * fill)
            } else {
                let sum = if plan.clusters_fit() { "clusters" } else { "fix-up" };
                let (ranges, grid, capacity) = (plan.ranges, plan.grid, plan.cluster_capacity);
                format!(
                    "{config} (blocks {:.1}% full, {ranges} ranges, {grid} clusters, {capacity} fit: {sum})",
                    100.0 * fill
                )
            };
            let skipped = crate::spmm::tensor_core::skipped_empty_windows(gpu, &a, n, &config)?;
            let empty = crate::spmm::tensor_core::empty_windows(gpu, &a, &config)?;
            let name = if skipped > 0 { format!("{name}, {skipped} empty windows left out") } else { name };
            let op = |c: &mut DeviceDense<T>| spmm_tensor_core(gpu, &a, &b, c, &config);
            variants.push(measure(gpu, opts, reference, &mut c, name, summation, op));
            if plan.ranges == 1 && empty > 0 {
                // The other way with the empty windows, whichever the rule took.
                let (leave, name) = if skipped > 0 {
                    (false, format!("{config}+walking {empty} empty windows"))
                } else {
                    (true, format!("{config}+leaving out {empty} empty windows"))
                };
                let op = |c: &mut DeviceDense<T>| {
                    crate::spmm::spmm_tensor_core_empty_windows(gpu, &a, &b, c, &config, leave).map(|_| ())
                };
                variants.push(measure(gpu, opts, reference, &mut c, name, summation, op));
            }
            if plan.ranges == 1 {
                continue;
            }
            // Both ways of adding the ranges, whichever Auto took (clusters only where the device has them).
            for (sum, name) in [(RangeSum::FixUp, "fix-up"), (RangeSum::Cluster, "clusters")] {
                if sum == RangeSum::Cluster && (!gpu.info().has_clusters() || config.is_wgmma()) {
                    continue;
                }
                let op = |c: &mut DeviceDense<T>| spmm_tensor_core_with(gpu, &a, &b, c, &config, sum);
                variants.push(measure(gpu, opts, reference, &mut c, format!("{config}+{name}"), summation, op));
            }
        }
    }
    let selected = measure(
        gpu,
        opts,
        reference,
        &mut c,
        selected_kernel.to_string(),
        selected_kernel.summation(),
        |c: &mut DeviceDense<T>| spmm_kernel(gpu, &a, &b, c, &selected_kernel),
    );
    let ours = c.download(gpu)?;
    let tuned = opts.tune.then(|| match crate::spmm::spmm_tune(gpu, &a, &b, &mut c, &TuneOptions::default()) {
        Ok(t) => {
            let kernel = t.kernel;
            let op = |c: &mut DeviceDense<T>| spmm_kernel(gpu, &a, &b, c, &kernel);
            let entry = measure(gpu, opts, reference, &mut c, kernel.to_string(), kernel.summation(), op);
            (entry, t.elapsed.as_secs_f64() * 1e3)
        }
        Err(e) => (Entry::failed("tuned".into(), e.to_string()), f64::NAN),
    });

    let lib = Cusparse::new(gpu)?;
    let mut cusparse = Vec::new();
    let mut cusparse_c: Option<Vec<T>> = None;
    for alg in SpmmAlg::ALL {
        let mut c2 = DeviceDense::<T>::zeros(gpu, m, n)?;
        let r = CusparseSpmm::new(gpu, &lib, &a, &b, &mut c2, alg)
            .and_then(|mut op| time_op(gpu, opts.warmup, opts.iters, || op.run(gpu)));
        let ok = r.is_ok();
        cusparse.push(Entry::timed(format!("cusparse_{}", alg.name()), r));
        if ok && cusparse_c.is_none() {
            cusparse_c = Some(c2.download(gpu)?);
        }
    }
    let ops = EpilogueOps { lib: &lib, a: &a, b: &b, kernel: &selected_kernel, reference };
    let bias_relu = if opts.bias_relu { Some(bias_relu_both_ways(gpu, &ops, &cusparse, opts)?) } else { None };
    let scaled = match opts.scaled {
        Some(scalars) => Some(scaled_both_ways(gpu, &ops, &cusparse, opts, scalars)?),
        None => None,
    };
    let transposed = match &source {
        Some(given) => Some(transposed_baselines(gpu, &lib, given, &b, opts, transpose_ms)?),
        None => None,
    };
    let col_major = if opts.col_major {
        Some(col_major_both_ways(gpu, &lib, &a, &b, &selected_kernel, reference, opts)?)
    } else {
        None
    };
    let cusparse_blocked = blocked_baselines(gpu, &lib, &a_host, &b, opts)?;
    let agreement = cusparse_c.map_or(f64::NAN, |r| {
        let scale = r.iter().map(|v| v.to_f64().abs()).fold(0.0, f64::max).max(f64::MIN_POSITIVE);
        r.iter().zip(&ours).map(|(x, y)| (x.to_f64() - y.to_f64()).abs()).fold(0.0, f64::max) / scale
    });

    let dense_bytes = m * k * std::mem::size_of::<T>();
    let cublas = if dense_bytes > opts.cublas_limit_bytes {
        Entry::failed(
            "cublas_gemm".into(),
            format!("skipped: dense A would be {:.1} GiB", dense_bytes as f64 / (1u64 << 30) as f64),
        )
    } else {
        let r = (|| {
            let lib = Cublas::new(gpu)?;
            let dense_a = densify(&a_host);
            let a_dense = gpu.stream().clone_htod(&dense_a).map_err(Error::driver("uploading dense A", dense_bytes))?;
            let mut c3 = DeviceDense::<T>::zeros(gpu, m, n)?;
            time_op(gpu, opts.warmup, opts.iters, || lib.gemm_row_major(gpu, &a_dense, &b, &mut c3))
        })();
        Entry::timed("cublas_gemm".into(), r)
    };
    Ok(SpmmReport {
        problem: if opts.transpose { format!("{}^T", problem.name) } else { problem.name.clone() },
        m,
        k,
        n,
        nnz: a.nnz(),
        variants,
        selected,
        cusparse,
        cusparse_blocked,
        cublas,
        agreement,
        tuned,
        bias_relu,
        scaled,
        transposed,
        col_major,
    })
}

/// [`ColMajorReport`]: B (`b`, row-major k x n, turned column-major) and C column-major, by [`crate::spmm::spmm_layouts`] with
/// `kernel` (first checked against `reference` where there is one: C poisoned, read back and turned row-major) and
/// by cuSPARSE's SpMM, each CSR algorithm.
fn col_major_both_ways<T: Scalar>(
    gpu: &Gpu,
    lib: &Cusparse,
    a: &DeviceCsr<T>,
    b: &DeviceDense<T>,
    kernel: &SpmmKernel,
    reference: Option<&SpmmReference>,
    opts: &BenchOptions,
) -> Result<ColMajorReport> {
    use crate::spmm::{spmm_layouts, DenseLayouts};
    let (m, n) = (a.rows(), b.cols());
    // B^T and C^T, row-major: B and C column-major.
    let b = b.transpose(gpu)?;
    let mut c = DeviceDense::<T>::zeros(gpu, n, m)?;
    let layouts = DenseLayouts::COL_MAJOR;
    let op = |c: &mut DeviceDense<T>| spmm_layouts(gpu, a, &b, c, layouts, Some(kernel), Default::default());
    let check = reference.map(|reference| -> Result<Check> {
        c.fill(gpu, T::from_f64(POISON))?;
        op(&mut c)?;
        let got = c.transpose(gpu)?.download(gpu)?;
        Check::of(reference, &got, n, kernel.summation())
    });
    let ours = match check.transpose() {
        Ok(check) => {
            let r = time_op(gpu, opts.warmup, opts.iters, || op(&mut c).map(|_| ()));
            Entry { check, ..Entry::timed(format!("{kernel} (B, C column-major)"), r) }
        }
        Err(e) => Entry::failed(format!("{kernel} (B, C column-major)"), e.to_string()),
    };
    let mut cusparse = Vec::new();
    for alg in SpmmAlg::ALL {
        let mut c = DeviceDense::<T>::zeros(gpu, n, m)?;
        let r = CusparseSpmm::new_with_layouts(gpu, lib, a, &b, &mut c, alg, layouts)
            .and_then(|mut op| time_op(gpu, opts.warmup, opts.iters, || op.run(gpu)));
        cusparse.push(Entry::timed(format!("cusparse_col_major_{}", alg.name()), r));
    }
    Ok(ColMajorReport { ours, cusparse })
}

/// [`TransposedReport`]: cuSPARSE's SpMM with `a` (A as given) transposed, each CSR algorithm, into a C of A^T's
/// shape, and its CSR to CSC conversion of `a`; with our transposition's time.
fn transposed_baselines<T: Scalar>(
    gpu: &Gpu,
    lib: &Cusparse,
    a: &DeviceCsr<T>,
    b: &DeviceDense<T>,
    opts: &BenchOptions,
    transpose_ms: f64,
) -> Result<TransposedReport> {
    let mut cusparse = Vec::new();
    for alg in SpmmAlg::ALL {
        let mut c = DeviceDense::<T>::zeros(gpu, a.cols(), b.cols())?;
        let r = CusparseSpmm::new_transposed(gpu, lib, a, b, &mut c, alg)
            .and_then(|mut op| time_op(gpu, opts.warmup, opts.iters, || op.run(gpu)));
        cusparse.push(Entry::timed(format!("cusparse_transposed_{}", alg.name()), r));
    }
    let r = CusparseCsr2Csc::new(gpu, lib, a).and_then(|mut op| time_op(gpu, opts.warmup, opts.iters, || op.run(gpu)));
    Ok(TransposedReport { transpose_ms, csr2csc: Entry::timed("cusparse_csr2csc".into(), r), cusparse })
}

/// What [`bias_relu_both_ways`] and [`scaled_both_ways`] run: the library, A and B on the device, the selected
/// kernel, and the oracle's A * B where the bench verifies.
struct EpilogueOps<'a, T: Scalar> {
    lib: &'a Cusparse,
    a: &'a DeviceCsr<T>,
    b: &'a DeviceDense<T>,
    kernel: &'a SpmmKernel,
    reference: Option<&'a SpmmReference>,
}

/// [`BiasReluReport`]: a random bias in [-1, 1) per row (seed 11), the fused epilogue on the selected kernel,
/// and the fastest of `cusparse`'s CSR algorithms followed by the bias + ReLU pass.
fn bias_relu_both_ways<T: Scalar>(
    gpu: &Gpu,
    ops: &EpilogueOps<'_, T>,
    cusparse: &[Entry],
    opts: &BenchOptions,
) -> Result<BiasReluReport> {
    let (a, b, kernel) = (ops.a, ops.b, ops.kernel);
    let (m, n) = (a.rows(), b.cols());
    let bias_host = gen::dense_matrix(m, 1, 11);
    let bias = crate::spmm::upload_bias(gpu, &bias_host)?;
    let reference = ops.reference.map(|r| r.bias_relu::<T>(&bias_host, n));
    let mut c = DeviceDense::<T>::zeros(gpu, m, n)?;
    let name = format!("{kernel}+bias-relu");
    let op = |c: &mut DeviceDense<T>| crate::spmm::spmm_kernel_bias_relu(gpu, a, b, &bias, c, kernel);
    let fused = measure(gpu, opts, reference.as_ref(), &mut c, name, kernel.summation(), op);
    let unfused = match fastest_csr(cusparse) {
        Some(alg) => {
            let r = CusparseSpmm::new(gpu, ops.lib, a, b, &mut c, alg)
                .and_then(|mut op| time_op(gpu, opts.warmup, opts.iters, || op.run_bias_relu(gpu, &bias)));
            Entry::timed(format!("cusparse_{}+bias-relu pass", alg.name()), r)
        }
        None => Entry::failed("cusparse+bias-relu pass".into(), "no cuSPARSE CSR algorithm ran".into()),
    };
    Ok(BiasReluReport { fused, unfused })
}

/// The fastest of cuSPARSE's CSR algorithms that ran, from their entries (in [`SpmmAlg::ALL`]'s order).
fn fastest_csr(cusparse: &[Entry]) -> Option<SpmmAlg> {
    let ran = SpmmAlg::ALL.iter().zip(cusparse).filter_map(|(alg, e)| e.ms.as_ref().ok().map(|ms| (*alg, *ms)));
    ran.min_by(|x, y| x.1.total_cmp(&y.1)).map(|(alg, _)| alg)
}

/// [`ScaledReport`]: C starting as random values in [-1, 1) (seed 12), the selected kernel with `(alpha, beta)` in its
/// epilogue and the fastest of `cusparse`'s CSR algorithms with the same scalars. Each timed run reads the last
/// one's C (the same work); the check, where the bench verifies, is one run on the starting C.
fn scaled_both_ways<T: Scalar>(
    gpu: &Gpu,
    ops: &EpilogueOps<'_, T>,
    cusparse: &[Entry],
    opts: &BenchOptions,
    (alpha, beta): (f32, f32),
) -> Result<ScaledReport> {
    let (a, b, kernel) = (ops.a, ops.b, ops.kernel);
    let (m, n) = (a.rows(), b.cols());
    let c0: Vec<T> = gen::dense_matrix(m, n, 12).into_iter().map(T::from_f32).collect();
    let epilogue = crate::spmm::SpmmEpilogue::scaled(alpha, beta);
    let op = |c: &mut DeviceDense<T>| crate::spmm::spmm_kernel_with(gpu, a, b, c, kernel, epilogue);
    let name = format!("{kernel} alpha {alpha} beta {beta}");
    // The check: one run on the starting C (where beta is not 0 the timed runs read each other's C).
    let checked = ops.reference.map(|reference| -> Result<Check> {
        let reference = reference.epilogue::<T>(alpha, beta, &c0, None, n);
        let mut c = DeviceDense::upload(gpu, m, n, &c0)?;
        op(&mut c)?;
        Check::of(&reference, &c.download(gpu)?, n, kernel.summation())
    });
    let check = match checked.transpose() {
        Ok(check) => check,
        Err(e) => {
            let not_run = Entry::failed("cusparse scaled".into(), "not run: ours failed".into());
            return Ok(ScaledReport { alpha, beta, ours: Entry::failed(name, e.to_string()), cusparse: not_run });
        }
    };
    let mut c = DeviceDense::upload(gpu, m, n, &c0)?;
    let ours = Entry { check, ..Entry::timed(name, time_op(gpu, opts.warmup, opts.iters, || op(&mut c))) };
    let cusparse = match fastest_csr(cusparse) {
        Some(alg) => {
            let mut c = DeviceDense::upload(gpu, m, n, &c0)?;
            let r = CusparseSpmm::new(gpu, ops.lib, a, b, &mut c, alg)
                .and_then(|mut op| time_op(gpu, opts.warmup, opts.iters, || op.run_scaled(gpu, alpha, beta)));
            Entry::timed(format!("cusparse_{} alpha {alpha} beta {beta}", alg.name()), r)
        }
        None => Entry::failed("cusparse scaled".into(), "no cuSPARSE CSR algorithm ran".into()),
    };
    Ok(ScaledReport { alpha, beta, ours, cusparse })
}

/// Block sizes the blocked baselines try (`blocked_baselines`).
pub const BLOCKED_SIZES: [usize; 5] = [2, 4, 8, 16, 32];
/// The least share of its blocks' slots A must fill for the blocked baselines to try a block size: below it BSR
/// multiplies more padding than entries, and a user would not store A so.
pub const BSR_MIN_FILL: f64 = 0.5;
/// The least share of the Blocked-ELL slots (the padding of rows of blocks shorter than the longest included) A
/// must fill for that baseline to try a block size: at most twice BSR's padding, and at most 4 slots per entry.
pub const BLOCKED_ELL_MIN_FILL: f64 = 0.25;

/// cuSPARSE's sparse formats for block-sparse A, timed beside its CSR algorithms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockedFormat {
    /// Block sparse row (`CusparseSpmm::new_bsr`, `CUSPARSE_SPMM_BSR_ALG1`).
    Bsr,
    /// Blocked-ELL (`CusparseSpmm::new_blocked_ell`, `CUSPARSE_SPMM_BLOCKED_ELL_ALG1`), cuSPARSE's tensor-core
    /// format.
    BlockedEll,
}

impl BlockedFormat {
    pub fn name(self) -> &'static str {
        match self {
            BlockedFormat::Bsr => "BSR",
            BlockedFormat::BlockedEll => "Blocked-ELL",
        }
    }
}

/// One block size of a blocked baseline: `entry` is named `cusparse_BSR_b<block>` or `cusparse_BELL_b<block>`.
#[derive(Clone, Debug)]
pub struct BlockedEntry {
    pub format: BlockedFormat,
    pub block: usize,
    pub entry: Entry,
}

/// cuSPARSE's SpMM with A in BSR and in Blocked-ELL at each block size of [`BLOCKED_SIZES`] that divides both of
/// A's dimensions and whose blocks A fills at least [`BSR_MIN_FILL`] (Blocked-ELL also [`BLOCKED_ELL_MIN_FILL`] of
/// its padded slots): every one tried, a failure (cuSPARSE refusing a type or a block size) as its error. The
/// conversions are not timed.
fn blocked_baselines<T: Scalar>(
    gpu: &Gpu,
    lib: &Cusparse,
    a: &CsMat<T>,
    b: &DeviceDense<T>,
    opts: &BenchOptions,
) -> Result<Vec<BlockedEntry>> {
    let mut tried = Vec::new();
    for block in BLOCKED_SIZES {
        let Ok(bsr) = HostBsr::from_csr(a.view(), block) else { continue };
        if a.nnz() == 0 || bsr.fill(a.nnz()) < BSR_MIN_FILL {
            continue;
        }
        let mut c = DeviceDense::<T>::zeros(gpu, a.rows(), b.cols())?;
        let r = CusparseSpmm::new_bsr(gpu, lib, &bsr, b, &mut c)
            .and_then(|mut op| time_op(gpu, opts.warmup, opts.iters, || op.run(gpu)));
        let entry = Entry::timed(format!("cusparse_BSR_b{block}"), r);
        tried.push(BlockedEntry { format: BlockedFormat::Bsr, block, entry });
        let ell = match HostBlockedEll::from_bsr(&bsr) {
            Ok(ell) if ell.fill(a.nnz()) >= BLOCKED_ELL_MIN_FILL => ell,
            _ => continue,
        };
        drop(bsr);
        let r = CusparseSpmm::new_blocked_ell(gpu, lib, &ell, b, &mut c)
            .and_then(|mut op| time_op(gpu, opts.warmup, opts.iters, || op.run(gpu)));
        let entry = Entry::timed(format!("cusparse_BELL_b{block}"), r);
        tried.push(BlockedEntry { format: BlockedFormat::BlockedEll, block, entry });
    }
    Ok(tried)
}

/// The sparse matrix as a dense row-major array (the cuBLAS baseline's input).
pub fn densify<T: Scalar>(a: &CsMat<T>) -> Vec<T> {
    let k = a.cols();
    let mut dense = vec![T::default(); a.rows() * k];
    for (v, (i, j)) in a.iter() {
        dense[i * k + j] = *v;
    }
    dense
}

/// Geometric mean of positive values.
pub fn geomean(values: &[f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    (values.iter().map(|v| v.ln()).sum::<f64>() / values.len() as f64).exp()
}

/// A number as JSON: `null` where it is not finite (JSON has no NaN or Inf).
fn json_number(x: f32) -> String {
    if x.is_finite() {
        x.to_string()
    } else {
        "null".into()
    }
}

pub(crate) fn json_str(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

pub(crate) fn json_entry(e: &Entry) -> String {
    let check = e.check.as_ref().map_or(String::new(), |c| {
        let worst = if c.worst.is_finite() { c.worst.to_string() } else { "null".into() };
        format!(",\"check\":{{\"mismatches\":{},\"worst\":{worst}}}", c.mismatches)
    });
    match &e.ms {
        Ok(ms) => format!("{{\"name\":{},\"ms\":{ms}{check}}}", json_str(&e.name)),
        Err(why) => format!("{{\"name\":{},\"error\":{}{check}}}", json_str(&e.name), json_str(why)),
    }
}

/// The reports as JSON (one object per problem).
pub fn reports_to_json(reports: &[SpmmReport]) -> String {
    let items: Vec<String> = reports
        .iter()
        .map(|r| {
            let list = |v: &[Entry]| v.iter().map(json_entry).collect::<Vec<_>>().join(",");
            format!(
                "{{\"problem\":{},\"m\":{},\"k\":{},\"n\":{},\"nnz\":{},\"selected\":{},\"variants\":[{}],\"cusparse\":[{}],\"cusparse_bsr\":{},\"cusparse_bell\":{},\"cusparse_blocked\":[{}],\"cublas\":{},\"agreement\":{}{}{}{}{}{}}}",
                json_str(&r.problem),
                r.m,
                r.k,
                r.n,
                r.nnz,
                json_entry(&r.selected),
                list(&r.variants),
                list(&r.cusparse),
                r.best_blocked(BlockedFormat::Bsr).map_or("null".into(), json_entry),
                r.best_blocked(BlockedFormat::BlockedEll).map_or("null".into(), json_entry),
                r.cusparse_blocked.iter().map(|b| json_entry(&b.entry)).collect::<Vec<_>>().join(","),
                json_entry(&r.cublas),
                if r.agreement.is_finite() { r.agreement.to_string() } else { "null".into() },
                r.tuned.as_ref().map_or(String::new(), |(e, ms)| {
                    let ms = if ms.is_finite() { ms.to_string() } else { "null".into() };
                    format!(",\"tuned\":{},\"tuning_ms\":{ms}", json_entry(e))
                }),
                r.bias_relu.as_ref().map_or(String::new(), |f| {
                    format!(",\"bias_relu\":{{\"fused\":{},\"unfused\":{}}}", json_entry(&f.fused), json_entry(&f.unfused))
                }),
                r.scaled.as_ref().map_or(String::new(), |f| {
                    format!(
                        ",\"scaled\":{{\"alpha\":{},\"beta\":{},\"ours\":{},\"cusparse\":{}}}",
                        json_number(f.alpha),
                        json_number(f.beta),
                        json_entry(&f.ours),
                        json_entry(&f.cusparse)
                    )
                }),
                r.transposed.as_ref().map_or(String::new(), |t| {
                    format!(
                        ",\"transposed\":{{\"transpose_ms\":{},\"csr2csc\":{},\"cusparse\":[{}]}}",
                        if t.transpose_ms.is_finite() { t.transpose_ms.to_string() } else { "null".into() },
                        json_entry(&t.csr2csc),
                        list(&t.cusparse)
                    )
                }),
                r.col_major.as_ref().map_or(String::new(), |f| {
                    format!(",\"col_major\":{{\"ours\":{},\"cusparse\":[{}]}}", json_entry(&f.ours), list(&f.cusparse))
                })
            )
        })
        .collect();
    format!("[\n{}\n]\n", items.join(",\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(file: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(file)
    }

    /// A small problem's oracle and the CPU backend's C (FMA-rounded, so within every bound of f32).
    fn reference_and_c() -> (SpmmReference, Vec<f32>, usize) {
        let (m, k, n) = (37, 29, 12);
        let a = gen::uniform_random(m, k, 0.2, 3);
        let b = gen::dense_matrix(k, n, 4);
        let mut c = vec![0f32; m * n];
        crate::cpu::backend::spmm(a.view(), &b, n, &mut c);
        (SpmmReference::new(a.view(), &b, n), c, n)
    }

    #[test]
    fn a_check_passes_a_correct_c_and_names_a_wrong_or_unwritten_element() {
        let (reference, c, n) = reference_and_c();
        let ok = Check::of(&reference, &c, n, Summation::Fma).unwrap();
        assert!(ok.passed() && ok.worst <= 1.0 && ok.first.is_none(), "{ok:?}");
        assert!(Check::of(&reference, &c, n, Summation::Tf32x3).unwrap().passed());
        // An element the kernel did not write keeps the poison.
        let mut unwritten = c.clone();
        unwritten[5 * n + 7] = POISON as f32;
        let bad = Check::of(&reference, &unwritten, n, Summation::Fma).unwrap();
        assert_eq!(bad.mismatches, 1, "{bad:?}");
        assert!(bad.first.as_deref().unwrap().starts_with("C[5][7]: got -1.2345"), "{bad:?}");
        assert!(bad.worst > 1.0 && bad.worst.is_finite(), "{bad:?}");
        // Two elements off by one, in the last row.
        let mut off = c.clone();
        let last = off.len() - 1;
        for i in [last - 1, last] {
            off[i] = (reference.want()[i] + 1.0) as f32;
        }
        let bad = Check::of(&reference, &off, n, Summation::Fma).unwrap();
        assert_eq!(bad.mismatches, 2, "{bad:?}");
        assert!(bad.first.as_deref().unwrap().starts_with("C[36][10]:"), "{bad:?}");
        // NaN where the oracle has a number: infinitely wrong.
        let mut nan = c.clone();
        nan[n] = f32::NAN;
        let bad = Check::of(&reference, &nan, n, Summation::Fma).unwrap();
        assert!(bad.mismatches == 1 && bad.worst.is_infinite(), "{bad:?}");
        // f32 has no kernel that sums f16 products: an error, not a pass.
        assert!(matches!(Check::of(&reference, &c, n, Summation::TensorCoreHalf), Err(Error::Verification(_))));
    }

    #[test]
    fn the_fastest_entry_ran_and_passed_its_check() {
        let check = |mismatches| Some(Check { mismatches, worst: 0.5, first: None });
        let entries = [
            Entry { name: "wrong".into(), ms: Ok(1.0), check: check(3) },
            Entry::failed("error".into(), "out of memory".into()),
            Entry { name: "right".into(), ms: Ok(2.0), check: check(0) },
            Entry { name: "unchecked".into(), ms: Ok(3.0), check: None },
        ];
        assert_eq!(fastest(&entries).unwrap().name, "right");
        assert_eq!(fastest(&entries[3..]).unwrap().name, "unchecked");
        assert!(fastest(&entries[..2]).is_none());
        // The JSON holds each check; an infinite worst is null.
        assert_eq!(json_entry(&entries[2]), r#"{"name":"right","ms":2,"check":{"mismatches":0,"worst":0.5}}"#);
        let nan =
            Entry { check: Some(Check { mismatches: 1, worst: f64::INFINITY, first: None }), ..entries[0].clone() };
        assert_eq!(json_entry(&nan), r#"{"name":"wrong","ms":1,"check":{"mismatches":1,"worst":null}}"#);
        assert_eq!(json_entry(&entries[3]), r#"{"name":"unchecked","ms":3}"#);
    }

    #[test]
    fn file_problems_take_every_width_of_every_file() {
        let paths = [data("pores_1.mtx.gz"), data("west0479.mtx.gz")];
        let problems = spmm_file_problems(&paths, &[32, 128], None).unwrap();
        let names: Vec<&str> = problems.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["pores_1_n32", "pores_1_n128", "west0479_n32", "west0479_n128"]);
        assert_eq!(problems.iter().map(|p| p.n).collect::<Vec<_>>(), [32, 128, 32, 128]);
        let west = load_matrix(&paths[1]).unwrap();
        assert_eq!((problems[2].a.rows(), problems[2].a.cols(), problems[2].a.nnz()), (479, 479, west.nnz()));
        assert_eq!(problems[3].a.data(), west.data());
        // The filter keeps names that contain it, as for the suite.
        let kept = spmm_file_problems(&paths, &[32, 128], Some("west0479_n1")).unwrap();
        assert_eq!(kept.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), ["west0479_n128"]);
    }

    #[test]
    fn file_problems_refuse_bad_widths_before_allocating() {
        let paths = [data("pores_1.mtx.gz")];
        assert!(matches!(spmm_file_problems(&paths, &[], None), Err(Error::Usage(_))));
        assert!(matches!(spmm_file_problems(&paths, &[64, 0], None), Err(Error::Usage(_))));
        // pores_1 is 30 x 30: B and C of 30 x n elements; the first n past i32::MAX / 30 is refused.
        let edge = i32::MAX as usize / 30;
        assert_eq!(spmm_file_problems(&paths, &[edge], None).unwrap().len(), 1);
        match spmm_file_problems(&paths, &[edge + 1], None) {
            Err(Error::TooLarge(why)) => assert!(why.contains("pores_1_n") && why.contains("i32::MAX"), "{why}"),
            other => panic!("expected TooLarge, got {:?}", other.map(|p| p.len())),
        }
        assert!(spmm_file_problems(&[data("no-such-matrix.mtx")], &[8], None).is_err());
    }

    #[test]
    fn generated_problems_draw_each_spec_at_every_width() {
        let specs = ["uniform:64x32:0.25".to_string(), "pruned:16x8:0.5:7".to_string()];
        let problems = spmm_generated_problems(&specs, &[8, 40], None).unwrap();
        let names: Vec<&str> = problems.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "uniform_64x32_d0.25_n8",
                "uniform_64x32_d0.25_n40",
                "pruned_16x8_d0.5_seed7_n8",
                "pruned_16x8_d0.5_seed7_n40"
            ]
        );
        assert_eq!(problems.iter().map(|p| p.n).collect::<Vec<_>>(), [8, 40, 8, 40]);
        // The generators' own matrices, seed 1 where the spec leaves it out.
        assert_eq!(problems[1].a, gen::uniform_random(64, 32, 0.25, 1));
        assert_eq!(problems[0].a.shape(), (64, 32));
        assert_eq!(problems[2].a, gen::pruned_dense(16, 8, 0.5, 7));
        assert_eq!(problems[3].a.nnz(), 64);
        let kept = spmm_generated_problems(&specs, &[8, 40], Some("seed7_n4")).unwrap();
        assert_eq!(kept.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), ["pruned_16x8_d0.5_seed7_n40"]);
        // A fifth field empties a share of the rows of the same matrix.
        let emptied = spmm_generated_problems(&["uniform:400x32:0.25:3:e0.75".to_string()], &[8], None).unwrap();
        assert_eq!(emptied[0].name, "uniform_400x32_d0.25_seed3_e0.75_n8");
        let full = gen::uniform_random(400, 32, 0.25, 3);
        assert_eq!(emptied[0].a, gen::with_empty_rows(&full, 0.75, 3));
        let indptr = emptied[0].a.indptr();
        assert_eq!(indptr.to_proper().windows(2).filter(|w| w[0] == w[1]).count(), 300);
    }

    #[test]
    fn generated_problems_refuse_bad_specs_before_drawing() {
        let run = |spec: &str, ns: &[usize]| spmm_generated_problems(&[spec.to_string()], ns, None).map(|p| p.len());
        for spec in ["uniform", "uniform:64x64", "uniform:64:0.1", "uniform:x64:0.1", "uniform:64x64:abc"] {
            assert!(matches!(run(spec, &[8]), Err(Error::Usage(_))), "{spec}");
        }
        for spec in [
            "uniform:64x64:-0.1",
            "uniform:64x64:NaN",
            "uniform:64x64:0.1:x",
            "uniform:64x64:0.1:1:2",
            "uniform:64x64:0.1:1:e1.5",
            "uniform:64x64:0.1:1:eNaN",
            "uniform:64x64:0.1:1:e0.5:3",
        ] {
            assert!(matches!(run(spec, &[8]), Err(Error::Usage(_))), "{spec}");
        }
        assert!(matches!(run("dense:64x64:0.1", &[8]), Err(Error::Usage(_))));
        assert!(matches!(run("uniform:64x64:0.1", &[]), Err(Error::Usage(_))));
        assert!(matches!(run("uniform:3000000000x4:0.0", &[8]), Err(Error::TooLarge(_))));
        assert!(matches!(run("pruned:100000x100000:0.1", &[8]), Err(Error::TooLarge(_))));
        // B is k x n: 65536 x 32768 elements is past i32::MAX.
        assert!(matches!(run("uniform:1x65536:0.0", &[32768]), Err(Error::TooLarge(_))));
        assert_eq!(run("uniform:1x65536:0.0", &[32767]).unwrap(), 1);
    }
}
