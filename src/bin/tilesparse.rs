//! The `tilesparse` command line: device info, SpMM and SpMV runs with verification, and benchmarks.

use std::any::Any;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::{Args, Parser, Subcommand};
use cudarc::driver::CudaSlice;
use sprs::CsMat;
use tilesparse::cpu::{backend, oracle};
use tilesparse::kernels::{compiled_spmm_variants, CUDA_ARCHS, KERNELS_BUILT, NVCC_VERSION};
use tilesparse::spgemm::{self, DeviceCoo, LadderKernel, SpgemmPlan, SPGEMM_K4_GRID};
use tilesparse::spmm::{tensor_core, DenseLayouts, Layout, SpmmEpilogue, SpmmKernel, TuneOptions, TunedSpmm};
use tilesparse::spmv::{spmv_error_bound, SeedSpmvWorkspace};
use tilesparse::suite::{self, BenchOptions, BlockedFormat};
use tilesparse::suite_sddmm::{self, SddmmBenchOptions};
use tilesparse::suite_softmax::{self, SoftmaxBenchOptions};
use tilesparse::suite_spgemm;
use tilesparse::suite_spmv::{self, compulsory_bytes};
use tilesparse::timing::time_op;
use tilesparse::{
    gen, mtx, DType, DeviceCsr, DeviceDense, Error, Gpu, Result, Scalar, SddmmConfig, SddmmPlan, SpmvPlan,
};

#[derive(Parser)]
#[command(name = "tilesparse", version, about = "GPU sparse-matrix kernels: SpMM, SDDMM, SpGEMM, SpMV")]
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
    /// C = alpha * (A B^T) o spy(C) + beta * C: C's structure a file or generated, A (m x k) and B (n x k) dense
    /// random; the sampled product a sparse layer's weight gradient takes.
    Sddmm(SddmmArgs),
    /// y = alpha * A x + beta * y with the production SpMV (default) or the seed prefix-sum kernel.
    Spmv(SpmvArgs),
    /// C = A * A (A * A^T when A is not square) with the production SpGEMM or a kernel of the seed's ladder.
    Spgemm(SpgemmArgs),
    /// Benchmarks against cuSPARSE and cuBLAS in the same run.
    #[command(subcommand)]
    Bench(BenchCommand),
}

#[derive(Args, Clone)]
struct MatrixArgs {
    /// Matrix Market file (.mtx or .mtx.gz). Without it, a matrix is generated.
    #[arg(long)]
    matrix: Option<PathBuf>,
    /// Generator: uniform, powerlaw, banded, pruned, scaled-SIGMA (pruned rows scaled by exp(SIGMA * N(0, 1))),
    /// blocks-RxC or blocks-B (blocks of R x C or B x B kept whole at the density).
    #[arg(long, default_value = "uniform")]
    gen: String,
    #[arg(long, default_value_t = 4096)]
    m: usize,
    #[arg(long, default_value_t = 4096)]
    k: usize,
    /// Fraction of stored entries (uniform, pruned), in [0, 1]; powerlaw uses density * k as its mean row
    /// length, banded density * k / 2 as its half-bandwidth (0: the diagonal).
    #[arg(long, default_value_t = 0.1)]
    density: f64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

impl MatrixArgs {
    /// The matrix in f64: a file's values as read, a generator's (f32) exactly.
    fn load(&self) -> Result<(String, CsMat<f64>)> {
        if let Some(path) = &self.matrix {
            let (a, _) = mtx::read_matrix_market(path)?;
            // The reader builds CSR already; to_csr() would copy it.
            let a = if a.is_csr() { a } else { a.to_csr() };
            return Ok((path.display().to_string(), a));
        }
        let (m, k, d, s) = (self.m, self.k, self.density, self.seed);
        if !(0.0..=1.0).contains(&d) {
            return Err(Error::Usage(format!("--density {d}: must be a fraction in [0, 1]")));
        }
        check_dims(&[m, k], "A")?;
        let a = gen::by_name(&self.gen, m, k, d, s)?;
        Ok((format!("{}_{m}x{k}_d{d}", self.gen), a.map(|&v| v as f64)))
    }
}

/// A's values rounded to T, with a warning when finite values overflow T's range (f16 stops at 65504).
fn to_dtype<T: Scalar>(a: CsMat<f64>) -> CsMat<T> {
    let out = a.map(|&v| T::from_f64(v));
    let overflowed = a.data().iter().zip(out.data()).filter(|(v, t)| v.is_finite() && !t.to_f64().is_finite()).count();
    if overflowed > 0 {
        eprintln!("warning: {overflowed} finite values of A are past the range of {} and became +-inf", T::DTYPE);
    }
    out
}

/// Refuses a dimension past i32, which the kernels index with.
fn check_dims(dims: &[usize], what: &str) -> Result<()> {
    match dims.iter().find(|&&d| d > i32::MAX as usize) {
        Some(d) => {
            Err(Error::TooLarge(format!("{what}: dimension {d} is past i32::MAX, which the kernels index with")))
        }
        None => Ok(()),
    }
}

/// Refuses a rows x cols dense matrix whose element count overflows or passes i32::MAX (B's rows are
/// addressed with 32-bit offsets on the GPU; the CPU run keeps the same limit so both accept the same problems).
fn check_elems(rows: usize, cols: usize, what: &str) -> Result<()> {
    match rows.checked_mul(cols) {
        Some(e) if e <= i32::MAX as usize => Ok(()),
        _ => Err(Error::TooLarge(format!("{what}: {rows} x {cols} elements, past i32::MAX"))),
    }
}

/// A host vector of `len` copies of `value`, or an error instead of an abort when the memory is not there.
fn host_vec<T: Clone>(len: usize, value: T, what: &str) -> Result<Vec<T>> {
    let mut v = Vec::new();
    let bytes = len.saturating_mul(std::mem::size_of::<T>());
    v.try_reserve_exact(len)
        .map_err(|_| Error::Usage(format!("cannot allocate {what} on the host ({bytes} bytes)")))?;
    v.resize(len, value);
    Ok(v)
}

#[derive(Args)]
struct SpmmArgs {
    #[command(flatten)]
    matrix: MatrixArgs,
    /// Columns of B and C.
    #[arg(long, default_value_t = 128)]
    n: usize,
    /// Element type of A, B and C: f32, f16 or bf16 (accumulation is f32).
    #[arg(long, default_value = "f32")]
    dtype: DType,
    /// `auto` or a kernel name such as spmm_f32_s4d4_y4k32x32w8_u4_pred (see `tilesparse info`), or a tensor-core
    /// kernel: f16/bf16 spmm_tc_<dtype>_n<4|8> (16-row windows) or spmm_tc_<dtype>_w<32|64>_n<8|16> (32- or 64-row
    /// windows); f32 spmm_tc_f32_n4, spmm_tc_f32_w<32|64>_n8 (3xTF32) or spmm_tc_f32_w64_n16 (3xTF32 on wgmma, sm_90
    /// only). A tensor-core kernel runs an n that is not a multiple of 8 on copies of B and C padded to one.
    #[arg(long, default_value = "auto")]
    config: String,
    /// Choose the kernel by timing every one that can run the product on this matrix (`spmm_tune`), then run the
    /// fastest; it replaces the automatic choice only where it is at least 2% faster. GPU only, with --config auto.
    /// Every kernel is timed with the epilogue it then runs with (`spmm_tune_with`): the scalars (--alpha, --beta)
    /// and the bias + ReLU (--bias-relu).
    #[arg(long)]
    tune: bool,
    /// With --tune: A's values change before every product (a weight in training, `DeviceCsr::set_values`), so each
    /// tensor-core kernel is timed with the rewrite of its blocks that an update costs it
    /// (`TuneOptions::values_change`).
    #[arg(long, requires = "tune")]
    values_change: bool,
    /// Check C against the f64 CPU oracle.
    #[arg(long)]
    verify: bool,
    /// C = ReLU(A * B + bias), with a random bias of one f32 in [-1, 1) per row (from the seed): the fused bias +
    /// ReLU epilogue of every kernel (and of the CPU backend).
    #[arg(long)]
    bias_relu: bool,
    /// C = alpha * A * B + beta * C (then the bias and ReLU with --bias-relu), fused into every kernel.
    #[arg(long, default_value_t = 1.0, allow_hyphen_values = true)]
    alpha: f32,
    /// With beta not 0, C starts as random values in [-1, 1) (from the seed) and is read; each timed run reads the
    /// last one's C, and the result checked is one run's on the starting C.
    #[arg(long, default_value_t = 0.0, allow_hyphen_values = true)]
    beta: f32,
    #[arg(long, default_value_t = 5)]
    warmup: usize,
    #[arg(long, default_value_t = 20)]
    iters: usize,
    /// Run on the CPU backend even when a GPU is present.
    #[arg(long)]
    cpu: bool,
    /// C = A^T * B instead (B has A's rows, C A's columns): on the GPU, A is uploaded and transposed on the device
    /// once (`DeviceCsr::transpose`), and the kernel, --tune and the timing run on A^T; the CPU backend and
    /// --verify take sprs's transpose of A.
    #[arg(long)]
    transpose: bool,
    /// B's layout in device memory, row or col (column-major: `spmm_layouts`, B transposed on the device before
    /// the product; the CPU backend computes the same product row-major).
    #[arg(long, default_value = "row")]
    b_layout: Layout,
    /// C's layout in device memory, row or col (column-major: the product computed row-major, then transposed into
    /// C on the device).
    #[arg(long, default_value = "row")]
    c_layout: Layout,
}

#[derive(Args)]
struct SpmvArgs {
    #[command(flatten)]
    matrix: MatrixArgs,
    #[arg(long, default_value_t = 1.0)]
    alpha: f64,
    #[arg(long, default_value_t = 0.0)]
    beta: f64,
    /// Untimed runs before timing (the seed's warm-up cycles).
    #[arg(long, default_value_t = 5)]
    warmup: usize,
    /// Timed runs (the seed's profiled iterations).
    #[arg(long, default_value_t = 20)]
    iters: usize,
    /// Write x, y_in and y to Matrix Market files in this folder.
    #[arg(long)]
    dump: Option<PathBuf>,
    /// Value type: f32, f64, f16 or bf16 (the seed kernel is fp32 only).
    #[arg(long, default_value = "f32")]
    dtype: DType,
    /// The production SpMV or the seed prefix-sum kernel.
    #[arg(long, value_enum, default_value = "production")]
    kernel: SpmvKernel,
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

#[derive(Args)]
struct SpgemmArgs {
    #[command(flatten)]
    matrix: MatrixArgs,
    /// production (plan + numeric, sorted CSR), or a ladder kernel: k0, k1, k2, k3, k4, kp, or a grid point
    /// such as k4_b256_t2048 / kp_b128_t1024.
    #[arg(long, default_value = "production")]
    kernel: String,
    /// Check C (sorted CSR; the ladder's COO converted on the GPU) against the f64 oracle.
    #[arg(long)]
    verify: bool,
    /// Untimed runs before timing (the seed skipped its first 3).
    #[arg(long, default_value_t = 3)]
    warmup: usize,
    #[arg(long, default_value_t = 10)]
    iters: usize,
}

/// The SpMV kernels of `tilesparse spmv`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum SpmvKernel {
    Seed,
    Production,
}

impl SpmvKernel {
    fn name(self) -> &'static str {
        match self {
            SpmvKernel::Seed => "seed",
            SpmvKernel::Production => "production",
        }
    }
}

/// What every suite benchmark takes.
#[derive(Args)]
struct SddmmArgs {
    /// C's structure (its values are not read); --m and --k set its rows and columns when generated.
    #[command(flatten)]
    matrix: MatrixArgs,
    /// The inner dimension: A is m x k_inner and B n x k_inner.
    #[arg(long = "inner", default_value_t = 64)]
    inner: usize,
    /// Element type of A, B and C: f32, f16 or bf16 (the sums are f32).
    #[arg(long, default_value = "f32")]
    dtype: DType,
    /// `auto` or a kernel name such as sddmm_f32_v4_l8_r1 (vector width, lanes per entry, runs per warp), or
    /// sddmm_tc_f32 (also _f16, _bf16): the tensor cores through a plan (`SddmmPlan::tensor_cores`).
    #[arg(long, default_value = "auto")]
    config: String,
    #[arg(long, default_value_t = 1.0, allow_hyphen_values = true)]
    alpha: f32,
    /// With beta not 0, C's values start random in [-1, 1) (from the seed) and are read.
    #[arg(long, default_value_t = 0.0, allow_hyphen_values = true)]
    beta: f32,
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
    /// Prepare the product for C's structure first (`SddmmPlan::new`: the tensor cores or the tiled kernel where they
    /// pay, else the automatic choice) and run it with `sddmm_planned`. With --config auto only.
    #[arg(long)]
    plan: bool,
}

#[derive(Args)]
struct SuiteArgs {
    /// Keep problems whose name contains this.
    #[arg(long)]
    filter: Option<String>,
    #[arg(long, default_value_t = 5)]
    warmup: usize,
    #[arg(long, default_value_t = 30)]
    iters: usize,
    /// Also write the reports as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
}

#[derive(Subcommand)]
enum BenchCommand {
    /// The SpMV suite: seed, production, cuSPARSE CSR ALG1/ALG2, effective bandwidth against the copy bandwidth.
    Spmv {
        #[command(flatten)]
        suite: SuiteArgs,
    },
    /// The SpMM suite: every compiled variant, the selected one, cuSPARSE ALG1-3 and cuBLAS, per problem.
    Spmm {
        #[command(flatten)]
        suite: SuiteArgs,
        /// Time the selected config, not every tiled variant (the tensor-core kernels are still timed).
        #[arg(long)]
        selected_only: bool,
        /// Element type: f32, f16 or bf16 (cuSPARSE and cuBLAS get the same type, fp32 compute).
        #[arg(long, default_value = "f32")]
        dtype: DType,
        /// Your own matrix (Matrix Market, .mtx or .mtx.gz) instead of the suite; repeat for several.
        #[arg(long = "matrix")]
        matrices: Vec<PathBuf>,
        /// A generated matrix instead of the suite, as GENERATOR:MxK:DENSITY[:SEED[:eFRACTION]] with the
        /// generators of `spmm --gen` (uniform, powerlaw, banded, pruned, scaled-SIGMA, blocks-RxC), e.g.
        /// uniform:8192x2048:0.085 or blocks-16x16:3072x768:0.1;
        /// eFRACTION empties that share of the rows (powerlaw:16384x4096:0.002:7:e0.5); repeat for several.
        #[arg(long = "gen")]
        generated: Vec<String>,
        /// Widths of B for --matrix and --gen, comma-separated (default 128).
        #[arg(long, value_delimiter = ',')]
        n: Vec<usize>,
        /// Check every result timed against the f64 CPU oracle (C poisoned, one run, each kernel's error bound);
        /// a result outside its bound is marked WRONG, left out of "best variant", and fails the command.
        #[arg(long)]
        verify: bool,
        /// Also choose a kernel by timing (`spmm_tune`, as `spmm --tune` does) and time it beside the selected one.
        #[arg(long)]
        tune: bool,
        /// Also time C = ReLU(A * B + bias), a random bias per row: the selected kernel with its fused epilogue
        /// against cuSPARSE's fastest CSR algorithm followed by a bias + ReLU pass over C.
        #[arg(long)]
        bias_relu: bool,
        /// With --beta: also time C = alpha * A * B + beta * C, the selected kernel with the scalars fused against
        /// cuSPARSE's fastest CSR algorithm with its own (C starts as random values; each timed run reads the last
        /// one's C; --verify checks one run on the starting C).
        #[arg(long, allow_hyphen_values = true, requires = "beta")]
        alpha: Option<f32>,
        /// See --alpha (default 1 there).
        #[arg(long, allow_hyphen_values = true)]
        beta: Option<f32>,
        /// Bench C = A^T * B: each A is transposed on the device (`DeviceCsr::transpose`, its time printed), every
        /// kernel and baseline runs on A^T, and cuSPARSE's SpMM with A transposed and its csr2csc conversion, both on
        /// A, are timed beside them.
        #[arg(long)]
        transpose: bool,
        /// Also time the product with B and C column-major: ours (`spmm_layouts` with the selected kernel, B and C
        /// transposed on the device around it) against cuSPARSE's SpMM with both column-major, each CSR algorithm.
        #[arg(long)]
        col_major: bool,
    },
    /// The SDDMM suite (or your matrices as C's structure): ours against cuSPARSE's SDDMM and cuBLAS's GEMM of the
    /// same m x n x k.
    Sddmm {
        #[command(flatten)]
        suite: SuiteArgs,
        /// Element type: f32, f16 or bf16.
        #[arg(long, default_value = "f32")]
        dtype: DType,
        /// Your own matrix (Matrix Market) as C's structure instead of the suite; repeat for several.
        #[arg(long = "matrix")]
        matrices: Vec<PathBuf>,
        /// A generated structure, GENERATOR:MxN:DENSITY[:SEED[:eFRACTION]] as for `bench spmm --gen`.
        #[arg(long = "gen")]
        generated: Vec<String>,
        /// Inner dimensions for --matrix and --gen, comma-separated (default 64).
        #[arg(long, value_delimiter = ',')]
        k: Vec<usize>,
        /// Time every compiled config that can run each problem, not only the automatic choice.
        #[arg(long)]
        all_configs: bool,
        /// Check every result timed (ours and cuSPARSE's) against the f64 oracle first; one outside its bound is
        /// marked and fails the command.
        #[arg(long)]
        verify: bool,
        /// Rows per tile of the tiled kernel's plan (`SddmmPlan::tiled`; at most the largest that fits the
        /// shared memory at each k, which is the default).
        #[arg(long)]
        tile_rows: Option<usize>,
    },
    /// The sparse softmax and its gradient (the suite, or your matrices), as bandwidth against the device's copy.
    Softmax {
        #[command(flatten)]
        suite: SuiteArgs,
        /// Element type: f32, f16 or bf16.
        #[arg(long, default_value = "f32")]
        dtype: DType,
        /// Your own matrix (Matrix Market) instead of the suite; repeat for several.
        #[arg(long = "matrix")]
        matrices: Vec<PathBuf>,
        /// A generated matrix, GENERATOR:MxN:DENSITY[:SEED[:eFRACTION]] as for `bench spmm --gen`.
        #[arg(long = "gen")]
        generated: Vec<String>,
        /// Time every config (each lane count, with and without the chunk kernels), not only the automatic one.
        #[arg(long)]
        all_configs: bool,
        /// Check every config timed, forward and backward, against the f64 oracle first; one outside its bound is
        /// marked and fails the command.
        #[arg(long)]
        verify: bool,
    },
    /// The SpGEMM suite: the production SpGEMM end to end against cuSPARSE ALG1/2/3, with peak device memory.
    SpgemmSuite {
        #[command(flatten)]
        suite: SuiteArgs,
        /// Override the dense-bin threshold of the production SpGEMM (rows with more entries use dense column
        /// tiles; 1..=8192), for measuring it.
        #[arg(long)]
        dense_from: Option<usize>,
    },
    /// The seed's SpGEMM ladder on C = A * A: CPU backend, k0..k4 and kp, then the k4 (block, tile) grid search.
    Spgemm {
        #[command(flatten)]
        matrix: MatrixArgs,
        /// Write the k4 grid search as an SVG heat map here.
        #[arg(long)]
        svg: Option<PathBuf>,
        /// Untimed runs before timing each kernel.
        #[arg(long, default_value_t = 3)]
        warmup: usize,
        #[arg(long, default_value_t = 10)]
        iters: usize,
    },
}

/// Restores the default action of SIGPIPE, which Rust's runtime sets to ignore: output into a pipe whose reader
/// has gone (`tilesparse info | head -3`) then ends the CLI quietly, as it does other command-line tools, where
/// `println!` would panic on the write's EPIPE.
fn quiet_on_closed_pipe() {
    // SAFETY: called first in main, before any other thread exists; SIG_DFL is a valid action for SIGPIPE.
    #[cfg(unix)]
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn main() -> ExitCode {
    quiet_on_closed_pipe();
    let cli = Cli::parse();
    let r = match cli.command {
        Command::Info => info(),
        Command::Spmm(args) => run_spmm(args),
        Command::Spmv(args) => run_spmv(args),
        Command::Sddmm(args) => run_sddmm(args),
        Command::Bench(BenchCommand::Sddmm {
            suite,
            dtype,
            matrices,
            generated,
            k,
            all_configs,
            verify,
            tile_rows,
        }) => {
            let opts = SddmmBenchOptions { warmup: suite.warmup, iters: suite.iters, all_configs, verify, tile_rows };
            bench_sddmm(suite, dtype, &matrices, &generated, &k, opts)
        }
        Command::Bench(BenchCommand::Softmax { suite, dtype, matrices, generated, all_configs, verify }) => {
            let opts = SoftmaxBenchOptions { warmup: suite.warmup, iters: suite.iters, all_configs, verify };
            bench_softmax(suite, dtype, &matrices, &generated, opts)
        }
        Command::Bench(BenchCommand::Spmv { suite }) => bench_spmv(suite),
        Command::Bench(BenchCommand::Spmm {
            suite,
            selected_only,
            dtype,
            matrices,
            generated,
            n,
            verify,
            tune,
            bias_relu,
            alpha,
            beta,
            transpose,
            col_major,
        }) => {
            let scaled = beta.map(|beta| (alpha.unwrap_or(1.0), beta));
            let all_variants = !selected_only;
            let opts = BenchOptions {
                all_variants,
                verify,
                tune,
                bias_relu,
                scaled,
                transpose,
                col_major,
                ..Default::default()
            };
            bench_spmm(suite, opts, dtype, &matrices, &generated, &n)
        }
        Command::Spgemm(args) => run_spgemm(args),
        Command::Bench(BenchCommand::SpgemmSuite { suite, dense_from }) => bench_spgemm_suite(suite, dense_from),
        Command::Bench(BenchCommand::Spgemm { matrix, svg, warmup, iters }) => bench_ladder(matrix, svg, warmup, iters),
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

/// Prints the oracle check of a result stored as `dtype` (C, row-major with `cols` columns, or the vector y when
/// `cols` is 0), or returns the first mismatch as an error. Sums past `dtype`'s range may be stored as infinite
/// ([`oracle::compare_stored`]).
fn report_check(got: &[f64], want: &[f64], bound: &[f64], cols: usize, dtype: DType) -> Result<()> {
    let cmp = oracle::compare_stored(got, want, bound, dtype);
    let at = |i: usize| match (i.checked_div(cols), i.checked_rem(cols)) {
        (Some(r), Some(c)) => format!("C[{r}][{c}]"),
        _ => format!("y[{i}]"),
    };
    if got.is_empty() {
        println!("verify: OK against the f64 oracle (the result is empty)");
        return Ok(());
    }
    if cmp.mismatches == 0 {
        println!(
            "verify: OK against the f64 oracle: max abs err {:.3e}; the largest error is {:.3} of its bound ({})",
            cmp.max_abs_err,
            cmp.worst_ratio,
            at(cmp.worst_index)
        );
        Ok(())
    } else {
        let (i, g, w) = cmp.first_mismatch.expect("a mismatch was counted");
        Err(Error::Verification(format!(
            "{} of {} elements outside the error bound; the first, {}: got {g:e}, want {w:e}, bound {:.3e}",
            cmp.mismatches,
            got.len(),
            at(i),
            bound[i]
        )))
    }
}

fn run_spmm(args: SpmmArgs) -> Result<()> {
    match args.dtype {
        DType::F32 => run_spmm_typed::<f32>(args),
        DType::F16 => run_spmm_typed::<half::f16>(args),
        DType::Bf16 => run_spmm_typed::<half::bf16>(args),
        DType::F64 => Err(Error::UnsupportedDtype { dtype: DType::F64, op: "spmm (f32, f16, bf16)" }),
    }
}

/// SpMM with elements of type T (A and B generated or read in f32, then rounded to T).
fn run_spmm_typed<T: Scalar>(args: SpmmArgs) -> Result<()> {
    let (name, a64) = args.matrix.load()?;
    // With --transpose, `a` is A^T (sprs's, for the CPU backend and the oracle) and `given` A as loaded.
    let (a, given, op) = match to_dtype::<T>(a64) {
        given if args.transpose => (given.transpose_view().to_csr(), Some(given), "A^T"),
        a => (a, None, "A"),
    };
    let (m, k, n) = (a.rows(), a.cols(), args.n);
    check_dims(&[n], "B")?;
    check_elems(k, n, "B")?;
    let b: Vec<T> = gen::dense_matrix(k, n, args.matrix.seed + 1).into_iter().map(T::from_f32).collect();
    let bias: Option<Vec<f32>> = args.bias_relu.then(|| gen::dense_matrix(m, 1, args.matrix.seed + 2));
    let (alpha, beta) = (args.alpha, args.beta);
    // The plain product: no scalars, no bias (the CPU backend's plain path, the oracle's A * B as it is).
    let plain = alpha == 1.0 && beta == 0.0 && bias.is_none();
    // C's starting values: random where beta reads them, else a poison that must not reach C.
    let c0: Vec<T> = if beta != 0.0 {
        check_elems(m, n, "C")?;
        gen::dense_matrix(m, n, args.matrix.seed + 3).into_iter().map(T::from_f32).collect()
    } else {
        let len = m.checked_mul(n).ok_or_else(|| Error::TooLarge(format!("C: {m} x {n} elements")))?;
        host_vec(len, T::from_f32(-7.5e3), "C")?
    };
    let product = match (alpha, beta) {
        (1.0, 0.0) => format!("{op} * B"),
        (a, 0.0) => format!("{a} * {op} * B"),
        (a, b) => format!("{a} * {op} * B + {b} * C"),
    };
    let epilogue = match &bias {
        Some(_) => format!("; C = ReLU({product} + bias)"),
        None if plain && given.is_none() => String::new(),
        None => format!("; C = {product}"),
    };
    let shape = if given.is_some() { format!("A^T of {name}") } else { format!("A: {name}") };
    let b_held = if args.b_layout == Layout::ColMajor { " (column-major)" } else { "" };
    let c_held = if args.c_layout == Layout::ColMajor { "; C column-major" } else { "" };
    println!("{shape}, {m} x {k}, {} nonzeros; B: {k} x {n}{b_held}{c_held}; dtype {}{epilogue}", a.nnz(), T::DTYPE);
    let flops = 2.0 * a.nnz() as f64 * n as f64;
    // The config is checked before choosing the device, so a bad one is an error on any machine. None: the
    // automatic choice, made for the device once A is on it (`auto_kernel`).
    let explicit = if args.config == "auto" {
        None
    } else {
        let invalid = |rule| Error::InvalidConfig { config: args.config.clone(), rule };
        let kernel: SpmmKernel = args.config.parse().map_err(invalid)?;
        let check = match kernel {
            SpmmKernel::Tiled(c) => tilesparse::spmm::check_config(&c, T::DTYPE, m, k, n),
            SpmmKernel::TensorCore(c) => tensor_core::check_tensor_core(&c, T::DTYPE, m, n),
        };
        match check {
            // A build without kernels runs on the CPU, where the config plays no part.
            Ok(()) | Err(Error::KernelsNotBuilt) => {}
            Err(e) => return Err(e),
        }
        Some(kernel)
    };
    if args.tune && (explicit.is_some() || args.cpu) {
        return Err(Error::Usage("--tune chooses the kernel on the GPU: it takes neither --config nor --cpu".into()));
    }
    let gpu = gpu_or_notice(args.cpu);
    // C, and the kernel that computed it (None: the CPU backend).
    let (c, ran): (Vec<T>, Option<SpmmKernel>) = match gpu {
        Some(gpu) => {
            let a_dev = match &given {
                Some(given) => {
                    let start = Instant::now();
                    let at = DeviceCsr::upload(&gpu, given.view())?.transpose(&gpu)?;
                    gpu.synchronize()?;
                    let ms = start.elapsed().as_secs_f64() * 1e3;
                    println!("A uploaded and transposed on the device in {ms:.1} ms (host time)");
                    at.into_matrix()
                }
                None => DeviceCsr::upload(&gpu, a.view())?,
            };
            let b_dev = DeviceDense::upload(&gpu, k, n, &b)?;
            let mut c_dev = DeviceDense::upload(&gpu, m, n, &c0)?;
            let bias_dev = bias.as_deref().map(|bias| tilesparse::spmm::upload_bias(&gpu, bias)).transpose()?;
            let epilogue = SpmmEpilogue { alpha, beta, bias: bias_dev.as_ref() };
            let config = match explicit {
                Some(kernel) => kernel,
                None if args.tune => {
                    // Every candidate is timed with the epilogue it then runs with, on C's starting values.
                    let opts = TuneOptions { values_change: args.values_change, ..TuneOptions::default() };
                    let tuned = tilesparse::spmm_tune_with(&gpu, &a_dev, &b_dev, &mut c_dev, epilogue, &opts)?;
                    print_tuned(&tuned);
                    tuned.kernel
                }
                // The automatic choice for this device (the mma.sync f32 kernel or the tiles where it has no
                // warpgroup mma; no tensor cores where A holds Inf or NaN).
                None => tilesparse::spmm::auto_kernel(&gpu, &a_dev, n)?,
            };
            // B and C as their layouts hold them (a column-major one is the row-major transpose); the tuner ran on
            // the row-major ones and left its result in C: the timed runs start from C's starting values.
            let layouts = DenseLayouts { b: args.b_layout, c: args.c_layout };
            let b_held = match layouts.b {
                Layout::RowMajor => None,
                Layout::ColMajor => Some(DeviceDense::upload(&gpu, n, k, &host_transpose(&b, k, n))?),
            };
            let b_held = b_held.as_ref().unwrap_or(&b_dev);
            let c0_held = match layouts.c {
                Layout::RowMajor => c0.clone(),
                Layout::ColMajor => host_transpose(&c0, m, n),
            };
            let (c_rows, c_cols) = if layouts.c == Layout::ColMajor { (n, m) } else { (m, n) };
            c_dev = DeviceDense::upload(&gpu, c_rows, c_cols, &c0_held)?;
            let run = |c: &mut DeviceDense<T>| {
                tilesparse::spmm_layouts(&gpu, &a_dev, b_held, c, layouts, Some(&config), epilogue).map(|_| ())
            };
            let t = time_op(&gpu, args.warmup, args.iters, || run(&mut c_dev))?;
            if beta != 0.0 {
                // Each timed run read the last one's C: the result is one run's on the starting values.
                c_dev = DeviceDense::upload(&gpu, c_rows, c_cols, &c0_held)?;
                run(&mut c_dev)?;
            }
            let ms = t.median_ms();
            let splits = match &config {
                SpmmKernel::Tiled(c) => tilesparse::spmm::splits_rows(&gpu, &a_dev, n, c)?,
                SpmmKernel::TensorCore(_) => false,
            };
            let split = if splits {
                format!(" (rows longer than {} entries split into pieces)", tilesparse::spmm::split::PIECE_LEN)
            } else {
                String::new()
            };
            println!(
                "GPU {}: {config}{split}: median {ms:.4} ms over {} runs, {:.1} GFLOP/s",
                gpu.info().name,
                args.iters,
                flops / ms / 1e6
            );
            let held = c_dev.download(&gpu)?;
            let c = if layouts.c == Layout::ColMajor { host_transpose(&held, n, m) } else { held };
            (c, Some(config))
        }
        None => {
            if args.tune {
                eprintln!("notice: --tune times GPU kernels; there are none to choose from on the CPU backend");
            }
            // The starting C (with beta 0 a poison: the backend must write every element).
            let mut c = c0.clone();
            let run = |c: &mut [T]| {
                if plain {
                    backend::spmm(a.view(), &b, n, c)
                } else {
                    backend::spmm_epilogue(a.view(), &b, n, alpha, beta, bias.as_deref(), c)
                }
            };
            let start = Instant::now();
            let runs = args.iters.max(1);
            for _ in 0..runs {
                run(&mut c);
            }
            let ms = start.elapsed().as_secs_f64() * 1e3 / runs as f64;
            if beta != 0.0 {
                // As on the GPU: the result is one run's on the starting values.
                c.copy_from_slice(&c0);
                run(&mut c);
            }
            println!(
                "CPU backend ({} threads): mean {ms:.3} ms over {runs} runs, {:.2} GFLOP/s",
                rayon::current_num_threads(),
                flops / ms / 1e6
            );
            (c, None)
        }
    };
    if args.verify {
        // The oracle sees the rounded inputs; the bound covers f32 accumulation and rounding to T, by FMAs (the
        // tiles, the CPU backend) or on the tensor cores, whose mma truncates (SpmmKernel::summation).
        let want = oracle::spmm(a.view(), &b, n);
        let abs = oracle::spmm_abs(a.view(), &b, n);
        let summation = ran.map_or(oracle::Summation::Fma, |kernel| kernel.summation());
        let bound = oracle::spmm_error_bound_for(summation, a.view(), &b, n, &want, &abs);
        // With an epilogue: alpha * A * B + beta * C0 (+ bias, ReLU) and its bound from A * B's
        // (oracle::epilogue_reference).
        let (want, bound) = if plain {
            (want, bound)
        } else {
            let c0: Vec<f64> = if beta != 0.0 { c0.iter().map(|v| v.to_f64()).collect() } else { Vec::new() };
            let scalars = oracle::EpilogueScalars { alpha, beta, c0: &c0, bias: bias.as_deref() };
            oracle::epilogue_reference(&want, &bound, &scalars, n, T::DTYPE)
        };
        let got: Vec<f64> = c.iter().map(|v| v.to_f64()).collect();
        report_check(&got, &want, &bound, n, T::DTYPE)?;
    }
    Ok(())
}

/// The row-major `cols x rows` transpose of a row-major `rows x cols` matrix: a column-major matrix's storage.
fn host_transpose<T: Copy>(x: &[T], rows: usize, cols: usize) -> Vec<T> {
    (0..cols).flat_map(|j| (0..rows).map(move |i| x[i * cols + j])).collect()
}

/// What `spmm --tune` found: the finalists' times, the choice, and what was skipped.
fn print_tuned(t: &TunedSpmm) {
    println!(
        "tuned: {} kernels timed in {:.0} ms (host time); the finalists, median of their second-round runs:",
        t.screened,
        t.elapsed.as_secs_f64() * 1e3
    );
    for f in &t.finalists {
        let tags = [(f.kernel == t.kernel, "chosen"), (f.kernel == t.automatic, "automatic")];
        let tags: Vec<&str> = tags.iter().filter(|(on, _)| *on).map(|(_, tag)| *tag).collect();
        let tags = if tags.is_empty() { String::new() } else { format!(" ({})", tags.join(", ")) };
        println!("  {:<44} {:>10.4} ms{tags}", f.kernel.to_string(), f.ms);
    }
    for (kernel, why) in &t.skipped {
        println!("  skipped {kernel}: {why}");
    }
    println!("tuned: {} is {:.2}x the automatic choice's speed", t.kernel, t.speedup());
}

fn run_sddmm(args: SddmmArgs) -> Result<()> {
    match args.dtype {
        DType::F32 => run_sddmm_typed::<f32>(args),
        DType::F16 => run_sddmm_typed::<half::f16>(args),
        DType::Bf16 => run_sddmm_typed::<half::bf16>(args),
        DType::F64 => Err(Error::UnsupportedDtype { dtype: DType::F64, op: "sddmm (f32, f16, bf16)" }),
    }
}

/// SDDMM with elements of type T: C's structure loaded or generated, A and B random, C's values random where beta
/// reads them. On the GPU the config is checked, the product timed and C downloaded; without one, the CPU backend.
fn run_sddmm_typed<T: Scalar>(args: SddmmArgs) -> Result<()> {
    let (name, pattern) = args.matrix.load()?;
    let pattern: CsMat<T> = pattern.map(|_| T::from_f32(0.0));
    let (m, n, k) = (pattern.rows(), pattern.cols(), args.inner);
    check_dims(&[k], "A")?;
    check_elems(m, k, "A")?;
    check_elems(n, k, "B")?;
    let to_t = |v: Vec<f32>| v.into_iter().map(T::from_f32).collect::<Vec<T>>();
    let a = to_t(gen::dense_matrix(m, k, args.matrix.seed + 1));
    let b = to_t(gen::dense_matrix(n, k, args.matrix.seed + 2));
    let (alpha, beta) = (args.alpha, args.beta);
    let c0: Vec<T> = if beta != 0.0 {
        to_t(gen::dense_matrix(pattern.nnz(), 1, args.matrix.seed + 3))
    } else {
        vec![T::from_f32(-7.5e3); pattern.nnz()]
    };
    println!(
        "C: {name}, {m} x {n}, {} entries; A: {m} x {k}; B: {n} x {k}; dtype {}; C = {alpha} * (A B^T) o spy(C) + {beta} * C",
        pattern.nnz(),
        T::DTYPE
    );
    if args.plan && args.config != "auto" {
        return Err(Error::Usage("--plan chooses the kernel; give it with --config auto".into()));
    }
    let tensor_cores = args.config == tilesparse::sddmm::sddmm_tc_kernel_name(T::DTYPE);
    let config = if args.config == "auto" || tensor_cores {
        SddmmConfig::select(k, pattern.nnz(), T::DTYPE)
    } else {
        let found = SddmmConfig::compiled_for(T::DTYPE).into_iter().find(|c| c.kernel_name() == args.config);
        found.ok_or_else(|| Error::InvalidConfig {
            config: args.config.clone(),
            rule: format!(
                "not an SDDMM kernel for {} (sddmm_{}_v<vector>_l<lanes>_r<1|4>, or sddmm_tc_{})",
                T::DTYPE,
                T::DTYPE,
                T::DTYPE
            ),
        })?
    };
    // A vector that does not divide k is refused on any machine, as the GPU refuses it.
    if k % config.vector_width != 0 {
        return Err(Error::Unsupported {
            config: config.kernel_name(),
            reason: format!(
                "its vector width {} does not divide k = {k}; {} runs it",
                config.vector_width,
                SddmmConfig::select(k, pattern.nnz(), T::DTYPE).kernel_name()
            ),
        });
    }
    let flops = 2.0 * pattern.nnz() as f64 * k as f64;
    // How the kernel that ran summed (the bound it is checked against): the CPU backend and the CUDA-core kernels
    // with FMAs, the tensor cores their own way.
    let mut summation = oracle::Summation::Fma;
    let got: Vec<T> = match gpu_or_notice(args.cpu) {
        Some(gpu) => {
            let a_dev = DeviceDense::upload(&gpu, m, k, &a)?;
            let b_dev = DeviceDense::upload(&gpu, n, k, &b)?;
            let mut c = DeviceCsr::upload(&gpu, pattern.view())?;
            c.set_values(&gpu, &c0)?;
            // With --plan, the prepared product (`SddmmPlan`: the tensor cores or the tiled kernel where they pay),
            // with sddmm_tc_* the tensor cores' plan; else the config.
            let plan = match args.plan || tensor_cores {
                true => {
                    let started = Instant::now();
                    let plan = match tensor_cores {
                        true => SddmmPlan::tensor_cores(&gpu, &c, k)?,
                        false => SddmmPlan::new(&gpu, &c, k)?,
                    };
                    let ms = started.elapsed().as_secs_f64() * 1e3;
                    println!(
                        "plan: {} ({} rows per tile, {} tensor-core tiles), made in {ms:.1} ms",
                        plan.kernel_name(),
                        plan.tile_rows(),
                        plan.tensor_core_tiles()
                    );
                    if plan.uses_tensor_cores() {
                        summation = oracle::Summation::tensor_cores(T::DTYPE).expect("SDDMM takes no f64");
                    }
                    Some(plan)
                }
                false => None,
            };
            let run = |c: &mut DeviceCsr<T>| match &plan {
                Some(plan) => tilesparse::sddmm_planned(&gpu, &a_dev, &b_dev, c, plan, alpha, beta),
                None => tilesparse::sddmm_with(&gpu, &a_dev, &b_dev, c, &config, alpha, beta),
            };
            run(&mut c)?;
            let got = c.download(&gpu)?.data().to_vec();
            // Timed runs with beta 0 read nothing of C; with beta they read the last run's C.
            let t = time_op(&gpu, args.warmup, args.iters, || run(&mut c))?;
            let ms = t.median_ms();
            let kernel = plan.as_ref().map_or_else(|| config.kernel_name(), SddmmPlan::kernel_name);
            println!("GPU {kernel}: {ms:.4} ms (median of {}), {:.1} GFLOP/s", args.iters, flops / (ms * 1e6));
            got
        }
        None => {
            let mut values = c0.clone();
            let t = Instant::now();
            backend::sddmm(pattern.view(), &a, &b, k, alpha, beta, &mut values);
            let ms = t.elapsed().as_secs_f64() * 1e3;
            println!("CPU backend: {ms:.3} ms, {:.1} GFLOP/s", flops / (ms * 1e6));
            values
        }
    };
    if args.verify {
        let reference = oracle::SddmmReference::new(pattern.view(), &a, &b, k).epilogue(alpha, beta, &c0);
        let cmp = reference.compare_summed(summation, &got);
        if cmp.mismatches == 0 {
            println!(
                "verify: OK against the f64 oracle: max abs err {:.3e} over {} entries",
                cmp.max_abs_err,
                got.len()
            );
        } else {
            let (i, g, w) = cmp.first_mismatch.expect("a mismatch was counted");
            return Err(Error::Verification(format!(
                "{} of {} entries outside the error bound; the first, entry {i}: got {g:e}, want {w:e}",
                cmp.mismatches,
                got.len()
            )));
        }
    }
    Ok(())
}

/// `bench sddmm`: the suite, or the caller's structures (`--matrix`, `--gen`) at the inner dimensions `ks`.
fn bench_sddmm(
    args: SuiteArgs,
    dtype: DType,
    matrices: &[PathBuf],
    generated: &[String],
    ks: &[usize],
    opts: SddmmBenchOptions,
) -> Result<()> {
    let SuiteArgs { filter, warmup, iters, json } = args;
    // The type, files, specs and inner dimensions are checked on any machine, before the GPU is asked for.
    if dtype == DType::F64 {
        return Err(Error::UnsupportedDtype { dtype, op: "bench sddmm (f32, f16, bf16)" });
    }
    let problems = if matrices.is_empty() && generated.is_empty() {
        if !ks.is_empty() {
            return Err(Error::Usage(
                "--k sets the inner dimensions for --matrix and --gen; the suite has its own".into(),
            ));
        }
        suite_sddmm::sddmm_suite(filter.as_deref())?
    } else {
        let ks = if ks.is_empty() { &[64][..] } else { ks };
        suite_sddmm::sddmm_problems(matrices, generated, ks, filter.as_deref())?
    };
    let gpu = Gpu::new(0)?;
    let mut reports = Vec::new();
    for p in &problems {
        let r = match dtype {
            DType::F32 => suite_sddmm::bench_sddmm::<f32>(&gpu, p, &opts),
            DType::F16 => suite_sddmm::bench_sddmm::<half::f16>(&gpu, p, &opts),
            DType::Bf16 => suite_sddmm::bench_sddmm::<half::bf16>(&gpu, p, &opts),
            DType::F64 => return Err(Error::UnsupportedDtype { dtype, op: "bench sddmm (f32, f16, bf16)" }),
        }?;
        reports.push(r);
    }
    println!("device: {}; dtype {dtype}; medians of {iters} event-timed runs after {warmup} warm-up", gpu.info().name);
    suite_sddmm::print_table(&reports);
    if let Some(path) = json {
        write_json(&path, &suite_sddmm::reports_to_json(&reports))?;
    }
    let wrong = suite_sddmm::wrong_results(&reports);
    if wrong > 0 {
        return Err(Error::Verification(format!("{wrong} result(s) outside the oracle's bound")));
    }
    Ok(())
}

/// `bench softmax`: the suite, or the caller's matrices (`--matrix`, `--gen`).
fn bench_softmax(
    args: SuiteArgs,
    dtype: DType,
    matrices: &[PathBuf],
    generated: &[String],
    opts: SoftmaxBenchOptions,
) -> Result<()> {
    let SuiteArgs { filter, warmup, iters, json } = args;
    // The type, files and specs are checked on any machine, before the GPU is asked for.
    if dtype == DType::F64 {
        return Err(Error::UnsupportedDtype { dtype, op: "bench softmax (f32, f16, bf16)" });
    }
    let problems = if matrices.is_empty() && generated.is_empty() {
        suite_softmax::softmax_suite(filter.as_deref())?
    } else {
        suite_softmax::softmax_problems(matrices, generated, filter.as_deref())?
    };
    let gpu = Gpu::new(0)?;
    let mut reports = Vec::new();
    for p in &problems {
        let r = match dtype {
            DType::F32 => suite_softmax::bench_softmax::<f32>(&gpu, p, &opts),
            DType::F16 => suite_softmax::bench_softmax::<half::f16>(&gpu, p, &opts),
            DType::Bf16 => suite_softmax::bench_softmax::<half::bf16>(&gpu, p, &opts),
            DType::F64 => return Err(Error::UnsupportedDtype { dtype, op: "bench softmax (f32, f16, bf16)" }),
        }?;
        reports.push(r);
    }
    let copy = suite_softmax::copy_gbps(&gpu, &opts)?;
    println!("device: {}; dtype {dtype}; medians of {iters} event-timed runs after {warmup} warm-up", gpu.info().name);
    suite_softmax::print_table(&reports, copy);
    if let Some(path) = json {
        write_json(&path, &suite_softmax::reports_to_json(&reports, copy))?;
    }
    let wrong = suite_softmax::wrong_results(&reports);
    if opts.verify {
        println!("verified against the f64 oracle: {wrong} result(s) outside their bound");
    }
    if wrong > 0 {
        return Err(Error::Verification(format!("{wrong} result(s) outside the oracle's bound")));
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
    if args.kernel == SpmvKernel::Seed && args.dtype != DType::F32 {
        return Err(Error::UnsupportedDtype { dtype: args.dtype, op: "the seed spmv (fp32 only)" });
    }
    if args.index_type != "i32" {
        return Err(Error::Usage(format!("index type '{}': the kernels use i32 indices", args.index_type)));
    }
    match args.dtype {
        DType::F32 => run_spmv_typed::<f32>(&args, level),
        DType::F64 => run_spmv_typed::<f64>(&args, level),
        DType::F16 => run_spmv_typed::<half::f16>(&args, level),
        DType::Bf16 => run_spmv_typed::<half::bf16>(&args, level),
    }
}

/// The seed kernel, which exists for f32 only: other element types are refused.
fn spmv_seed_f32<T: Scalar>(
    gpu: &Gpu,
    a: &DeviceCsr<T>,
    x: &CudaSlice<T>,
    (alpha, beta): (f64, f64),
    y: &mut CudaSlice<T>,
    ws: &mut SeedSpmvWorkspace,
) -> Result<()> {
    let (a, x, y): (&dyn Any, &dyn Any, &mut dyn Any) = (a, x, y);
    match (a.downcast_ref::<DeviceCsr<f32>>(), x.downcast_ref::<CudaSlice<f32>>(), y.downcast_mut::<CudaSlice<f32>>()) {
        (Some(a), Some(x), Some(y)) => tilesparse::spmv_seed(gpu, a, x, alpha as f32, beta as f32, y, ws),
        _ => Err(Error::UnsupportedDtype { dtype: T::DTYPE, op: "the seed spmv (fp32 only)" }),
    }
}

/// The SpMV kernel of a run, prepared for its matrix.
enum PreparedSpmv {
    Seed(SeedSpmvWorkspace),
    Production(Box<SpmvPlan>),
}

fn run_spmv_typed<T: Scalar>(args: &SpmvArgs, level: u8) -> Result<()> {
    let (name, a64) = args.matrix.load()?;
    let a = to_dtype::<T>(a64);
    let (m, k) = (a.rows(), a.cols());
    // The seed kernel takes f32 scalars: its oracle sees them rounded as the kernel does.
    let (alpha, beta) = match args.kernel {
        SpmvKernel::Seed => (args.alpha as f32 as f64, args.beta as f32 as f64),
        SpmvKernel::Production => (args.alpha, args.beta),
    };
    if level >= 1 && a.nnz() > args.large_threshold {
        eprintln!("warning: {} nonzeros exceeds the large-matrix threshold {}", a.nnz(), args.large_threshold);
    }
    if level >= 2 {
        println!("A: {name}, {m} x {k}, {} nonzeros, {}; y = {alpha} * A x + {beta} * y", a.nnz(), T::DTYPE);
    }
    let x: Vec<T> = gen::dense_matrix(k, 1, args.matrix.seed + 1).into_iter().map(T::from_f32).collect();
    let y_in: Vec<T> = gen::dense_matrix(m, 1, args.matrix.seed + 2).into_iter().map(T::from_f32).collect();
    let gpu = gpu_or_notice(false);
    let y: Vec<T> = match &gpu {
        Some(gpu) => {
            let a_dev = DeviceCsr::upload(gpu, a.view())?;
            let x_dev = gpu.stream().clone_htod(&x).map_err(|e| Error::Driver { what: "uploading x", source: e })?;
            let mut y_dev =
                gpu.stream().clone_htod(&y_in).map_err(|e| Error::Driver { what: "uploading y", source: e })?;
            let mut prepared = match args.kernel {
                SpmvKernel::Seed => PreparedSpmv::Seed(SeedSpmvWorkspace::new(gpu, a.nnz())?),
                SpmvKernel::Production => PreparedSpmv::Production(Box::new(SpmvPlan::new(gpu, &a_dev)?)),
            };
            if let (PreparedSpmv::Production(plan), true) = (&prepared, level >= 3) {
                println!(
                    "plan: {} ({} long rows, {} column indices); row stats {:?}",
                    plan.strategy(),
                    plan.long_rows(),
                    if plan.offsets16() { "16-bit" } else { "32-bit" },
                    a_dev.stats(gpu)?
                );
            }
            let mut run = |y: &mut CudaSlice<T>| match &mut prepared {
                PreparedSpmv::Seed(ws) => spmv_seed_f32(gpu, &a_dev, &x_dev, (alpha, beta), y, ws),
                PreparedSpmv::Production(plan) => tilesparse::spmv(gpu, &a_dev, &x_dev, alpha, beta, y, plan),
            };
            // Timed runs overwrite y; beta != 0 makes repeated runs compound, so time on a scratch copy.
            let mut y_scratch = y_dev.clone();
            let t = time_op(gpu, args.warmup, args.iters, || run(&mut y_scratch))?;
            let ms = t.median_ms();
            let bytes =
                compulsory_bytes(m, k, a.nnz(), T::DTYPE.size()) + if beta != 0.0 { m * T::DTYPE.size() } else { 0 };
            if level >= 2 {
                println!(
                    "GPU {} SpMV: median {ms:.4} ms, {:.1} GB/s of compulsory traffic",
                    args.kernel.name(),
                    bytes as f64 / ms / 1e6
                );
            }
            run(&mut y_dev)?;
            gpu.stream().clone_dtoh(&y_dev).map_err(|e| Error::Driver { what: "downloading y", source: e })?
        }
        None => {
            let mut y = y_in.clone();
            backend::spmv(a.view(), &x, alpha, beta, &mut y);
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
        let want = oracle::spmv(a.view(), &x, alpha, Some(&y_in), beta);
        // The CPU backend accumulates like the production kernels (f64 for f64, f32 otherwise).
        let bound = if args.kernel == SpmvKernel::Seed && gpu.is_some() {
            // The seed sums rows as differences of 32-entry block prefixes: its error scales with the block's
            // absolute sum, not the row's (see spmv_seed's docs).
            let mag = oracle::spmm_abs(a.view(), &x, 1);
            let block_max = mag.iter().fold(0.0f64, |acc, v| acc.max(*v)).max(1.0);
            vec![128.0 * f32::EPSILON as f64 * block_max * alpha.abs().max(1.0); m]
        } else {
            spmv_error_bound(a.view(), &x, alpha, beta, Some(&y_in))
        };
        let got: Vec<f64> = y.iter().map(|v| v.to_f64()).collect();
        report_check(&got, &want, &bound, 0, T::DTYPE)?;
    }
    Ok(())
}

/// The summary line of a suite: geometric mean and minimum of our speedups over the best cuSPARSE algorithm.
fn print_geomean(ratios: &[f64]) {
    println!(
        "geometric mean vs best cuSPARSE: {:.3}x over {} problems; min {:.3}x",
        suite::geomean(ratios),
        ratios.len(),
        ratios.iter().copied().fold(f64::INFINITY, f64::min)
    );
}

/// Writes a suite's JSON report.
fn write_json(path: &std::path::Path, text: &str) -> Result<()> {
    std::fs::write(path, text).map_err(|e| Error::Usage(format!("{}: {e}", path.display())))
}

fn bench_spmv(args: SuiteArgs) -> Result<()> {
    let SuiteArgs { filter, warmup, iters, json } = args;
    let gpu = Gpu::new(0)?;
    let copy_gbps = suite_spmv::copy_bandwidth_gbps(&gpu, 1 << 30, warmup, iters)?;
    println!(
        "device: {}; device-to-device copy of 1 GiB: {copy_gbps:.1} GB/s (read + written); median of {iters} \
         event-timed runs after {warmup} warm-ups; f32, y = A x\nGB/s: the CSR's compulsory bytes (4-byte column \
         indices) / time, so a plan on 16-bit column offsets (`_i16`, 2 bytes per entry fewer) can pass 100% of copy",
        gpu.info().name
    );
    let problems = suite_spmv::spmv_suite(filter.as_deref())?;
    let mut reports = Vec::new();
    for p in &problems {
        let r = suite_spmv::bench_spmv(&gpu, p, warmup, iters)?;
        println!("\n== {} (m {} k {} nnz {}; production plan {})", r.problem, r.m, r.k, r.nnz, r.strategy);
        for e in [&r.seed, &r.production].into_iter().chain(&r.strategies).chain(&r.cusparse).chain(&r.gathers) {
            match &e.ms {
                Ok(ms) => {
                    let gbps = r.gbps(*ms);
                    let ratio = r.speedup_over(e).map_or("-".into(), |s| format!("{s:.2}x"));
                    println!(
                        "  {:<36} {ms:>10.4} ms {gbps:>8.1} GB/s {:>5.1}% of copy; production speedup {ratio}",
                        e.name,
                        100.0 * gbps / copy_gbps
                    );
                }
                Err(why) => println!("  {:<36} {why}", e.name),
            }
        }
        println!("  agreement with cuSPARSE {:.1e}", r.agreement);
        if let (Some(floor), Some(best)) = (r.gather_floor(), r.best_cusparse()) {
            if let (Ok(g), Ok(c)) = (&floor.ms, &best.ms) {
                println!(
                    "  x gathers alone (fastest probe, {}): {g:.4} ms; cuSPARSE's best / that = {:.2}x, the most a \
                     kernel that gathers x once per entry can gain here",
                    floor.name,
                    c / g
                );
            }
        }
        reports.push(r);
    }
    println!(
        "\n{:<36} {:>10} {:>8} {:>7} {:>9} {:>9} {:>9}",
        "problem", "prod ms", "GB/s", "% copy", "vs ALG1", "vs ALG2", "vs seed"
    );
    let mut ratios = Vec::new();
    for r in &reports {
        let ours = r.production.ms.as_ref().ok().copied().unwrap_or(f64::NAN);
        let fmt =
            |e: Option<&suite::Entry>| e.and_then(|e| r.speedup_over(e)).map_or("-".into(), |s| format!("{s:.2}x"));
        if let Some(s) = r.best_cusparse().and_then(|e| r.speedup_over(e)) {
            ratios.push(s);
        }
        println!(
            "{:<36} {ours:>10.4} {:>8.1} {:>6.1}% {:>9} {:>9} {:>9}",
            r.problem,
            r.gbps(ours),
            100.0 * r.gbps(ours) / copy_gbps,
            fmt(r.cusparse.first()),
            fmt(r.cusparse.get(1)),
            fmt(Some(&r.seed))
        );
    }
    print_geomean(&ratios);
    if let Some(path) = json {
        write_json(&path, &suite_spmv::reports_to_json(&reports, copy_gbps))?;
    }
    Ok(())
}

/// `bench spmm`: the suite, or the caller's matrices (`--matrix`, then `--gen`) at the widths `ns`.
fn bench_spmm(
    args: SuiteArgs,
    opts: BenchOptions,
    dtype: DType,
    matrices: &[PathBuf],
    generated: &[String],
    ns: &[usize],
) -> Result<()> {
    let SuiteArgs { filter, warmup, iters, json } = args;
    // The problems first: a bad file, spec or width is reported on any machine, before the GPU is asked for.
    let problems = if matrices.is_empty() && generated.is_empty() {
        if !ns.is_empty() {
            return Err(Error::Usage("--n sets the widths for --matrix and --gen; the suite has its own".into()));
        }
        suite::spmm_suite(filter.as_deref())?
    } else {
        let ns = if ns.is_empty() { &[128][..] } else { ns };
        let generated = suite::spmm_generated_problems(generated, ns, filter.as_deref())?;
        let mut problems = suite::spmm_file_problems(matrices, ns, filter.as_deref())?;
        problems.extend(generated);
        problems
    };
    // The element type's bench, chosen once (f64 refused here, also before the GPU is asked for).
    let bench: fn(&Gpu, &suite::SpmmProblem, &BenchOptions) -> Result<suite::SpmmReport> = match dtype {
        DType::F32 => suite::bench_spmm::<f32>,
        DType::F16 => suite::bench_spmm::<half::f16>,
        DType::Bf16 => suite::bench_spmm::<half::bf16>,
        DType::F64 => return Err(Error::UnsupportedDtype { dtype, op: "spmm (f32, f16, bf16)" }),
    };
    let gpu = Gpu::new(0)?;
    let opts = BenchOptions { warmup, iters, ..opts };
    println!(
        "device: {}; dtype {dtype}; {} problems; median of {iters} event-timed runs after {warmup} warm-ups{}",
        gpu.info().name,
        problems.len(),
        if opts.verify { "; every result timed is first checked against the f64 oracle" } else { "" }
    );
    let (mut checked, mut wrong, mut worst) = (0usize, Vec::new(), 0.0f64);
    let mut reports = Vec::new();
    for p in &problems {
        let r = bench(&gpu, p, &opts)?;
        println!("\n== {} (m {} k {} n {} nnz {})", r.problem, r.m, r.k, r.n, r.nnz);
        let line = |e: &suite::Entry| {
            let check = match &e.check {
                None => String::new(),
                Some(c) if c.passed() => format!("  ok ({:.2} of its bound)", c.worst),
                Some(c) => format!(
                    "  WRONG: {} elements outside their bound; first {}",
                    c.mismatches,
                    c.first.as_deref().unwrap_or("-")
                ),
            };
            match &e.ms {
                Ok(ms) => format!("{:<44} {:>10.4} ms {:>9.1} GFLOP/s{check}", e.name, ms, r.gflops(*ms)),
                Err(why) => format!("{:<44} {why}{check}", e.name),
            }
        };
        let fused = r.bias_relu.as_ref().map(|f| &f.fused);
        let scaled = r.scaled.as_ref().map(|f| &f.ours);
        let col_major = r.col_major.as_ref().map(|f| &f.ours);
        let timed = r.variants.iter().chain([&r.selected]).chain(r.tuned.as_ref().map(|(e, _)| e));
        for e in timed.chain(fused).chain(scaled).chain(col_major) {
            if let Some(c) = &e.check {
                checked += 1;
                worst = worst.max(c.worst);
                if !c.passed() {
                    wrong.push(format!("{} {}", r.problem, e.name));
                }
            }
        }
        for e in &r.variants {
            println!("  {}", line(e));
        }
        println!("  selected: {}", line(&r.selected));
        if let Some((e, ms)) = &r.tuned {
            println!("  tuned:    {} (tuning took {ms:.0} ms)", line(e));
        }
        for e in &r.cusparse {
            println!("  {}", line(e));
        }
        for b in &r.cusparse_blocked {
            println!("  {}", line(&b.entry));
        }
        println!("  {}", line(&r.cublas));
        let fmt = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.2}x"));
        if let Some(f) = &r.bias_relu {
            println!("  C = ReLU(A * B + bias):");
            println!("    fused:   {}", line(&f.fused));
            println!("    unfused: {}", line(&f.unfused));
            println!("    fused vs cuSPARSE + pass: {}", fmt(f.speedup()));
        }
        if let Some(f) = &r.scaled {
            println!("  C = {} * A * B + {} * C:", f.alpha, f.beta);
            println!("    ours:     {}", line(&f.ours));
            println!("    cuSPARSE: {}", line(&f.cusparse));
            println!("    ours vs cuSPARSE: {}", fmt(f.speedup()));
        }
        if let Some(t) = &r.transposed {
            println!(
                "  the transposition of A: ours {:.3} ms (wall, DeviceCsr::transpose); {}",
                t.transpose_ms,
                line(&t.csr2csc)
            );
            for e in &t.cusparse {
                println!("  {}", line(e));
            }
            let pays = r.transposed_pays_after().map_or("-".into(), |p| format!("{p:.0} products"));
            println!(
                "  selected on A^T vs cuSPARSE with A transposed: {}; transposing pays after {pays}",
                fmt(r.speedup_vs_transposed())
            );
        }
        if let Some(f) = &r.col_major {
            println!("  B and C column-major:");
            println!("    ours:     {}", line(&f.ours));
            for e in &f.cusparse {
                println!("    {}", line(e));
            }
            println!(
                "    ours vs cuSPARSE, both column-major: {}; ours column-major / row-major: {}",
                fmt(r.speedup_col_major()),
                fmt(r.col_major_cost())
            );
        }
        let blocked: String = [BlockedFormat::Bsr, BlockedFormat::BlockedEll]
            .iter()
            .filter_map(|&f| r.speedup_vs_blocked(f).map(|v| format!("; vs cuSPARSE {}: {v:.2}x", f.name())))
            .collect();
        println!(
            "  best variant: {}; selected vs best cuSPARSE: {}{blocked}; vs cuBLAS: {}; agreement with cuSPARSE {:.1e}",
            r.best_variant().map_or("-".into(), |e| e.name.clone()),
            fmt(r.speedup_vs_cusparse()),
            fmt(r.speedup_vs_cublas()),
            r.agreement
        );
        reports.push(r);
    }
    let tuned_head = if opts.tune { format!(" {:>10} {:>9}", "tuned ms", "tuned vs") } else { String::new() };
    println!(
        "\n{:<40} {:>10} {:>10} {:>10} {:>9} {:>9}{tuned_head}",
        "problem", "ours ms", "GFLOP/s", "cusp ms", "vs cusp", "vs cublas"
    );
    let (mut ratios, mut tuned_ratios) = (Vec::new(), Vec::new());
    for r in &reports {
        let ours = r.selected.ms.as_ref().ok().copied().unwrap_or(f64::NAN);
        let cusp = r.best_cusparse().and_then(|e| e.ms.as_ref().ok().copied()).unwrap_or(f64::NAN);
        if let Some(s) = r.speedup_vs_cusparse() {
            ratios.push(s);
        }
        let tuned = r.tuned.as_ref().map_or(String::new(), |(e, _)| {
            let ms = e.ms.as_ref().ok().copied().unwrap_or(f64::NAN);
            format!(" {ms:>10.4} {:>8.2}x", cusp / ms)
        });
        if let Some(s) = r.tuned_vs_cusparse() {
            tuned_ratios.push(s);
        }
        println!(
            "{:<40} {:>10.4} {:>10.1} {:>10.4} {:>8.2}x {:>9}{tuned}",
            r.problem,
            ours,
            r.gflops(ours),
            cusp,
            cusp / ours,
            r.speedup_vs_cublas().map_or("-".into(), |v| format!("{v:.2}x"))
        );
    }
    print_geomean(&ratios);
    if opts.tune {
        print!("tuned: ");
        print_geomean(&tuned_ratios);
    }
    if opts.bias_relu {
        let fused: Vec<f64> = reports.iter().filter_map(|r| r.bias_relu.as_ref()?.speedup()).collect();
        print!("C = ReLU(A * B + bias), fused, against cuSPARSE then a bias + ReLU pass: ");
        print_geomean(&fused);
    }
    if let Some((alpha, beta)) = opts.scaled {
        let scaled: Vec<f64> = reports.iter().filter_map(|r| r.scaled.as_ref()?.speedup()).collect();
        print!("C = {alpha} * A * B + {beta} * C, against cuSPARSE with the same scalars: ");
        print_geomean(&scaled);
    }
    if opts.transpose {
        let transposed: Vec<f64> = reports.iter().filter_map(|r| r.speedup_vs_transposed()).collect();
        print!("C = A^T * B, ours on A^T against cuSPARSE's SpMM with A transposed: ");
        print_geomean(&transposed);
    }
    if opts.col_major {
        let col_major: Vec<f64> = reports.iter().filter_map(|r| r.speedup_col_major()).collect();
        print!("B and C column-major, ours against cuSPARSE's SpMM with both column-major: ");
        print_geomean(&col_major);
        let cost: Vec<f64> = reports.iter().filter_map(|r| r.col_major_cost()).collect();
        let max = cost.iter().copied().fold(0.0, f64::max);
        println!(
            "B and C column-major, our time over our row-major time: geometric mean {:.3}x over {} problems, max {max:.3}x",
            suite::geomean(&cost),
            cost.len()
        );
    }
    if let Some(path) = json {
        write_json(&path, &suite::reports_to_json(&reports))?;
    }
    if !opts.verify {
        return Ok(());
    }
    if wrong.is_empty() {
        println!(
            "verify: OK: {checked} results against the f64 oracle, each on a poisoned C; the largest error is {worst:.3} \
             of its bound"
        );
        Ok(())
    } else {
        Err(Error::Verification(format!(
            "{} of {checked} results outside the oracle's bound (marked WRONG above): {}",
            wrong.len(),
            wrong.join(", ")
        )))
    }
}

/// The SpGEMM problem of the CLI: A and the right operand, A itself when square, else A^T.
fn spgemm_operands(matrix: &MatrixArgs) -> Result<(CsMat<f32>, CsMat<f32>)> {
    let (name, a) = matrix.load()?;
    let a = a.map(|&v| v as f32); // the SpGEMM runs in f32
    let square = a.rows() == a.cols();
    let b = if square { a.clone() } else { a.transpose_view().to_csr() };
    println!(
        "A: {name}, {} x {}, {} nonzeros; C = A * {}",
        a.rows(),
        a.cols(),
        a.nnz(),
        if square { "A" } else { "A^T" }
    );
    Ok((a, b))
}

/// Median wall time of the CPU backend's SpGEMM over `runs` runs, in ms.
fn time_cpu_spgemm(a: &CsMat<f32>, b: &CsMat<f32>, runs: usize) -> (f64, CsMat<f32>) {
    let mut c = backend::spgemm(a.view(), b.view());
    let mut ms: Vec<f64> = (0..runs.max(1))
        .map(|_| {
            let start = Instant::now();
            c = backend::spgemm(a.view(), b.view());
            start.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    ms.sort_by(f64::total_cmp);
    (ms[ms.len() / 2], c)
}

fn run_spgemm(args: SpgemmArgs) -> Result<()> {
    let kernel: Option<LadderKernel> = if args.kernel == "production" { None } else { Some(args.kernel.parse()?) };
    let (a, b) = spgemm_operands(&args.matrix)?;
    let c = match (gpu_or_notice(false), kernel) {
        (Some(gpu), None) => {
            let a_dev = DeviceCsr::upload(&gpu, a.view())?;
            let b_dev = DeviceCsr::upload(&gpu, b.view())?;
            let t = time_op(&gpu, args.warmup, args.iters, || spgemm::spgemm(&gpu, &a_dev, &b_dev).map(drop))?;
            let mut plan = SpgemmPlan::new(&gpu, &a_dev, &b_dev)?;
            println!(
                "GPU {}: production SpGEMM: median {:.4} ms over {} runs (symbolic + allocation + numeric); nnz(C) = \
                 {}, {} products; rows per bin (symbolic {:?}, numeric {:?})",
                gpu.info().name,
                t.median_ms(),
                args.iters,
                plan.nnz(),
                plan.products(),
                plan.symbolic_bins(),
                plan.numeric_bins()
            );
            if !args.verify {
                return Ok(());
            }
            plan.numeric(&gpu, &a_dev, &b_dev)?.download(&gpu)?
        }
        (Some(gpu), Some(kernel)) => {
            let a_dev = DeviceCsr::upload(&gpu, a.view())?;
            let b_dev = DeviceCsr::upload(&gpu, b.view())?;
            let mut out = DeviceCoo::for_product(&gpu, &a_dev, &b_dev)?;
            let t = time_op(&gpu, args.warmup, args.iters, || {
                spgemm::spgemm_ladder_into(&gpu, &a_dev, &b_dev, kernel, &mut out).map(|_| ())
            })?;
            println!(
                "GPU {}: {kernel}: median {:.4} ms over {} runs (nnz read-back included); nnz(C) = {} (bound {})",
                gpu.info().name,
                t.median_ms(),
                args.iters,
                out.nnz(),
                out.capacity()
            );
            if !args.verify {
                return Ok(());
            }
            spgemm::coo_to_csr(&gpu, &out)?.download(&gpu)?
        }
        (None, _) => {
            let (ms, c) = time_cpu_spgemm(&a, &b, args.iters);
            println!("CPU backend ({} threads): median {ms:.3} ms; nnz(C) = {}", rayon::current_num_threads(), c.nnz());
            c
        }
    };
    if args.verify {
        let cmp = spgemm::check_product(a.view(), b.view(), &c)?;
        println!(
            "verify: structure equal, values OK against the f64 oracle (max abs err {:.3e}, max rel err {:.3e})",
            cmp.max_abs_err, cmp.max_rel_err
        );
    }
    Ok(())
}

fn bench_spgemm_suite(args: SuiteArgs, dense_from: Option<usize>) -> Result<()> {
    let SuiteArgs { filter, warmup, iters, json } = args;
    let gpu = Gpu::new(0)?;
    let problems = suite_spgemm::spgemm_suite(filter.as_deref())?;
    println!(
        "device: {}; {} problems; end to end (symbolic + allocation + numeric, C freed); median of {iters} \
         event-timed runs after {warmup} warm-ups; peak = device memory beyond A and B at the peak, C included",
        gpu.info().name,
        problems.len()
    );
    let mib = |b: Option<u64>| b.map_or("-".to_string(), |b| format!("{:.1}", b as f64 / (1u64 << 20) as f64));
    let mut reports = Vec::new();
    for p in &problems {
        let r = suite_spgemm::bench_spgemm(&gpu, p, warmup, iters, dense_from)?;
        println!(
            "\n== {} (m {} k {} n {}; nnz A {} B {} C {}; {} products)",
            r.problem, r.m, r.k, r.n, r.nnz_a, r.nnz_b, r.nnz_c, r.products
        );
        for (e, peak) in [(&r.ours, r.ours_peak), (&r.symbolic, None), (&r.numeric, None)]
            .into_iter()
            .chain(r.cusparse.iter().zip(r.cusparse_peak.iter().copied().chain(std::iter::repeat(None))))
        {
            match &e.ms {
                Ok(ms) => println!("  {:<24} {ms:>10.4} ms   peak {:>9} MiB", e.name, mib(peak)),
                Err(why) => println!("  {:<24} {why}", e.name),
            }
        }
        println!(
            "  structure equal to cuSPARSE's: {}; max value difference {:.1e} of max |C|",
            r.same_structure.map_or("-".into(), |s| s.to_string()),
            r.agreement
        );
        suite_spgemm::check_agreement(&r)?;
        reports.push(r);
    }
    println!(
        "\n{:<30} {:>10} {:>12} {:>9} {:>10} {:>14}",
        "problem", "ours ms", "cusp ms", "vs cusp", "peak MiB", "cusp min MiB"
    );
    let mut ratios = Vec::new();
    for r in &reports {
        let ours = r.ours.ms.as_ref().ok().copied().unwrap_or(f64::NAN);
        let best = r.best_cusparse();
        let cusp = best.and_then(|e| e.ms.as_ref().ok().copied()).unwrap_or(f64::NAN);
        if let Some(s) = r.speedup_vs_cusparse() {
            ratios.push(s);
        }
        println!(
            "{:<30} {ours:>10.4} {:>12} {:>8.2}x {:>10} {:>14}",
            r.problem,
            format!("{cusp:.4} {}", best.map_or("", |e| e.name.trim_start_matches("cuSPARSE "))),
            cusp / ours,
            mib(r.ours_peak),
            mib(r.least_cusparse_peak())
        );
    }
    print_geomean(&ratios);
    if let Some(path) = json {
        write_json(&path, &suite_spgemm::reports_to_json(&reports))?;
    }
    Ok(())
}

fn bench_ladder(matrix: MatrixArgs, svg: Option<PathBuf>, warmup: usize, iters: usize) -> Result<()> {
    let (a, b) = spgemm_operands(&matrix)?;
    let (cpu_ms, c) = time_cpu_spgemm(&a, &b, iters);
    println!("CPU backend ({} threads): {cpu_ms:.3} ms; nnz(C) = {}", rayon::current_num_threads(), c.nnz());
    let gpu = Gpu::new(0)?;
    let a_dev = DeviceCsr::upload(&gpu, a.view())?;
    let b_dev = DeviceCsr::upload(&gpu, b.view())?;
    let mut out = DeviceCoo::for_product(&gpu, &a_dev, &b_dev)?;
    let mut time = |kernel: LadderKernel| -> Result<f64> {
        let t = time_op(&gpu, warmup, iters, || {
            spgemm::spgemm_ladder_into(&gpu, &a_dev, &b_dev, kernel, &mut out).map(|_| ())
        })?;
        if out.nnz() != c.nnz() {
            return Err(Error::Verification(format!(
                "{kernel}: nnz(C) = {}, the CPU backend has {}",
                out.nnz(),
                c.nnz()
            )));
        }
        Ok(t.median_ms())
    };
    println!(
        "GPU {}: median of {iters} event-timed runs after {warmup} warm-ups (nnz read-back included)",
        gpu.info().name
    );
    let mut previous = cpu_ms;
    for kernel in LadderKernel::LADDER {
        let ms = time(kernel)?;
        println!(
            "  {:<14} {ms:>10.4} ms ({:+.1} % vs the previous line)",
            kernel.to_string(),
            (ms / previous - 1.0) * 100.0
        );
        previous = ms;
    }
    println!("k4 grid search (block x tile), ms:");
    let mut grid = Vec::with_capacity(SPGEMM_K4_GRID.len());
    for &(block, tile) in SPGEMM_K4_GRID {
        grid.push(((block, tile), time(LadderKernel::K4 { block, tile })?));
    }
    let blocks = grid_axis(&grid, |p| p.0);
    let tiles = grid_axis(&grid, |p| p.1);
    println!("  {:>6}{}", "block", tiles.iter().map(|t| format!("{t:>10}")).collect::<String>());
    for &block in &blocks {
        let row: String = tiles
            .iter()
            .map(|&tile| {
                grid.iter()
                    .find(|(p, _)| *p == (block, tile))
                    .map_or(format!("{:>10}", "-"), |(_, ms)| format!("{ms:>10.4}"))
            })
            .collect();
        println!("  {block:>6}{row}");
    }
    let ((block, tile), best) = grid.iter().copied().min_by(|x, y| x.1.total_cmp(&y.1)).expect("the grid is not empty");
    println!("best: k4_b{block}_t{tile} at {best:.4} ms ({:.2}x the CPU backend)", cpu_ms / best);
    if let Some(path) = svg {
        std::fs::write(&path, heatmap_svg(&grid, &blocks, &tiles))
            .map_err(|e| Error::Usage(format!("{}: {e}", path.display())))?;
        println!("heat map: {}", path.display());
    }
    Ok(())
}

/// The distinct values of one coordinate of the grid, ascending.
fn grid_axis(grid: &[((u32, u32), f64)], coord: impl Fn((u32, u32)) -> u32) -> Vec<u32> {
    let mut v: Vec<u32> = grid.iter().map(|(p, _)| coord(*p)).collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// The k4 grid search as an SVG heat map: blocks down, tiles across, green (fastest) to red (slowest) on a
/// log scale, each cell labelled with its time.
fn heatmap_svg(grid: &[((u32, u32), f64)], blocks: &[u32], tiles: &[u32]) -> String {
    const CELL_W: usize = 90;
    const CELL_H: usize = 40;
    const LEFT: usize = 70;
    const TOP: usize = 60;
    let (lo, hi) = grid.iter().fold((f64::INFINITY, 0f64), |(lo, hi), &(_, ms)| (lo.min(ms), hi.max(ms)));
    let (w, h) = (LEFT + CELL_W * tiles.len() + 10, TOP + CELL_H * blocks.len() + 10);
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <text x=\"{LEFT}\" y=\"18\" font-size=\"14\">SpGEMM k4: median ms by block size (rows) and tile size (columns)</text>\n"
    );
    for (x, tile) in tiles.iter().enumerate() {
        s += &format!(
            "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">tile {tile}</text>\n",
            LEFT + x * CELL_W + CELL_W / 2,
            TOP - 8
        );
    }
    for (y, block) in blocks.iter().enumerate() {
        let cy = TOP + y * CELL_H;
        s += &format!(
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">block {block}</text>\n",
            LEFT - 6,
            cy + CELL_H / 2 + 4
        );
        for (x, tile) in tiles.iter().enumerate() {
            let Some(&(_, ms)) = grid.iter().find(|(p, _)| *p == (*block, *tile)) else { continue };
            let t = if hi > lo { (ms / lo).ln() / (hi / lo).ln() } else { 0.0 };
            let cx = LEFT + x * CELL_W;
            s += &format!(
                "<rect x=\"{cx}\" y=\"{cy}\" width=\"{CELL_W}\" height=\"{CELL_H}\" fill=\"hsl({:.0},70%,55%)\" stroke=\"white\"/>\n\
                 <text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{ms:.3}</text>\n",
                120.0 * (1.0 - t),
                cx + CELL_W / 2,
                cy + CELL_H / 2 + 4
            );
        }
    }
    s + "</svg>\n"
}
