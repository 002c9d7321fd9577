//! The `tilesparse` command line: device info, SpMM and SpMV runs with verification, and benchmarks.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::{Args, Parser, Subcommand};
use sprs::CsMat;
use tilesparse::cpu::{backend, oracle};
use tilesparse::kernels::{compiled_spmm_variants, CUDA_ARCHS, KERNELS_BUILT, NVCC_VERSION};
use tilesparse::spmm::SpmmConfig;
use tilesparse::suite::{self, BenchOptions};
use tilesparse::timing::time_op;
use tilesparse::{gen, mtx, DType, DeviceCsr, DeviceDense, Error, Gpu, Result, RowStats, Scalar};

#[derive(Parser)]
#[command(name = "tilesparse", version, about = "GPU sparse-matrix kernels: SpMM, SpMV")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Device, driver and the compiled kernel variants.
    Info,
    /// C = A * B: A sparse (a file or generated), B dense random k x n.
    Spmm(SpmmArgs),
    /// y = alpha * A x + beta * y with the seed prefix-sum kernel.
    Spmv(SpmvArgs),
    /// Benchmarks against cuSPARSE and cuBLAS in the same run.
    #[command(subcommand)]
    Bench(BenchCommand),
}

#[derive(Args, Clone)]
struct MatrixArgs {
    /// Matrix Market file (.mtx or .mtx.gz). Without it, a matrix is generated.
    #[arg(long)]
    matrix: Option<PathBuf>,
    /// Generator: uniform, powerlaw, banded, pruned.
    #[arg(long, default_value = "uniform")]
    gen: String,
    #[arg(long, default_value_t = 4096)]
    m: usize,
    #[arg(long, default_value_t = 4096)]
    k: usize,
    /// Fraction of stored entries (uniform, pruned); powerlaw uses density * k as its mean row length.
    #[arg(long, default_value_t = 0.1)]
    density: f64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

impl MatrixArgs {
    fn load(&self) -> Result<(String, CsMat<f32>)> {
        if let Some(path) = &self.matrix {
            let (a, _) = mtx::read_matrix_market(path)?;
            return Ok((path.display().to_string(), a.map(|&v| v as f32).to_csr()));
        }
        let (m, k, d, s) = (self.m, self.k, self.density, self.seed);
        let a = match self.gen.as_str() {
            "uniform" => gen::uniform_random(m, k, d, s),
            "powerlaw" => gen::power_law(m, k, d * k as f64, 2.0, s),
            "banded" => gen::banded(m, k, ((d * k as f64) / 2.0) as usize, s),
            "pruned" => gen::pruned_dense(m, k, 1.0 - d, s),
            other => {
                return Err(Error::Usage(format!("unknown generator '{other}' (uniform, powerlaw, banded, pruned)")))
            }
        };
        Ok((format!("{}_{m}x{k}_d{d}", self.gen), a))
    }
}

#[derive(Args)]
struct SpmmArgs {
    #[command(flatten)]
    matrix: MatrixArgs,
    /// Columns of B and C.
    #[arg(long, default_value_t = 128)]
    n: usize,
    /// f32 (f16 and bf16 are parsed, and refused until their kernels exist).
    #[arg(long, default_value = "f32")]
    dtype: DType,
    /// `auto` or a kernel name such as spmm_f32_s4d4_y4k32x32w8_u4_pred (see `tilesparse info`).
    #[arg(long, default_value = "auto")]
    config: String,
    /// Check C against the f64 CPU oracle.
    #[arg(long)]
    verify: bool,
    #[arg(long, default_value_t = 5)]
    warmup: usize,
    #[arg(long, default_value_t = 20)]
    iters: usize,
    /// Run on the CPU backend even when a GPU is present.
    #[arg(long)]
    cpu: bool,
}

#[derive(Args)]
struct SpmvArgs {
    #[command(flatten)]
    matrix: MatrixArgs,
    #[arg(long, default_value_t = 1.0)]
    alpha: f32,
    #[arg(long, default_value_t = 0.0)]
    beta: f32,
    /// Untimed runs before timing (the seed's warm-up cycles).
    #[arg(long, default_value_t = 5)]
    warmup: usize,
    /// Timed runs (the seed's profiled iterations).
    #[arg(long, default_value_t = 20)]
    iters: usize,
    /// Write x, y_in and y to Matrix Market files in this folder.
    #[arg(long)]
    dump: Option<PathBuf>,
    /// Value type: f32 (the seed kernel is fp32).
    #[arg(long, default_value = "f32")]
    dtype: DType,
    /// Index type: i32 (the kernels' only one; larger matrices get a typed error).
    #[arg(long, default_value = "i32")]
    index_type: String,
    /// error, warn, info or debug.
    #[arg(long, default_value = "info")]
    log_level: String,
    /// Warn when the matrix has more stored entries than this.
    #[arg(long, default_value_t = 100_000_000)]
    large_threshold: usize,
    #[arg(long)]
    verify: bool,
}

#[derive(Subcommand)]
enum BenchCommand {
    /// The SpMM suite: every compiled variant, the selected one, cuSPARSE ALG1-3 and cuBLAS, per problem.
    Spmm {
        /// Keep problems whose name contains this.
        #[arg(long)]
        filter: Option<String>,
        /// Time only the selected config (not every variant).
        #[arg(long)]
        selected_only: bool,
        #[arg(long, default_value_t = 5)]
        warmup: usize,
        #[arg(long, default_value_t = 30)]
        iters: usize,
        /// Also write the reports as JSON here.
        #[arg(long)]
        json: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let r = match cli.command {
        Command::Info => info(),
        Command::Spmm(args) => run_spmm(args),
        Command::Spmv(args) => run_spmv(args),
        Command::Bench(BenchCommand::Spmm { filter, selected_only, warmup, iters, json }) => {
            bench_spmm(filter, selected_only, warmup, iters, json)
        }
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn info() -> Result<()> {
    println!("tilesparse {}", env!("CARGO_PKG_VERSION"));
    println!(
        "kernels built: {KERNELS_BUILT} ({}; archs {})",
        if NVCC_VERSION.is_empty() { "no nvcc" } else { NVCC_VERSION },
        CUDA_ARCHS.join(",")
    );
    match Gpu::new(0) {
        Ok(gpu) => {
            let i = gpu.info();
            println!(
                "device 0: {} (sm_{}{}), {} SMs, {:.1} GiB, L2 {} MiB, smem/block {} KiB (opt-in {} KiB), driver {}.{}",
                i.name,
                i.compute_capability.0,
                i.compute_capability.1,
                i.sm_count,
                i.total_mem as f64 / (1u64 << 30) as f64,
                i.l2_bytes >> 20,
                i.shared_mem_per_block >> 10,
                i.shared_mem_per_block_optin >> 10,
                i.driver_version / 1000,
                (i.driver_version % 1000) / 10
            );
        }
        Err(e) => println!("no GPU: {e}"),
    }
    println!("compiled SpMM variants ({}):", compiled_spmm_variants().len());
    for c in compiled_spmm_variants() {
        println!("  {c}");
    }
    Ok(())
}

/// Opens the GPU, or says why the CPU will be used.
fn gpu_or_notice(force_cpu: bool) -> Option<Gpu> {
    if force_cpu {
        eprintln!("notice: --cpu given: running on the CPU backend");
        return None;
    }
    if !KERNELS_BUILT {
        eprintln!("notice: this build has no GPU kernels ({}): running on the CPU backend", Error::KernelsNotBuilt);
        return None;
    }
    match Gpu::new(0) {
        Ok(g) => Some(g),
        Err(e) => {
            eprintln!("notice: no GPU ({e}): running on the CPU backend");
            None
        }
    }
}

fn report_check(got: &[f64], want: &[f64], bound: &[f64]) -> Result<()> {
    let cmp = oracle::compare(got, want, bound);
    if cmp.mismatches == 0 {
        println!(
            "verify: OK against the f64 oracle (max abs err {:.3e}, max rel err {:.3e})",
            cmp.max_abs_err, cmp.max_rel_err
        );
        Ok(())
    } else {
        Err(Error::Verification(format!(
            "{} mismatches, first (index, got, want) {:?}",
            cmp.mismatches, cmp.first_mismatch
        )))
    }
}

fn run_spmm(args: SpmmArgs) -> Result<()> {
    let (name, a) = args.matrix.load()?;
    let (m, k, n) = (a.rows(), a.cols(), args.n);
    let b: Vec<f32> = gen::dense_matrix(k, n, args.matrix.seed + 1);
    println!("A: {name}, {m} x {k}, {} nonzeros; B: {k} x {n}; dtype {}", a.nnz(), args.dtype);
    if args.dtype != DType::F32 {
        return Err(Error::UnsupportedDtype { dtype: args.dtype, op: "spmm (f16/bf16 kernels are not built yet)" });
    }
    let flops = 2.0 * a.nnz() as f64 * n as f64;
    // The config is checked before choosing the device, so a bad one is an error on any machine.
    let config = if args.config == "auto" {
        SpmmConfig::select_with_stats(m, k, n, &RowStats::from_indptr(&a.indptr().to_proper()), args.dtype)
    } else {
        let invalid = |rule| Error::InvalidConfig { config: args.config.clone(), rule };
        let c: SpmmConfig = args.config.parse().map_err(invalid)?;
        c.validate().map_err(invalid)?;
        c
    };
    let c: Vec<f32> = match gpu_or_notice(args.cpu) {
        Some(gpu) => {
            let a_dev = DeviceCsr::upload(&gpu, a.view())?;
            let b_dev = DeviceDense::upload(&gpu, k, n, &b)?;
            let mut c_dev = DeviceDense::<f32>::zeros(&gpu, m, n)?;
            let t =
                time_op(&gpu, args.warmup, args.iters, || tilesparse::spmm(&gpu, &a_dev, &b_dev, &mut c_dev, &config))?;
            let ms = t.median_ms();
            println!(
                "GPU {}: {config}: median {ms:.4} ms over {} runs, {:.1} GFLOP/s",
                gpu.info().name,
                args.iters,
                flops / ms / 1e6
            );
            c_dev.download(&gpu)?
        }
        None => {
            let mut c = vec![0f32; m * n];
            let start = Instant::now();
            let runs = args.iters.max(1);
            for _ in 0..runs {
                backend::spmm(a.view(), &b, n, &mut c);
            }
            let ms = start.elapsed().as_secs_f64() * 1e3 / runs as f64;
            println!(
                "CPU backend ({} threads): mean {ms:.3} ms over {runs} runs, {:.2} GFLOP/s",
                rayon::current_num_threads(),
                flops / ms / 1e6
            );
            c
        }
    };
    if args.verify {
        let want = oracle::spmm(a.view(), &b, n);
        let abs = oracle::spmm_abs(a.view(), &b, n);
        let lens: Vec<usize> = a.outer_iterator().map(|r| r.nnz()).collect();
        let bound = oracle::spmm_error_bound(&abs, &lens, n, DType::F32.unit_roundoff(), DType::F32.unit_roundoff());
        let got: Vec<f64> = c.iter().map(|v| v.to_f64()).collect();
        report_check(&got, &want, &bound)?;
    }
    Ok(())
}

fn run_spmv(args: SpmvArgs) -> Result<()> {
    let level = match args.log_level.as_str() {
        "error" => 0,
        "warn" => 1,
        "info" => 2,
        "debug" => 3,
        other => return Err(Error::Usage(format!("unknown log level '{other}' (error, warn, info, debug)"))),
    };
    if args.dtype != DType::F32 {
        return Err(Error::UnsupportedDtype { dtype: args.dtype, op: "the seed spmv (fp32 only)" });
    }
    if args.index_type != "i32" {
        return Err(Error::Usage(format!("index type '{}': the kernels use i32 indices", args.index_type)));
    }
    let (name, a) = args.matrix.load()?;
    let (m, k) = (a.rows(), a.cols());
    if level >= 1 && a.nnz() > args.large_threshold {
        eprintln!("warning: {} nonzeros exceeds the large-matrix threshold {}", a.nnz(), args.large_threshold);
    }
    if level >= 2 {
        println!("A: {name}, {m} x {k}, {} nonzeros; y = {} * A x + {} * y", a.nnz(), args.alpha, args.beta);
    }
    let x: Vec<f32> = gen::dense_matrix(k, 1, args.matrix.seed + 1);
    let y_in: Vec<f32> = gen::dense_matrix(m, 1, args.matrix.seed + 2);
    let y: Vec<f32> = match gpu_or_notice(false) {
        Some(gpu) => {
            let a_dev = DeviceCsr::upload(&gpu, a.view())?;
            let x_dev = gpu.stream().clone_htod(&x).map_err(|e| Error::Driver { what: "uploading x", source: e })?;
            let mut y_dev =
                gpu.stream().clone_htod(&y_in).map_err(|e| Error::Driver { what: "uploading y", source: e })?;
            let mut ws = tilesparse::spmv::SeedSpmvWorkspace::new(&gpu, a.nnz())?;
            // Timed runs overwrite y; beta != 0 makes repeated runs compound, so time on a scratch copy.
            let mut y_scratch = y_dev.clone();
            let t = time_op(&gpu, args.warmup, args.iters, || {
                tilesparse::spmv_seed(&gpu, &a_dev, &x_dev, args.alpha, args.beta, &mut y_scratch, &mut ws)
            })?;
            let ms = t.median_ms();
            let bytes = (a.nnz() * 8 + (m + 1) * 4 + k * 4 + m * 4 * if args.beta != 0.0 { 2 } else { 1 }) as f64;
            if level >= 2 {
                println!("GPU seed SpMV: median {ms:.4} ms, {:.1} GB/s of compulsory traffic", bytes / ms / 1e6);
            }
            tilesparse::spmv_seed(&gpu, &a_dev, &x_dev, args.alpha, args.beta, &mut y_dev, &mut ws)?;
            gpu.stream().clone_dtoh(&y_dev).map_err(|e| Error::Driver { what: "downloading y", source: e })?
        }
        None => {
            let mut y = y_in.clone();
            backend::spmv(a.view(), &x, args.alpha, args.beta, &mut y);
            y
        }
    };
    if let Some(dir) = &args.dump {
        std::fs::create_dir_all(dir).map_err(|e| Error::Usage(format!("{}: {e}", dir.display())))?;
        mtx::write_dense_vector(&dir.join("x.mtx"), &x)?;
        mtx::write_dense_vector(&dir.join("y_in.mtx"), &y_in)?;
        mtx::write_dense_vector(&dir.join("y.mtx"), &y)?;
        if level >= 2 {
            println!("wrote x.mtx, y_in.mtx, y.mtx to {}", dir.display());
        }
    }
    if args.verify {
        let want = oracle::spmv(a.view(), &x, args.alpha as f64, Some(&y_in), args.beta as f64);
        // The seed sums rows as differences of 32-entry block prefixes: its error scales with the block's
        // absolute sum, not the row's (see spmv_seed's docs).
        let abs_a = a.map(|v| v.abs());
        let abs_x: Vec<f32> = x.iter().map(|v| v.abs()).collect();
        let mag = oracle::spmv(abs_a.view(), &abs_x, 1.0, None, 0.0);
        let block_max = mag.iter().fold(0.0f64, |acc, v| acc.max(*v)).max(1.0);
        let bound: Vec<f64> =
            mag.iter().map(|_| 128.0 * f32::EPSILON as f64 * block_max * args.alpha.abs().max(1.0) as f64).collect();
        let got: Vec<f64> = y.iter().map(|v| *v as f64).collect();
        report_check(&got, &want, &bound)?;
    }
    Ok(())
}

fn bench_spmm(
    filter: Option<String>,
    selected_only: bool,
    warmup: usize,
    iters: usize,
    json: Option<PathBuf>,
) -> Result<()> {
    let gpu = Gpu::new(0)?;
    let opts = BenchOptions { warmup, iters, all_variants: !selected_only, ..Default::default() };
    let problems = suite::spmm_suite(filter.as_deref())?;
    println!(
        "device: {}; {} problems; median of {iters} event-timed runs after {warmup} warm-ups",
        gpu.info().name,
        problems.len()
    );
    let mut reports = Vec::new();
    for p in &problems {
        let r = suite::bench_spmm::<f32>(&gpu, p, &opts)?;
        println!("\n== {} (m {} k {} n {} nnz {})", r.problem, r.m, r.k, r.n, r.nnz);
        let line = |e: &suite::Entry| match &e.ms {
            Ok(ms) => format!("{:<44} {:>10.4} ms {:>9.1} GFLOP/s", e.name, ms, r.gflops(*ms)),
            Err(why) => format!("{:<44} {why}", e.name),
        };
        for e in &r.variants {
            println!("  {}", line(e));
        }
        println!("  selected: {}", line(&r.selected));
        for e in &r.cusparse {
            println!("  {}", line(e));
        }
        println!("  {}", line(&r.cublas));
        let fmt = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.2}x"));
        println!(
            "  best variant: {}; selected vs best cuSPARSE: {}; vs cuBLAS: {}; agreement with cuSPARSE {:.1e}",
            r.best_variant().map_or("-".into(), |e| e.name.clone()),
            fmt(r.speedup_vs_cusparse()),
            fmt(r.speedup_vs_cublas()),
            r.agreement
        );
        reports.push(r);
    }
    println!(
        "\n{:<40} {:>10} {:>10} {:>10} {:>9} {:>9}",
        "problem", "ours ms", "GFLOP/s", "cusp ms", "vs cusp", "vs cublas"
    );
    let mut ratios = Vec::new();
    for r in &reports {
        let ours = r.selected.ms.as_ref().ok().copied().unwrap_or(f64::NAN);
        let cusp = r.best_cusparse().and_then(|e| e.ms.as_ref().ok().copied()).unwrap_or(f64::NAN);
        if let Some(s) = r.speedup_vs_cusparse() {
            ratios.push(s);
        }
        println!(
            "{:<40} {:>10.4} {:>10.1} {:>10.4} {:>8.2}x {:>9}",
            r.problem,
            ours,
            r.gflops(ours),
            cusp,
            cusp / ours,
            r.speedup_vs_cublas().map_or("-".into(), |v| format!("{v:.2}x"))
        );
    }
    println!(
        "geometric mean vs best cuSPARSE: {:.3}x over {} problems; min {:.3}x",
        suite::geomean(&ratios),
        ratios.len(),
        ratios.iter().copied().fold(f64::INFINITY, f64::min)
    );
    if let Some(path) = json {
        std::fs::write(&path, suite::reports_to_json(&reports))
            .map_err(|e| Error::Usage(format!("{}: {e}", path.display())))?;
    }
    Ok(())
}
