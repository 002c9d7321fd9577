//! The SpMV benchmark suite of issue 6 and the runner behind `tilesparse bench spmv` and the criterion bench: the
//! seed, the production SpMV and cuSPARSE CSR ALG1/ALG2 on the same inputs in the same run, each as effective
//! bandwidth of the compulsory traffic, beside the device's copy bandwidth.

use cudarc::driver::{CudaSlice, DeviceRepr, ValidAsZeroBits};
use sprs::CsMat;

use crate::baseline::cusparse::{Cusparse, CusparseSpmv, SpmvAlg};
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::spmv::{
    spmv, spmv_gather_probe, spmv_seed, GatherProbe, SeedSpmvWorkspace, SpmvPlan, SpmvStrategy, THREADS_PER_ROW,
};
use crate::suite::{fastest, json_entry, json_str, load_matrix, matrices_dir, Entry};
use crate::timing::time_op;
use crate::{gen, DeviceCsr};

/// Makes a generated matrix (only for the problems the filter keeps).
type Generator = fn() -> CsMat<f32>;

/// One SpMV problem.
pub struct SpmvProblem {
    pub name: String,
    pub a: CsMat<f32>,
}

/// The suite of issue 6: the 27-point Laplacian on a 160^3 grid, a uniform random 4,194,304^2 matrix with 16
/// entries per row, a power law of the same size and mean (tail exponent 1.5, as the seed bench), and every
/// `*.mtx.gz` in [`matrices_dir`], in name order. `filter` keeps problems whose name contains it.
pub fn spmv_suite(filter: Option<&str>) -> Result<Vec<SpmvProblem>> {
    let keep = |name: &str| filter.is_none_or(|f| name.contains(f));
    const N: usize = 4_194_304;
    let generated: [(&str, Generator); 3] = [
        ("laplacian_27pt_160", || gen::laplacian_27pt(160, 160, 160)),
        ("uniform_4194304_16", || gen::uniform_random(N, N, 16.0 / N as f64, 1)),
        ("powerlaw_4194304_16", || gen::power_law(N, N, 16.0, 1.5, 2)),
    ];
    let mut out: Vec<SpmvProblem> = generated
        .iter()
        .filter(|(name, _)| keep(name))
        .map(|(name, make)| SpmvProblem { name: name.to_string(), a: make() })
        .collect();
    let dir = matrices_dir();
    let mut files: Vec<_> = match std::fs::read_dir(&dir) {
        Ok(entries) => entries.filter_map(|e| e.ok().map(|e| e.path())).collect(),
        Err(e) => {
            eprintln!("suite: {}: {e}; real matrices skipped", dir.display());
            Vec::new()
        }
    };
    files.sort();
    for path in files {
        let Some(name) = path.file_name().and_then(|n| n.to_str()).and_then(|n| n.strip_suffix(".mtx.gz")) else {
            continue;
        };
        if keep(name) {
            out.push(SpmvProblem { name: name.to_string(), a: load_matrix(&path)? });
        }
    }
    Ok(out)
}

/// Bytes that any SpMV y = A x must move at least once: values and column indices, the row pointer, x and y
/// (written; beta = 0).
pub fn compulsory_bytes(m: usize, k: usize, nnz: usize, value_bytes: usize) -> usize {
    nnz * (value_bytes + 4) + (m + 1) * 4 + k * value_bytes + m * value_bytes
}

/// One problem's figures (all y = A x, beta = 0, f32).
#[derive(Clone, Debug)]
pub struct SpmvReport {
    pub problem: String,
    pub m: usize,
    pub k: usize,
    pub nnz: usize,
    /// The production plan's strategy.
    pub strategy: String,
    pub seed: Entry,
    pub production: Entry,
    /// Every single-kernel strategy forced in turn (the data that `SpmvPlan::choose` is tuned from).
    pub strategies: Vec<Entry>,
    pub cusparse: Vec<Entry>,
    /// max |production - cuSPARSE| / max |cuSPARSE|: a sanity check, not the test.
    pub agreement: f64,
    /// The column indices read and x gathered at each, nothing else ([`spmv_gather_probe`]), one entry per
    /// [`GatherProbe`]: the fastest is what the x gathers cost on their own.
    pub gathers: Vec<Entry>,
}

impl SpmvReport {
    /// Effective bandwidth in GB/s of a run of `ms` milliseconds ([`compulsory_bytes`]).
    pub fn gbps(&self, ms: f64) -> f64 {
        compulsory_bytes(self.m, self.k, self.nnz, 4) as f64 / ms / 1e6
    }
    /// The fastest cuSPARSE algorithm.
    pub fn best_cusparse(&self) -> Option<&Entry> {
        fastest(&self.cusparse)
    }
    /// The fastest gather probe: the floor of the x gathers.
    pub fn gather_floor(&self) -> Option<&Entry> {
        fastest(&self.gathers)
    }
    /// `entry`'s time / production time (above 1: production is faster).
    pub fn speedup_over(&self, entry: &Entry) -> Option<f64> {
        Some(entry.ms.as_ref().ok()? / self.production.ms.as_ref().ok()?)
    }
}

/// Measures the seed, the production SpMV with the plan it chooses, and cuSPARSE CSR ALG1 and ALG2 on one problem.
pub fn bench_spmv(gpu: &Gpu, problem: &SpmvProblem, warmup: usize, iters: usize) -> Result<SpmvReport> {
    let (m, k) = (problem.a.rows(), problem.a.cols());
    let a = DeviceCsr::upload(gpu, problem.a.view())?;
    let x = gpu.stream().clone_htod(&gen::dense_matrix(k, 1, 3)).map_err(Error::driver("uploading x", k * 4))?;
    let mut y = zeros::<f32>(gpu, m)?;

    let mut ws = SeedSpmvWorkspace::new(gpu, a.nnz())?;
    let seed =
        Entry::timed("seed".into(), time_op(gpu, warmup, iters, || spmv_seed(gpu, &a, &x, 1.0, 0.0, &mut y, &mut ws)));
    drop(ws);

    let plan = SpmvPlan::new(gpu, &a)?;
    let production = Entry::timed(
        format!("production_{}{}", plan.strategy(), if plan.offsets16() { "_i16" } else { "" }),
        time_op(gpu, warmup, iters, || spmv(gpu, &a, &x, 1.0, 0.0, &mut y, &plan)),
    );
    let ours = gpu.stream().clone_dtoh(&y).map_err(Error::driver("downloading y", m * 4))?;
    let mut strategies = Vec::new();
    let forced = THREADS_PER_ROW
        .iter()
        .map(|&t| SpmvStrategy::Vector { threads_per_row: t })
        .chain([SpmvStrategy::BlockPerRow, SpmvStrategy::Segmented]);
    for strategy in forced {
        let r = SpmvPlan::with_strategy(gpu, &a, strategy)
            .and_then(|p| time_op(gpu, warmup, iters, || spmv(gpu, &a, &x, 1.0, 0.0, &mut y, &p)));
        strategies.push(Entry::timed(strategy.to_string(), r));
    }
    if plan.offsets16() {
        // The chosen strategy on the 32-bit column indices: what the 16-bit offsets gain.
        let r = SpmvPlan::with_options(gpu, &a, plan.strategy(), false)
            .and_then(|p| time_op(gpu, warmup, iters, || spmv(gpu, &a, &x, 1.0, 0.0, &mut y, &p)));
        strategies.push(Entry::timed(format!("{}_i32", plan.strategy()), r));
    }

    let gathers = GatherProbe::ALL
        .iter()
        .map(|&p| {
            Entry::timed(p.to_string(), time_op(gpu, warmup, iters, || spmv_gather_probe(gpu, &a, &x, &mut y, p)))
        })
        .collect();

    let lib = Cusparse::new(gpu)?;
    let mut cusparse = Vec::new();
    let mut reference: Option<Vec<f32>> = None;
    for alg in SpmvAlg::ALL {
        let mut y2 = zeros::<f32>(gpu, m)?;
        let r = CusparseSpmv::new(gpu, &lib, &a, &x, &mut y2, alg)
            .and_then(|mut op| time_op(gpu, warmup, iters, || op.run(gpu)));
        let ok = r.is_ok();
        cusparse.push(Entry::timed(format!("cusparse_{}", alg.name()), r));
        if ok && reference.is_none() {
            reference = Some(gpu.stream().clone_dtoh(&y2).map_err(Error::driver("downloading y", m * 4))?);
        }
    }
    let agreement = reference.map_or(f64::NAN, |r| {
        let scale = r.iter().map(|v| v.abs() as f64).fold(0.0, f64::max).max(f64::MIN_POSITIVE);
        r.iter().zip(&ours).map(|(a, b)| (*a as f64 - *b as f64).abs()).fold(0.0, f64::max) / scale
    });
    Ok(SpmvReport {
        problem: problem.name.clone(),
        m,
        k,
        nnz: a.nnz(),
        strategy: plan.strategy().to_string(),
        seed,
        production,
        strategies,
        cusparse,
        agreement,
        gathers,
    })
}

/// A zeroed device vector of `len` elements (at least one, so that its pointer is valid).
fn zeros<T: DeviceRepr + ValidAsZeroBits>(gpu: &Gpu, len: usize) -> Result<CudaSlice<T>> {
    let bytes = len.max(1) * std::mem::size_of::<T>();
    gpu.stream().alloc_zeros::<T>(len.max(1)).map_err(Error::driver("allocating a vector", bytes))
}

/// Device-to-device copy bandwidth in GB/s (bytes read + bytes written per median event-timed copy of `bytes`).
pub fn copy_bandwidth_gbps(gpu: &Gpu, bytes: usize, warmup: usize, iters: usize) -> Result<f64> {
    let src = zeros::<u8>(gpu, bytes)?;
    let mut dst = zeros::<u8>(gpu, bytes)?;
    let t = time_op(gpu, warmup, iters, || {
        gpu.stream().memcpy_dtod(&src, &mut dst).map_err(Error::driver("copying device to device", bytes))
    })?;
    Ok(2.0 * bytes as f64 / t.median_ms() / 1e6)
}

/// The reports as JSON: the copy bandwidth and one object per problem.
pub fn reports_to_json(reports: &[SpmvReport], copy_gbps: f64) -> String {
    let items: Vec<String> = reports
        .iter()
        .map(|r| {
            format!(
                concat!(
                    "{{\"problem\":{},\"m\":{},\"k\":{},\"nnz\":{},\"compulsory_bytes\":{},\"strategy\":{},",
                    "\"seed\":{},\"production\":{},\"strategies\":[{}],\"cusparse\":[{}],\"gathers\":[{}],\"agreement\":{}}}"
                ),
                json_str(&r.problem),
                r.m,
                r.k,
                r.nnz,
                compulsory_bytes(r.m, r.k, r.nnz, 4),
                json_str(&r.strategy),
                json_entry(&r.seed),
                json_entry(&r.production),
                r.strategies.iter().map(json_entry).collect::<Vec<_>>().join(","),
                r.cusparse.iter().map(json_entry).collect::<Vec<_>>().join(","),
                r.gathers.iter().map(json_entry).collect::<Vec<_>>().join(","),
                if r.agreement.is_finite() { r.agreement.to_string() } else { "null".into() }
            )
        })
        .collect();
    format!("{{\"copy_gbps\":{copy_gbps},\"problems\":[\n{}\n]}}\n", items.join(",\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compulsory_traffic_counts_each_array_once() {
        // 4 entries (value + index), 3 row pointers, x of 3, y of 2; f32.
        assert_eq!(compulsory_bytes(2, 3, 4, 4), 4 * 8 + 3 * 4 + 3 * 4 + 2 * 4);
    }

    #[test]
    fn json_holds_times_errors_and_escaped_names() {
        let entry = |name: &str, ms: std::result::Result<f64, String>| Entry { name: name.into(), ms, check: None };
        let r = SpmvReport {
            problem: "a\"b".into(),
            m: 2,
            k: 3,
            nnz: 4,
            strategy: "vector_t8".into(),
            seed: entry("seed", Ok(0.5)),
            production: entry("production_vector_t8", Ok(0.25)),
            strategies: vec![entry("vector_t4", Ok(0.3))],
            cusparse: vec![entry("cusparse_CSR_ALG1", Err("not supported".into()))],
            agreement: f64::NAN,
            gathers: vec![entry("x_gathers_alone_u4", Ok(0.2)), entry("x_gathers_alone_u8", Ok(0.1))],
        };
        let json = reports_to_json(&[r], 3000.0);
        assert!(json.contains(r#""problem":"a\"b""#), "{json}");
        assert!(json.contains(r#"{"name":"cusparse_CSR_ALG1","error":"not supported"}"#), "{json}");
        assert!(json.contains(r#""strategies":[{"name":"vector_t4","ms":0.3}]"#), "{json}");
        assert!(
            json.contains(
                r#""gathers":[{"name":"x_gathers_alone_u4","ms":0.2},{"name":"x_gathers_alone_u8","ms":0.1}]"#
            ),
            "{json}"
        );
        assert!(json.contains(r#""agreement":null"#) && json.contains(r#""compulsory_bytes":64"#), "{json}");
    }
}
