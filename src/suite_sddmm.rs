//! The SDDMM benchmark (`tilesparse bench sddmm`): our SDDMM ([`crate::sddmm_auto`], every compiled config on
//! request, and the tiled kernel through a plan, [`crate::SddmmPlan`], whose build is timed apart) against cuSPARSE's
//! `cusparseSDDMM` (both forms of B, the faster reported) and cuBLAS's GEMM of the same
//! m x n x k (the dense product alone, before any sampling: what computing A B^T densely would cost), all in one
//! run, each the median of CUDA-event-timed runs after warm-up.

use std::path::PathBuf;

use sprs::CsMat;

use crate::baseline::cublas::Cublas;
use crate::baseline::cusparse::{Cusparse, CusparseSddmm, SddmmForm};
use crate::cpu::oracle::{SddmmReference, Summation};
use crate::error::Result;
use crate::gpu::Gpu;
use crate::scalar::Scalar;
use crate::suite::{geomean, json_str, load_suite_matrix, matrices_dir, spmm_file_problems, spmm_generated_problems};
use crate::timing::time_op;
use crate::{gen, sddmm, sddmm_planned, DeviceCsr, DeviceDense, SddmmConfig, SddmmPlan};

/// One SDDMM problem: C's structure (m x n) and the inner dimension k of A (m x k) and B (n x k).
pub struct SddmmProblem {
    pub name: String,
    pub pattern: CsMat<f32>,
    pub k: usize,
}

/// The SDDMM suite: where a sparse layer's weight gradient and graph attention take it. Uniform 4096 x 4096 at
/// 80-98% sparsity with k = 32, 128 and 256; sparse attention's masks (a local window and global tokens over 4096
/// and 16384 tokens) with k = 64 and 128; the pruned MiniLM weights of the SpMM suite with k = 64 and 256 (tokens
/// per batch); email-Enron and copter2 with k = 32 and 128 (a graph's features). `filter` keeps names that contain it;
/// real matrices not found are skipped with a line on stderr.
pub fn sddmm_suite(filter: Option<&str>) -> Result<Vec<SddmmProblem>> {
    let keep = |name: &str| filter.is_none_or(|f| name.contains(f));
    let mut out = Vec::new();
    for &sparsity in &[0.8, 0.9, 0.95, 0.98] {
        for &k in &[32usize, 128, 256] {
            let name = format!("uniform_4096x4096_s{:02}_k{k}", (sparsity * 100.0) as u32);
            if keep(&name) {
                out.push(SddmmProblem { name, pattern: gen::uniform_random(4096, 4096, 1.0 - sparsity, 42), k });
            }
        }
    }
    // Sparse attention's scores, S = (Q K^T) o mask, at a head's width: the softmax suite's masks.
    for (seq, window, global) in [(4096, 256, 16), (16384, 512, 32)] {
        for k in [64usize, 128] {
            let name = format!("attention_s{seq}_w{window}_g{global}_k{k}");
            if keep(&name) {
                let pattern = crate::suite_softmax::local_global_mask(seq, window, global);
                out.push(SddmmProblem { name, pattern, k });
            }
        }
    }
    let mut real: Vec<(String, Vec<usize>)> = Vec::new();
    for layer in ["attn_q_384x384", "ffn_in_1536x384", "ffn_out_384x1536"] {
        for s in ["70", "90", "98"] {
            real.push((format!("minilm_l0_{layer}_s{s}"), vec![64, 256]));
        }
    }
    real.push(("email-Enron".into(), vec![32, 128]));
    real.push(("copter2".into(), vec![32, 128]));
    let dir = matrices_dir();
    for (file, ks) in real {
        if !ks.iter().any(|k| keep(&format!("{file}_k{k}"))) {
            continue;
        }
        let Some(pattern) = load_suite_matrix(&dir, &file)? else { continue };
        for k in ks {
            let name = format!("{file}_k{k}");
            if keep(&name) {
                out.push(SddmmProblem { name, pattern: pattern.clone(), k });
            }
        }
    }
    Ok(out)
}

/// SDDMM problems on the caller's Matrix Market files and generated matrices (the specs of
/// [`crate::suite::spmm_generated_problems`]), each at every k in `ks`, named `<matrix>_k<k>`.
pub fn sddmm_problems(
    paths: &[PathBuf],
    specs: &[String],
    ks: &[usize],
    filter: Option<&str>,
) -> Result<Vec<SddmmProblem>> {
    if ks.contains(&0) {
        return Err(crate::Error::Usage("--k 0: the bench needs an inner dimension of at least 1".into()));
    }
    // The SpMM problems' checks are SDDMM's: A (m x k) and B (n x k) within i32 element offsets, as B (k x n) and C
    // (m x n) there; their names end in _n<k>, and the filter is applied to ours.
    let mut spmm = spmm_file_problems(paths, ks, None)?;
    spmm.extend(spmm_generated_problems(specs, ks, None)?);
    Ok(spmm
        .into_iter()
        .map(|p| {
            let stem = p.name.strip_suffix(&format!("_n{}", p.n)).unwrap_or(&p.name).to_string();
            SddmmProblem { name: format!("{stem}_k{}", p.n), pattern: p.a, k: p.n }
        })
        .filter(|p| filter.is_none_or(|f| p.name.contains(f)))
        .collect())
}

/// How long to measure, and what.
#[derive(Clone, Debug)]
pub struct SddmmBenchOptions {
    pub warmup: usize,
    pub iters: usize,
    /// Time every compiled config that can run the problem, not only the automatic choice.
    pub all_configs: bool,
    /// Check every result timed against the f64 oracle first (on a poisoned C).
    pub verify: bool,
    /// Rows per tile of the tiled kernel's plan, at most the largest that fits (None: that largest).
    pub tile_rows: Option<usize>,
}

/// One timed kernel: its name and median time (or why it could not run), and its check where asked for.
#[derive(Clone, Debug)]
pub struct SddmmEntry {
    pub name: String,
    pub ms: std::result::Result<f64, String>,
    /// The entries outside the oracle's bound; None where not checked.
    pub mismatches: Option<usize>,
}

/// One problem's results.
#[derive(Clone, Debug)]
pub struct SddmmReport {
    pub problem: String,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub nnz: usize,
    /// The automatic choice.
    pub auto: SddmmEntry,
    /// Every config, where asked for.
    pub configs: Vec<SddmmEntry>,
    /// The tiled kernel through a plan ([`SddmmPlan::tiled`], built untimed), and the plan's build time in ms (wall
    /// clock).
    pub tiled: SddmmEntry,
    pub plan_ms: Option<f64>,
    /// Whether [`SddmmPlan::new`] takes the tiled kernel, and whether it takes the tensor cores (else the automatic
    /// choice), for this problem.
    pub planned_tiled: bool,
    pub planned_tc: bool,
    /// The tensor-core kernel through a plan ([`SddmmPlan::tensor_cores`], built untimed), its plan's build time in ms
    /// (wall clock), and the 64 x 64 tiles of C holding an entry (the tiles it computes).
    pub tc: SddmmEntry,
    pub tc_plan_ms: Option<f64>,
    pub tc_tiles: usize,
    /// cuSPARSE's SDDMM, each form of B.
    pub cusparse: Vec<SddmmEntry>,
    /// cuBLAS's GEMM of the same m x n x k (None where the dense C would pass 4 GB).
    pub cublas: Option<SddmmEntry>,
}

fn best(entries: &[SddmmEntry]) -> Option<&SddmmEntry> {
    entries.iter().filter(|e| e.ms.is_ok()).min_by(|a, b| a.ms.as_ref().unwrap().total_cmp(b.ms.as_ref().unwrap()))
}

impl SddmmReport {
    /// GFLOP/s at `ms`: 2 nnz k.
    pub fn gflops(&self, ms: f64) -> f64 {
        2.0 * self.nnz as f64 * self.k as f64 / (ms * 1e6)
    }

    pub fn best_cusparse(&self) -> Option<&SddmmEntry> {
        best(&self.cusparse)
    }

    pub fn best_config(&self) -> Option<&SddmmEntry> {
        best(&self.configs)
    }

    /// cuSPARSE's best time over ours (the automatic choice).
    pub fn speedup_vs_cusparse(&self) -> Option<f64> {
        Some(self.best_cusparse()?.ms.as_ref().ok()? / self.auto.ms.as_ref().ok()?)
    }

    /// cuSPARSE's best time over the tiled kernel's.
    pub fn tiled_vs_cusparse(&self) -> Option<f64> {
        Some(self.best_cusparse()?.ms.as_ref().ok()? / self.tiled.ms.as_ref().ok()?)
    }

    /// cuSPARSE's best time over the tensor-core kernel's.
    pub fn tc_vs_cusparse(&self) -> Option<f64> {
        Some(self.best_cusparse()?.ms.as_ref().ok()? / self.tc.ms.as_ref().ok()?)
    }

    /// The share of C's 64 x 64 tiles' elements that are entries, over the tiles that hold one.
    pub fn tc_fill(&self) -> f64 {
        self.nnz as f64
            / (self.tc_tiles.max(1) as f64 * (crate::sddmm::SDDMM_TC_TILE * crate::sddmm::SDDMM_TC_TILE) as f64)
    }

    /// cuSPARSE's best time over the plan's choice ([`SddmmPlan::new`]: the tensor cores, the tiled kernel or the
    /// automatic choice).
    pub fn planned_vs_cusparse(&self) -> Option<f64> {
        if self.planned_tc {
            self.tc_vs_cusparse()
        } else if self.planned_tiled {
            self.tiled_vs_cusparse()
        } else {
            self.speedup_vs_cusparse()
        }
    }

    /// cuSPARSE's best time over the fastest of ours (the automatic choice, the tiled kernel, the tensor cores).
    pub fn best_vs_cusparse(&self) -> Option<f64> {
        let ms = |e: &SddmmEntry| e.ms.as_ref().ok().copied().unwrap_or(f64::INFINITY);
        Some(self.best_cusparse()?.ms.as_ref().ok()? / ms(&self.auto).min(ms(&self.tiled)).min(ms(&self.tc)))
    }

    /// cuBLAS's GEMM time over ours.
    pub fn speedup_vs_cublas(&self) -> Option<f64> {
        Some(self.cublas.as_ref()?.ms.as_ref().ok()? / self.auto.ms.as_ref().ok()?)
    }
}

/// Times one problem in T (module documentation). Errors of a baseline (a type cuSPARSE does not take) are kept in
/// its entry; errors of ours are returned.
pub fn bench_sddmm<T: Scalar>(gpu: &Gpu, problem: &SddmmProblem, opts: &SddmmBenchOptions) -> Result<SddmmReport> {
    let pattern: CsMat<T> = gen::convert(&problem.pattern);
    let (m, n) = pattern.shape();
    let k = problem.k;
    let nnz = pattern.nnz();
    let to_t = |v: Vec<f32>| v.into_iter().map(T::from_f32).collect::<Vec<T>>();
    let a = to_t(gen::dense_matrix(m, k, 11));
    let b = to_t(gen::dense_matrix(n, k, 12));
    let a_dev = DeviceDense::upload(gpu, m, k, &a)?;
    let b_dev = DeviceDense::upload(gpu, n, k, &b)?;
    let mut c = DeviceCsr::upload(gpu, pattern.view())?;
    let reference = opts.verify.then(|| SddmmReference::new(pattern.view(), &a, &b, k));
    let poison = vec![T::from_f64(crate::cpu::oracle::POISON); nnz];
    // Checks one result (C poisoned, then `run`) against the bound of a kernel that sums as `summation`, where asked
    // for.
    let check = |c: &mut DeviceCsr<T>,
                 summation: Summation,
                 run: &mut dyn FnMut(&mut DeviceCsr<T>) -> Result<()>|
     -> Result<Option<usize>> {
        let Some(reference) = &reference else { return Ok(None) };
        c.set_values(gpu, &poison)?;
        run(c)?;
        Ok(Some(reference.compare_summed(summation, c.download(gpu)?.data()).mismatches))
    };
    let ours = |config: SddmmConfig, c: &mut DeviceCsr<T>| -> Result<SddmmEntry> {
        let mismatches = check(c, Summation::Fma, &mut |c| sddmm(gpu, &a_dev, &b_dev, c, &config))?;
        let t = time_op(gpu, opts.warmup, opts.iters, || sddmm(gpu, &a_dev, &b_dev, c, &config))?;
        Ok(SddmmEntry { name: config.kernel_name(), ms: Ok(t.median_ms()), mismatches })
    };
    // A plan's product, checked against the bound of its summation, then timed.
    let planned = |plan: &SddmmPlan, name: String, summation: Summation, c: &mut DeviceCsr<T>| -> Result<SddmmEntry> {
        let mismatches = check(c, summation, &mut |c| sddmm_planned(gpu, &a_dev, &b_dev, c, plan, 1.0, 0.0))?;
        let t = time_op(gpu, opts.warmup, opts.iters, || sddmm_planned(gpu, &a_dev, &b_dev, c, plan, 1.0, 0.0))?;
        Ok(SddmmEntry { name, ms: Ok(t.median_ms()), mismatches })
    };
    let auto = ours(SddmmConfig::select(k, nnz, T::DTYPE), &mut c)?;
    let largest = SddmmPlan::largest_tile_rows(T::DTYPE, k);
    let started = std::time::Instant::now();
    let plan = SddmmPlan::tiled(gpu, &c, k, opts.tile_rows.map(|rows| rows.min(largest)));
    let plan_ms = plan.is_ok().then(|| started.elapsed().as_secs_f64() * 1e3);
    let tiled = match &plan {
        Ok(plan) => planned(plan, format!("{}_t{}", plan.kernel_name(), plan.tile_rows()), Summation::Fma, &mut c)?,
        Err(e) => SddmmEntry { name: "sddmm_tiled".into(), ms: Err(e.to_string()), mismatches: None },
    };
    drop(plan);
    let started = std::time::Instant::now();
    let tc_plan = SddmmPlan::tensor_cores(gpu, &c, k);
    let tc_plan_ms = tc_plan.is_ok().then(|| started.elapsed().as_secs_f64() * 1e3);
    let (tc, tc_tiles) = match &tc_plan {
        Ok(plan) => {
            let summation = Summation::tensor_cores(T::DTYPE).expect("SDDMM takes no f64");
            (planned(plan, plan.kernel_name(), summation, &mut c)?, plan.tensor_core_tiles())
        }
        Err(e) => {
            let tiles = crate::sddmm::sddmm_tc_tiles(pattern.indptr().raw_storage(), pattern.indices());
            (SddmmEntry { name: "sddmm_tc".into(), ms: Err(e.to_string()), mismatches: None }, tiles)
        }
    };
    drop(tc_plan);
    let planned_tc = tc.ms.is_ok() && SddmmPlan::tensor_cores_pay(T::DTYPE, k, nnz, tc_tiles);
    let planned_tiled = !planned_tc && SddmmPlan::takes_tiled_kernel(&c, k);
    let mut configs = Vec::new();
    if opts.all_configs {
        for config in SddmmConfig::compiled_for(T::DTYPE).into_iter().filter(|c| k % c.vector_width == 0) {
            configs.push(ours(config, &mut c)?);
        }
    }
    let lib = Cusparse::new(gpu)?;
    let mut cusparse = Vec::new();
    for form in SddmmForm::ALL {
        let name = format!("cuSPARSE SDDMM ({})", form.name());
        let mismatches = match &reference {
            Some(reference) => {
                c.set_values(gpu, &poison)?;
                match CusparseSddmm::new(gpu, &lib, &a_dev, &b_dev, &mut c, form).and_then(|mut s| s.run(gpu)) {
                    Ok(()) => Some(reference.compare(c.download(gpu)?.data()).mismatches),
                    Err(_) => None,
                }
            }
            None => None,
        };
        let ms = CusparseSddmm::new(gpu, &lib, &a_dev, &b_dev, &mut c, form)
            .and_then(|mut s| time_op(gpu, opts.warmup, opts.iters, || s.run(gpu)))
            .map(|t| t.median_ms())
            .map_err(|e| e.to_string());
        cusparse.push(SddmmEntry { name, ms, mismatches });
    }
    let dense_bytes = m.saturating_mul(n).saturating_mul(T::DTYPE.size());
    let cublas = (k > 0 && m > 0 && n > 0 && dense_bytes <= 1 << 32).then(|| {
        let ms = (|| {
            let lib = Cublas::new(gpu)?;
            let a_slice = a_dev.as_slice();
            let bt = DeviceDense::upload(gpu, k, n, &to_t(gen::dense_matrix(k, n, 13)))?;
            let mut dense_c = DeviceDense::<T>::zeros(gpu, m, n)?;
            time_op(gpu, opts.warmup, opts.iters, || lib.gemm_row_major(gpu, a_slice, &bt, &mut dense_c))
                .map(|t| t.median_ms())
        })()
        .map_err(|e| e.to_string());
        SddmmEntry { name: "cuBLAS GEMM m x n x k".into(), ms, mismatches: None }
    });
    Ok(SddmmReport {
        problem: problem.name.clone(),
        m,
        n,
        k,
        nnz,
        auto,
        configs,
        tiled,
        plan_ms,
        planned_tiled,
        planned_tc,
        tc,
        tc_plan_ms,
        tc_tiles,
        cusparse,
        cublas,
    })
}

/// The reports as a table: per problem ours (the automatic choice, and the best config where all were timed),
/// cuSPARSE's best, cuBLAS's GEMM, GFLOP/s and the ratios; then the geometric means.
pub fn print_table(reports: &[SddmmReport]) {
    let ms = |e: Option<&SddmmEntry>| match e.map(|e| &e.ms) {
        Some(Ok(ms)) => format!("{ms:.4}"),
        Some(Err(_)) => "n/a".into(),
        None => "-".into(),
    };
    let ratio = |r: Option<f64>| r.map_or("-".into(), |r| format!("{r:.2}x"));
    println!(
        "{:<40} {:>9} {:>4} {:<18} {:>9} {:>8} {:<22} {:>9} {:>9} {:>8} {:>9} {:>6} {:>9} {:>9} {:>8} {:>8} {:>8} {:>8}",
        "problem",
        "nnz",
        "k",
        "ours (auto)",
        "ms",
        "GFLOP/s",
        "best config",
        "ms",
        "tiled ms",
        "plan ms",
        "tc ms",
        "fill",
        "cuSPARSE",
        "cuBLAS",
        "vs cuSP",
        "tiled",
        "tc",
        "vs cuBLAS"
    );
    for r in reports {
        let best = r.best_config();
        let gflops = r.auto.ms.as_ref().map_or(f64::NAN, |&ms| r.gflops(ms));
        let check = |e: &SddmmEntry| match e.mismatches {
            Some(0) | None => "",
            Some(_) => " WRONG",
        };
        println!(
            "{:<40} {:>9} {:>4} {:<18} {:>9} {:>8.0} {:<22} {:>9} {:>9} {:>8} {:>9} {:>6.3} {:>9} {:>9} {:>8} {:>8} {:>8} {:>8}{}{}{}",
            r.problem,
            r.nnz,
            r.k,
            r.auto.name,
            ms(Some(&r.auto)),
            gflops,
            best.map_or("-".into(), |b| b.name.clone()),
            ms(best),
            ms(Some(&r.tiled)),
            r.plan_ms.map_or("-".into(), |p| format!("{p:.1}")),
            ms(Some(&r.tc)),
            r.tc_fill(),
            ms(r.best_cusparse()),
            ms(r.cublas.as_ref()),
            ratio(r.speedup_vs_cusparse()),
            ratio(r.tiled_vs_cusparse()),
            ratio(r.tc_vs_cusparse()),
            ratio(r.speedup_vs_cublas()),
            check(&r.auto),
            check(&r.tiled),
            check(&r.tc)
        );
    }
    let vs = |f: fn(&SddmmReport) -> Option<f64>| {
        let v: Vec<f64> = reports.iter().filter_map(f).collect();
        let (lo, hi) = v.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), &x| (lo.min(x), hi.max(x)));
        format!("{:.3}x over {} problems ({lo:.2}x-{hi:.2}x)", geomean(&v), v.len())
    };
    println!("geometric mean vs cuSPARSE's best: {}", vs(SddmmReport::speedup_vs_cusparse));
    println!("tiled (planned) vs cuSPARSE's best: {}", vs(SddmmReport::tiled_vs_cusparse));
    println!("tensor cores vs cuSPARSE's best: {}", vs(SddmmReport::tc_vs_cusparse));
    println!("the plan's choice (SddmmPlan::new) vs cuSPARSE's best: {}", vs(SddmmReport::planned_vs_cusparse));
    println!("the faster of ours vs cuSPARSE's best: {}", vs(SddmmReport::best_vs_cusparse));
    println!("geometric mean vs cuBLAS's GEMM: {}", vs(SddmmReport::speedup_vs_cublas));
    if reports.iter().any(|r| r.auto.mismatches.is_some()) {
        println!("verified against the f64 oracle: {} result(s) outside their bound", wrong_results(reports));
    }
}

/// The number of results outside the oracle's bound (0 where nothing was checked).
pub fn wrong_results(reports: &[SddmmReport]) -> usize {
    reports
        .iter()
        .flat_map(|r| [&r.auto, &r.tiled, &r.tc].into_iter().chain(&r.configs).chain(&r.cusparse))
        .filter(|e| e.mismatches.is_some_and(|m| m > 0))
        .count()
}

fn json_entry(e: &SddmmEntry) -> String {
    let check = e.mismatches.map_or(String::new(), |m| format!(",\"mismatches\":{m}"));
    match &e.ms {
        Ok(ms) => format!("{{\"name\":{},\"ms\":{ms}{check}}}", json_str(&e.name)),
        Err(why) => format!("{{\"name\":{},\"error\":{}{check}}}", json_str(&e.name), json_str(why)),
    }
}

/// The reports as JSON (one object per problem).
pub fn reports_to_json(reports: &[SddmmReport]) -> String {
    let items: Vec<String> = reports
        .iter()
        .map(|r| {
            let list = |v: &[SddmmEntry]| v.iter().map(json_entry).collect::<Vec<_>>().join(",");
            format!(
                "{{\"problem\":{},\"m\":{},\"n\":{},\"k\":{},\"nnz\":{},\"auto\":{},\"tiled\":{},\"plan_ms\":{},\"planned_tiled\":{},\"planned_tc\":{},\"tc\":{},\"tc_plan_ms\":{},\"tc_tiles\":{},\"configs\":[{}],\"cusparse\":[{}],\"cublas\":{}}}",
                json_str(&r.problem),
                r.m,
                r.n,
                r.k,
                r.nnz,
                json_entry(&r.auto),
                json_entry(&r.tiled),
                r.plan_ms.map_or("null".into(), |p| p.to_string()),
                r.planned_tiled,
                r.planned_tc,
                json_entry(&r.tc),
                r.tc_plan_ms.map_or("null".into(), |p| p.to_string()),
                r.tc_tiles,
                list(&r.configs),
                list(&r.cusparse),
                r.cublas.as_ref().map_or("null".into(), json_entry)
            )
        })
        .collect();
    format!("[\n{}\n]\n", items.join(",\n"))
}
