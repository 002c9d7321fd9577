//! The sparse softmax benchmark (`tilesparse bench softmax`): [`crate::softmax()`] and [`crate::softmax_backward`]
//! with their automatic config (and every config on request), as effective bandwidth of the compulsory traffic beside
//! the device's copy bandwidth, each the median of CUDA-event-timed runs after warm-up. cuSPARSE has no softmax to
//! compare with; a softmax streams its values, so the copy of the same bytes is its bound.

use std::path::PathBuf;

use sprs::CsMat;

use crate::cpu::oracle::SoftmaxReference;
use crate::error::Result;
use crate::gpu::Gpu;
use crate::scalar::Scalar;
use crate::suite::{json_str, load_suite_matrix, matrices_dir, spmm_file_problems, spmm_generated_problems};
use crate::suite_spmv::copy_bandwidth_gbps;
use crate::timing::time_op;
use crate::{gen, softmax_backward_with, softmax_with, DeviceCsr, SoftmaxConfig};

/// One softmax problem: the matrix whose rows are taken (its values are redrawn, uniform in [-8, 8)).
pub struct SoftmaxProblem {
    pub name: String,
    pub a: CsMat<f32>,
}

/// A local window of `window` and `global` global tokens over a sequence of `seq` (the global tokens' rows and
/// columns are whole): a sparse attention mask.
pub fn local_global_mask(seq: usize, window: usize, global: usize) -> CsMat<f32> {
    let mut indptr = vec![0usize];
    let mut indices = Vec::new();
    for i in 0..seq {
        if i < global {
            indices.extend(0..seq);
        } else {
            let (lo, hi) = (i.saturating_sub(window / 2), (i + window / 2 + 1).min(seq));
            indices.extend((0..global).chain(lo.max(global)..hi));
        }
        indptr.push(indices.len());
    }
    let values = vec![0.0f32; indices.len()];
    CsMat::new((seq, seq), indptr, indices, values)
}

/// The suite: sparse attention masks (a local window with global tokens, whose rows are long), uniform random
/// attention at 50% and 90% of 4096^2 and at 90% of 16384^2 (107 MB of f32 values, past the L2), a power-law graph of
/// 2^20 rows (16 M entries, its hubs long rows), and real matrices (email-Enron, copter2, two pruned MiniLM weights;
/// small: launch-bound). `filter` keeps names that contain it.
pub fn softmax_suite(filter: Option<&str>) -> Result<Vec<SoftmaxProblem>> {
    let keep = |name: &str| filter.is_none_or(|f| name.contains(f));
    type Make = Box<dyn Fn() -> CsMat<f32>>;
    let generated: Vec<(&str, Make)> = vec![
        ("attention_s4096_w256_g16", Box::new(|| local_global_mask(4096, 256, 16))),
        ("attention_s16384_w512_g32", Box::new(|| local_global_mask(16384, 512, 32))),
        ("uniform_4096x4096_s50", Box::new(|| gen::uniform_random(4096, 4096, 0.5, 42))),
        ("uniform_4096x4096_s90", Box::new(|| gen::uniform_random(4096, 4096, 0.1, 42))),
        ("uniform_16384x16384_s90", Box::new(|| gen::uniform_random(16384, 16384, 0.1, 42))),
        ("powerlaw_1048576_16", Box::new(|| gen::power_law(1 << 20, 1 << 20, 16.0, 1.5, 2))),
    ];
    let mut out: Vec<SoftmaxProblem> = generated
        .into_iter()
        .filter(|(name, _)| keep(name))
        .map(|(name, make)| SoftmaxProblem { name: name.to_string(), a: make() })
        .collect();
    let dir = matrices_dir();
    for file in ["email-Enron", "copter2", "minilm_l0_ffn_in_1536x384_s70", "minilm_l0_ffn_in_1536x384_s90"] {
        if keep(file) {
            if let Some(a) = load_suite_matrix(&dir, file)? {
                out.push(SoftmaxProblem { name: file.to_string(), a });
            }
        }
    }
    Ok(out)
}

/// The caller's matrices (`--matrix`) and generated ones (`--gen`, as `bench spmm --gen`).
pub fn softmax_problems(paths: &[PathBuf], specs: &[String], filter: Option<&str>) -> Result<Vec<SoftmaxProblem>> {
    let mut spmm = spmm_file_problems(paths, &[1], None)?;
    spmm.extend(spmm_generated_problems(specs, &[1], None)?);
    Ok(spmm
        .into_iter()
        .map(|p| SoftmaxProblem { name: p.name.strip_suffix("_n1").unwrap_or(&p.name).to_string(), a: p.a })
        .filter(|p| filter.is_none_or(|f| p.name.contains(f)))
        .collect())
}

/// How long to measure, and what.
#[derive(Clone, Debug)]
pub struct SoftmaxBenchOptions {
    pub warmup: usize,
    pub iters: usize,
    /// Time every config (every lane count, with and without the chunk kernels), not only the automatic one.
    pub all_configs: bool,
    /// Check each config's forward and backward against the f64 oracle before timing it.
    pub verify: bool,
}

/// One config's times (ms), or why it did not run; and whether its results passed the oracle (None: not checked).
#[derive(Clone, Debug)]
pub struct SoftmaxEntry {
    pub config: SoftmaxConfig,
    pub forward_ms: std::result::Result<f64, String>,
    pub backward_ms: std::result::Result<f64, String>,
    pub verified: Option<bool>,
}

/// One problem's figures.
#[derive(Clone, Debug)]
pub struct SoftmaxReport {
    pub problem: String,
    pub m: usize,
    pub nnz: usize,
    pub longest_row: usize,
    pub value_bytes: usize,
    /// The automatic configs' entries (the forward's, then the backward's where it differs), then (with
    /// `all_configs`) every other config's.
    pub entries: Vec<SoftmaxEntry>,
    /// The forward's automatic config ([`SoftmaxConfig::select`]).
    pub automatic: SoftmaxConfig,
    /// The backward's ([`SoftmaxConfig::select_backward`]).
    pub automatic_backward: SoftmaxConfig,
}

impl SoftmaxReport {
    /// The bytes a forward must move: the values read and written, and the row pointer read.
    pub fn forward_bytes(&self) -> usize {
        2 * self.nnz * self.value_bytes + 4 * (self.m + 1)
    }
    /// The bytes a backward must move: P and dP read, dS written, and the row pointer read.
    pub fn backward_bytes(&self) -> usize {
        3 * self.nnz * self.value_bytes + 4 * (self.m + 1)
    }
    /// The entry of `config` (each automatic config has one).
    fn entry(&self, config: &SoftmaxConfig) -> &SoftmaxEntry {
        self.entries.iter().find(|e| e.config == *config).expect("every automatic config is timed")
    }
    /// The forward's time with its automatic config.
    pub fn forward_ms(&self) -> &std::result::Result<f64, String> {
        &self.entry(&self.automatic).forward_ms
    }
    /// The backward's time with its automatic config.
    pub fn backward_ms(&self) -> &std::result::Result<f64, String> {
        &self.entry(&self.automatic_backward).backward_ms
    }
    /// Whether the automatic configs' results passed the oracle (None: not checked).
    pub fn verified(&self) -> Option<bool> {
        let (f, b) = (self.entry(&self.automatic).verified, self.entry(&self.automatic_backward).verified);
        f.zip(b).map(|(f, b)| f && b)
    }
    /// The fastest forward and backward over the entries (ms), checked ones only where checked.
    pub fn fastest(&self) -> (Option<f64>, Option<f64>) {
        let ok = |e: &&SoftmaxEntry| e.verified != Some(false);
        let best = |f: fn(&SoftmaxEntry) -> Option<f64>| {
            self.entries.iter().filter(ok).filter_map(f).min_by(|a, b| a.total_cmp(b))
        };
        (best(|e| e.forward_ms.clone().ok()), best(|e| e.backward_ms.clone().ok()))
    }
}

/// Every config the bench can time: the automatic ones, then (with `all`) each lane count without the chunk kernels
/// and with them at the forward's automatic threshold (or 2048 where it has none).
fn configs(automatic: &SoftmaxConfig, backward: &SoftmaxConfig, all: bool) -> Vec<SoftmaxConfig> {
    let mut out = vec![*automatic];
    if backward != automatic {
        out.push(*backward);
    }
    if all {
        let from = automatic.long_rows_from.unwrap_or(2048);
        for lanes_per_row in SoftmaxConfig::LANES {
            for long_rows_from in [None, Some(from)] {
                let c = SoftmaxConfig { lanes_per_row, long_rows_from, ..*automatic };
                if !out.contains(&c) {
                    out.push(c);
                }
            }
        }
    }
    out
}

/// Times (and with `verify` first checks) the forward and backward softmax on one problem.
pub fn bench_softmax<T: Scalar>(
    gpu: &Gpu,
    problem: &SoftmaxProblem,
    opts: &SoftmaxBenchOptions,
) -> Result<SoftmaxReport> {
    let a = &problem.a;
    let values: Vec<T> = gen::dense_matrix(a.nnz(), 1, 5).into_iter().map(|v| T::from_f32(8.0 * v)).collect();
    let scores = CsMat::new(a.shape(), a.indptr().to_proper().to_vec(), a.indices().to_vec(), values);
    let mut c = DeviceCsr::upload(gpu, scores.view())?;
    let automatic = SoftmaxConfig::select(c.rows(), c.stats(gpu)?, T::DTYPE);
    let automatic_backward = SoftmaxConfig::select_backward(c.rows(), c.stats(gpu)?, T::DTYPE);
    let longest_row = c.stats(gpu)?.max;
    // P for the backward: the scores' softmax on the CPU (its values only matter for the check); dP uniform.
    let forward_reference = opts.verify.then(|| SoftmaxReference::new(scores.view()));
    let mut p_values = scores.data().to_vec();
    crate::cpu::backend::softmax(&a.indptr().to_proper(), &mut p_values);
    let prob = CsMat::new(a.shape(), a.indptr().to_proper().to_vec(), a.indices().to_vec(), p_values);
    let grad: Vec<T> = gen::dense_matrix(a.nnz(), 1, 6).into_iter().map(T::from_f32).collect();
    let backward_reference = opts.verify.then(|| SoftmaxReference::backward(prob.view(), &grad));
    let p_dev = DeviceCsr::upload(gpu, prob.view())?;
    let mut dp = DeviceCsr::upload(gpu, prob.view())?;
    let mut entries = Vec::new();
    for config in configs(&automatic, &automatic_backward, opts.all_configs) {
        let mut verified = None;
        if let (Some(fw), Some(bw)) = (&forward_reference, &backward_reference) {
            c.set_values(gpu, scores.data())?;
            softmax_with(gpu, &mut c, &config)?;
            dp.set_values(gpu, &grad)?;
            softmax_backward_with(gpu, &p_dev, &mut dp, &config)?;
            let (got_fw, got_bw) = (c.download(gpu)?, dp.download(gpu)?);
            verified = Some(fw.compare(got_fw.data()).mismatches == 0 && bw.compare(got_bw.data()).mismatches == 0);
        }
        let forward = time_op(gpu, opts.warmup, opts.iters, || softmax_with(gpu, &mut c, &config));
        let backward = time_op(gpu, opts.warmup, opts.iters, || softmax_backward_with(gpu, &p_dev, &mut dp, &config));
        entries.push(SoftmaxEntry {
            config,
            forward_ms: forward.map(|t| t.median_ms()).map_err(|e| e.to_string()),
            backward_ms: backward.map(|t| t.median_ms()).map_err(|e| e.to_string()),
            verified,
        });
    }
    Ok(SoftmaxReport {
        problem: problem.name.clone(),
        m: a.rows(),
        nnz: a.nnz(),
        longest_row,
        value_bytes: T::DTYPE.size(),
        entries,
        automatic,
        automatic_backward,
    })
}

/// The device's copy bandwidth (GB/s) over 256 MB, past the L2: the bound the table's percentages are of.
pub fn copy_gbps(gpu: &Gpu, opts: &SoftmaxBenchOptions) -> Result<f64> {
    copy_bandwidth_gbps(gpu, 256 << 20, opts.warmup, opts.iters)
}

/// A config as the table shows it: lanes per row and the long rows' threshold.
pub fn config_label(c: &SoftmaxConfig) -> String {
    match c.long_rows_from {
        Some(from) => format!("l{} long>{from}", c.lanes_per_row),
        None => format!("l{}", c.lanes_per_row),
    }
}

/// Prints one line per problem (the automatic configs), then with every config timed, each config's times.
pub fn print_table(reports: &[SoftmaxReport], copy_gbps: f64) {
    println!("copy bandwidth: {copy_gbps:.0} GB/s (read + write, 256 MB)");
    println!(
        "{:<28} {:>9} {:>10} {:>7} {:>22} {:>10} {:>8} {:>6} {:>10} {:>8} {:>6} {:>9}",
        "problem",
        "rows",
        "nnz",
        "longest",
        "config (fwd | bwd)",
        "fwd ms",
        "GB/s",
        "%copy",
        "bwd ms",
        "GB/s",
        "%copy",
        "vs best"
    );
    for r in reports {
        let gb =
            |bytes: usize, ms: &std::result::Result<f64, String>| ms.as_ref().ok().map(|ms| bytes as f64 / ms / 1e6);
        let (fw, bw) = (gb(r.forward_bytes(), r.forward_ms()), gb(r.backward_bytes(), r.backward_ms()));
        let ms = |t: &std::result::Result<f64, String>| t.as_ref().map_or("-".into(), |t| format!("{t:.4}"));
        let num = |x: Option<f64>, scale: f64| x.map_or("-".into(), |x| format!("{:.0}", x * scale));
        let (best_fw, best_bw) = r.fastest();
        let ratio = |best: Option<f64>, t: &std::result::Result<f64, String>| match (best, t) {
            (Some(b), Ok(a)) => format!("{:.2}", b / a),
            _ => "-".into(),
        };
        let vs_best = format!("{}/{}", ratio(best_fw, r.forward_ms()), ratio(best_bw, r.backward_ms()));
        let label = if r.automatic == r.automatic_backward {
            config_label(&r.automatic)
        } else {
            format!("{} | {}", config_label(&r.automatic), config_label(&r.automatic_backward))
        };
        let mark = if r.verified() == Some(false) { " WRONG" } else { "" };
        println!(
            "{:<28} {:>9} {:>10} {:>7} {:>22} {:>10} {:>8} {:>6} {:>10} {:>8} {:>6} {:>9}{mark}",
            r.problem,
            r.m,
            r.nnz,
            r.longest_row,
            label,
            ms(r.forward_ms()),
            num(fw, 1.0),
            num(fw, 100.0 / copy_gbps),
            ms(r.backward_ms()),
            num(bw, 1.0),
            num(bw, 100.0 / copy_gbps),
            vs_best
        );
    }
    for r in reports.iter().filter(|r| r.entries.len() > 1) {
        println!("\n{}: every config (fwd ms, bwd ms)", r.problem);
        for e in &r.entries {
            let mark = if e.verified == Some(false) { " WRONG" } else { "" };
            let ms =
                |t: &std::result::Result<f64, String>| t.as_ref().map_or_else(|e| e.clone(), |t| format!("{t:.4}"));
            println!("  {:<16} {:>10} {:>10}{mark}", config_label(&e.config), ms(&e.forward_ms), ms(&e.backward_ms));
        }
    }
}

/// The reports as JSON: the copy bandwidth and one object per problem, with every config timed.
pub fn reports_to_json(reports: &[SoftmaxReport], copy_gbps: f64) -> String {
    let num = |t: &std::result::Result<f64, String>| t.as_ref().map_or("null".into(), |t| t.to_string());
    let items: Vec<String> = reports
        .iter()
        .map(|r| {
            let entries: Vec<String> = r
                .entries
                .iter()
                .map(|e| {
                    format!(
                        "{{\"config\":{},\"lanes_per_row\":{},\"long_rows_from\":{},\"forward_ms\":{},\
                         \"backward_ms\":{},\"verified\":{}}}",
                        json_str(&config_label(&e.config)),
                        e.config.lanes_per_row,
                        e.config.long_rows_from.map_or("null".into(), |f| f.to_string()),
                        num(&e.forward_ms),
                        num(&e.backward_ms),
                        e.verified.map_or("null".into(), |v| v.to_string())
                    )
                })
                .collect();
            format!(
                "{{\"problem\":{},\"m\":{},\"nnz\":{},\"longest_row\":{},\"forward_bytes\":{},\"backward_bytes\":{},\
                 \"automatic\":{},\"automatic_backward\":{},\"configs\":[{}]}}",
                json_str(&r.problem),
                r.m,
                r.nnz,
                r.longest_row,
                r.forward_bytes(),
                r.backward_bytes(),
                json_str(&config_label(&r.automatic)),
                json_str(&config_label(&r.automatic_backward)),
                entries.join(",")
            )
        })
        .collect();
    format!("{{\"copy_gbps\":{copy_gbps},\"problems\":[\n{}\n]}}\n", items.join(",\n"))
}

/// How many configs' results fell outside the oracle's bound.
pub fn wrong_results(reports: &[SoftmaxReport]) -> usize {
    reports.iter().flat_map(|r| &r.entries).filter(|e| e.verified == Some(false)).count()
}

#[cfg(test)]
mod tests {
    use super::local_global_mask;

    #[test]
    fn the_attention_mask_has_whole_global_rows_and_columns_and_a_window() {
        let a = local_global_mask(100, 10, 3);
        for i in 0..100 {
            let cols = &a.indices()[a.indptr().outer_inds_sz(i)];
            assert!(cols.windows(2).all(|w| w[0] < w[1]), "row {i} not sorted");
            let want: Vec<usize> = (0..100).filter(|&j| i < 3 || j < 3 || i.abs_diff(j) <= 5).collect();
            assert_eq!(cols, &want[..], "row {i}");
        }
    }
}
