//! The SpGEMM benchmark suite of issue 5 and the runner behind `tilesparse bench spgemm-suite`: the production SpGEMM
//! end to end (symbolic + allocation + numeric) against cuSPARSE's SpGEMM (ALG1, ALG2, ALG3) in the same run,
//! with the peak device memory of each, measured by the stream-ordered pool's high-water mark.

use sprs::CsMat;

use crate::baseline::cusparse::{self, Cusparse, SpgemmAlg};
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::spgemm::{default_dense_from, spgemm_with_dense_from, SpgemmPlan};
use crate::suite::{fastest, json_entry, json_str, load_suite_matrix, matrices_dir, Entry};
use crate::timing::time_op;
use crate::{gen, DeviceCsr};

/// One SpGEMM problem: C = A * B.
pub struct SpgemmProblem {
    pub name: String,
    pub a: CsMat<f32>,
    pub b: CsMat<f32>,
}

/// The tail exponent of the suite's power-law matrix (the SpMV suite's, and the seed's).
pub const POWER_LAW_ALPHA: f64 = 1.5;

/// Issue 5's suite: C = A^2 for copter2, 4elt, email-Enron and the power-grid matrix; uniform random 65536^2
/// with 16 per row; power-law 262144^2 averaging 8 per row. `filter` keeps problems whose name contains it.
/// Real matrices that are not found are skipped with a line on stderr.
pub fn spgemm_suite(filter: Option<&str>) -> Result<Vec<SpgemmProblem>> {
    let keep = |name: &str| filter.is_none_or(|f| name.contains(f));
    let mut out = Vec::new();
    let dir = matrices_dir();
    for file in ["copter2", "4elt", "email-Enron", "case_ACTIVSg70k_ybus_im"] {
        let name = format!("{file}_squared");
        if !keep(&name) {
            continue;
        }
        let Some(a) = load_suite_matrix(&dir, file)? else { continue };
        out.push(SpgemmProblem { name, b: a.clone(), a });
    }
    if keep("uniform_65536_16") {
        let a = gen::uniform_random(65536, 65536, 16.0 / 65536.0, 91); // exactly 16 per row
        out.push(SpgemmProblem { name: "uniform_65536_16_squared".into(), b: a.clone(), a });
    }
    if keep("powerlaw_262144_8") {
        let a = gen::power_law(262_144, 262_144, 8.0, POWER_LAW_ALPHA, 92);
        out.push(SpgemmProblem { name: "powerlaw_262144_8_squared".into(), b: a.clone(), a });
    }
    Ok(out)
}

/// One problem's figures.
#[derive(Clone, Debug)]
pub struct SpgemmReport {
    pub problem: String,
    pub m: usize,
    pub k: usize,
    pub n: usize,
    pub nnz_a: usize,
    pub nnz_b: usize,
    pub products: u64,
    pub nnz_c: usize,
    /// The production SpGEMM end to end.
    pub ours: Entry,
    /// Its symbolic phase alone ([`SpgemmPlan::new`]) and its numeric phase alone on a reused plan.
    pub symbolic: Entry,
    pub numeric: Entry,
    pub cusparse: Vec<Entry>,
    /// Peak device memory beyond A and B (C included), bytes: ours, then each cuSPARSE algorithm (None where
    /// it failed or the device has no stream-ordered pool).
    pub ours_peak: Option<u64>,
    pub cusparse_peak: Vec<Option<u64>>,
    /// Whether our C's structure equals cuSPARSE's (the first algorithm that ran), and the largest value
    /// difference relative to max |C|: a sanity check, not the test.
    pub same_structure: Option<bool>,
    pub agreement: f64,
}

impl SpgemmReport {
    pub fn best_cusparse(&self) -> Option<&Entry> {
        fastest(&self.cusparse)
    }

    /// Best cuSPARSE time over ours.
    pub fn speedup_vs_cusparse(&self) -> Option<f64> {
        Some(*self.best_cusparse()?.ms.as_ref().ok()? / *self.ours.ms.as_ref().ok()?)
    }

    /// The smallest peak among the cuSPARSE algorithms that ran.
    pub fn least_cusparse_peak(&self) -> Option<u64> {
        self.cusparse_peak.iter().flatten().copied().min()
    }
}

/// Device memory used at the peak of `op` beyond what was in use before it (the pool's high-water mark), with
/// `op`'s result still alive at the end.
fn peak_of<T>(gpu: &Gpu, op: impl FnOnce() -> Result<T>) -> Result<(T, Option<u64>)> {
    gpu.synchronize()?;
    gpu.pool_reset_peak()?;
    let before = gpu.pool_usage()?;
    let out = op()?;
    gpu.synchronize()?;
    let after = gpu.pool_usage()?;
    Ok((out, before.zip(after).map(|((used, _), (_, high))| high.saturating_sub(used))))
}

/// Measures the production SpGEMM and every cuSPARSE algorithm on one problem; `dense_from` overrides the
/// production SpGEMM's dense-bin threshold ([`SpgemmPlan::with_dense_from`]).
pub fn bench_spgemm(
    gpu: &Gpu,
    problem: &SpgemmProblem,
    warmup: usize,
    iters: usize,
    dense_from: Option<usize>,
) -> Result<SpgemmReport> {
    let (a_host, b_host) = (&problem.a, &problem.b);
    let a = DeviceCsr::upload(gpu, a_host.view())?;
    let b = DeviceCsr::upload(gpu, b_host.view())?;
    let dense_from = dense_from.unwrap_or_else(|| default_dense_from(b.cols()));
    let ours_op = || spgemm_with_dense_from(gpu, &a, &b, dense_from);

    let (ours_c, ours_peak) = peak_of(gpu, ours_op)?;
    let ours = Entry::timed("production".into(), time_op(gpu, warmup, iters, || ours_op().map(drop)));
    let plan_op = || SpgemmPlan::with_dense_from(gpu, &a, &b, dense_from);
    let symbolic = Entry::timed("symbolic".into(), time_op(gpu, warmup, iters, || plan_op().map(drop)));
    let mut plan = plan_op()?;
    let mut reused = plan.numeric(gpu, &a, &b)?;
    let numeric = Entry::timed(
        "numeric (reused plan)".into(),
        time_op(gpu, warmup, iters, || plan.numeric_into(gpu, &a, &b, &mut reused)),
    );

    let mut cusparse_entries = Vec::new();
    let mut cusparse_peak = Vec::new();
    let mut reference = None;
    match Cusparse::new(gpu) {
        Ok(lib) => {
            for alg in SpgemmAlg::ALL {
                let name = format!("cuSPARSE {}", alg.name());
                match peak_of(gpu, || cusparse::spgemm(gpu, &lib, &a, &b, alg)) {
                    Ok((c, peak)) => {
                        cusparse_peak.push(peak);
                        if reference.is_none() {
                            reference = Some(c.download(gpu)?);
                        }
                        drop(c);
                        let t = time_op(gpu, warmup, iters, || cusparse::spgemm(gpu, &lib, &a, &b, alg).map(drop));
                        cusparse_entries.push(Entry::timed(name, t));
                    }
                    Err(e) => {
                        cusparse_peak.push(None);
                        cusparse_entries.push(Entry::failed(name, e.to_string()));
                    }
                }
            }
        }
        Err(e) => cusparse_entries.push(Entry::failed("cuSPARSE".into(), e.to_string())),
    }

    let ours_host = ours_c.download(gpu)?;
    let (same_structure, agreement) = match &reference {
        Some(theirs) => {
            let same = theirs.indptr().raw_storage() == ours_host.indptr().raw_storage()
                && theirs.indices() == ours_host.indices();
            let scale = theirs.data().iter().fold(0f64, |m, v| m.max(v.abs() as f64)).max(f64::MIN_POSITIVE);
            let diff = if same {
                ours_host.data().iter().zip(theirs.data()).fold(0f64, |m, (x, y)| m.max((x - y).abs() as f64))
            } else {
                f64::NAN
            };
            (Some(same), diff / scale)
        }
        None => (None, f64::NAN),
    };
    Ok(SpgemmReport {
        problem: problem.name.clone(),
        m: a.rows(),
        k: a.cols(),
        n: b.cols(),
        nnz_a: a.nnz(),
        nnz_b: b.nnz(),
        products: plan.products(),
        nnz_c: ours_host.nnz(),
        ours,
        symbolic,
        numeric,
        cusparse: cusparse_entries,
        ours_peak,
        cusparse_peak,
        same_structure,
        agreement,
    })
}

/// The reports as JSON (one object per problem).
pub fn reports_to_json(reports: &[SpgemmReport]) -> String {
    let opt = |v: Option<u64>| v.map_or("null".to_string(), |b| b.to_string());
    let items: Vec<String> = reports
        .iter()
        .map(|r| {
            format!(
                "{{\"problem\":{},\"m\":{},\"k\":{},\"n\":{},\"nnz_a\":{},\"nnz_b\":{},\"products\":{},\"nnz_c\":{},\
                 \"ours\":{},\"symbolic\":{},\"numeric\":{},\"cusparse\":[{}],\"ours_peak_bytes\":{},\
                 \"cusparse_peak_bytes\":[{}],\"same_structure\":{},\"agreement\":{}}}",
                json_str(&r.problem),
                r.m,
                r.k,
                r.n,
                r.nnz_a,
                r.nnz_b,
                r.products,
                r.nnz_c,
                json_entry(&r.ours),
                json_entry(&r.symbolic),
                json_entry(&r.numeric),
                r.cusparse.iter().map(json_entry).collect::<Vec<_>>().join(","),
                opt(r.ours_peak),
                r.cusparse_peak.iter().map(|p| opt(*p)).collect::<Vec<_>>().join(","),
                r.same_structure.map_or("null".to_string(), |s| s.to_string()),
                if r.agreement.is_finite() { r.agreement.to_string() } else { "null".into() }
            )
        })
        .collect();
    format!("[\n{}\n]\n", items.join(",\n"))
}

/// Fails when our product disagrees with cuSPARSE's structure (the suite's own sanity check).
pub fn check_agreement(r: &SpgemmReport) -> Result<()> {
    if r.same_structure == Some(false) {
        return Err(Error::Verification(format!("{}: C's structure differs from cuSPARSE's", r.problem)));
    }
    Ok(())
}
