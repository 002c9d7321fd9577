//! Shared test helpers: GPU-or-skip, oracle comparison with a derived bound, the poison value.
#![allow(dead_code)]

use std::io::Write;
use std::sync::{Mutex, MutexGuard, OnceLock};

use sprs::{CsMat, CsMatView};
use tilesparse::cpu::oracle::{self, Summation};
use tilesparse::kernels::KERNELS_BUILT;
use tilesparse::{Gpu, Scalar};

/// The base of every random input of this test process: `TILESPARSE_SEED` if set, else drawn fresh (from the
/// clock, the process id and std's randomly keyed hasher), printed once to stderr so that a failing run can be
/// repeated. Every oracle comparison's message names it too, since libtest shows only a failing test's output.
pub fn base_seed() -> u64 {
    static BASE: OnceLock<u64> = OnceLock::new();
    *BASE.get_or_init(|| {
        let seed = match std::env::var("TILESPARSE_SEED") {
            Ok(s) => s.trim().parse().unwrap_or_else(|e| panic!("TILESPARSE_SEED={s:?} is not a u64: {e}")),
            Err(_) => fresh_seed(),
        };
        eprintln!("tilesparse tests: TILESPARSE_SEED={seed} reproduces this run");
        seed
    })
}

/// A seed no earlier run is likely to have drawn: std's `RandomState` is keyed randomly per process; the
/// time and the process id are hashed in as well.
fn fresh_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    h.write_u128(now);
    h.write_u32(std::process::id());
    h.finish()
}

/// The seed for the generator call tagged `k` (each call site passes its own tag): the base seed mixed with
/// a fixed hash of `k` (SplitMix64's output function, the same on every toolchain), so the inputs are fresh
/// each run and reproducible with `TILESPARSE_SEED`.
pub fn seed(k: u64) -> u64 {
    let mut z = k.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    base_seed() ^ z ^ (z >> 31)
}

/// `TILESPARSE_SEED=<base seed>`, for assertion messages.
pub fn seed_note() -> String {
    format!("TILESPARSE_SEED={}", base_seed())
}

/// Written into every output before a run (`oracle::POISON`).
pub const POISON: f64 = oracle::POISON;

/// The GPU, or None after a visible skip line. With TILESPARSE_REQUIRE_GPU=1 a missing GPU fails the test.
///
/// The GPU comes with this process's GPU turn: libtest runs tests on parallel threads (the README's `cargo test`),
/// and a GPU test must not share the device with another test's kernels. One exhausts device memory on purpose;
/// one times device work and bounds the time; the tuner compares timings. CPU-only tests still run in parallel.
pub fn gpu_or_skip(test: &str) -> Option<TestGpu> {
    let require = std::env::var("TILESPARSE_REQUIRE_GPU").as_deref() == Ok("1");
    let why = if !KERNELS_BUILT {
        "this build has no kernels (nvcc was missing)".to_string()
    } else {
        // A test that panicked while it held the turn poisons the lock; the turn is still free to take.
        let turn = GPU_TURN.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        match Gpu::new(0) {
            Ok(gpu) => return Some(TestGpu { gpu, _turn: turn }),
            Err(e) => e.to_string(),
        }
    };
    assert!(!require, "TILESPARSE_REQUIRE_GPU=1 but {test} cannot run: {why}");
    // Written to the stderr handle, not with eprintln!, so that the test harness does not capture it.
    let _ = writeln!(std::io::stderr(), "SKIP {test}: {why}");
    None
}

/// One GPU test at a time in this process ([`gpu_or_skip`]).
static GPU_TURN: Mutex<()> = Mutex::new(());

/// The GPU handle of one test, holding the process's GPU turn until the test drops it (after the handle: fields
/// drop in order). It dereferences to [`Gpu`].
pub struct TestGpu {
    gpu: Gpu,
    _turn: MutexGuard<'static, ()>,
}

impl std::ops::Deref for TestGpu {
    type Target = Gpu;
    fn deref(&self) -> &Gpu {
        &self.gpu
    }
}

/// The f64 oracle of C = A * B with its elementwise rounding bounds (`oracle::SpmmReference`), computed once per
/// problem and checked against any number of results: the FMA kernels' and the tensor cores' of T (their mma
/// truncates: 3xTF32 for f32, f16/bf16 products). Each check panics with the first mismatch.
pub struct SpmmOracle(oracle::SpmmReference);

impl SpmmOracle {
    pub fn new<T: Scalar>(a: CsMatView<T>, b: &[T], n: usize) -> Self {
        SpmmOracle(oracle::SpmmReference::new(a, b, n))
    }

    /// The oracle of C = ReLU(A * B + bias) (`SpmmReference::bias_relu`), `bias` one f32 per row, for C of `T`.
    pub fn bias_relu<T: Scalar>(&self, bias: &[f32], n: usize) -> SpmmOracle {
        SpmmOracle(self.0.bias_relu::<T>(bias, n))
    }

    /// The oracle of C = alpha * A * B + beta * C0 (+ bias, ReLU) (`SpmmReference::epilogue`), `c0` C's values
    /// before the product (read where beta is not 0), for C of `T`.
    pub fn epilogue<T: Scalar>(&self, alpha: f32, beta: f32, c0: &[T], bias: Option<&[f32]>, n: usize) -> SpmmOracle {
        SpmmOracle(self.0.epilogue::<T>(alpha, beta, c0, bias, n))
    }

    /// Against the FMA kernels' bound (the CUDA-core tiles).
    pub fn check<T: Scalar>(&self, what: &str, got: &[T]) {
        self.check_as(what, got, Summation::Fma);
    }

    /// [`SpmmOracle::check`] with the bound that fits `kernel` (`SpmmKernel::summation`).
    pub fn check_kernel<T: Scalar>(&self, what: &str, got: &[T], kernel: &tilesparse::SpmmKernel) {
        self.check_as(what, got, kernel.summation());
    }

    /// [`SpmmOracle::check`] with `summation`'s bound (a baseline that sums as one of our kernels does).
    pub fn check_summation<T: Scalar>(&self, what: &str, got: &[T], summation: Summation) {
        self.check_as(what, got, summation);
    }

    fn check_as<T: Scalar>(&self, what: &str, got: &[T], summation: Summation) {
        let cmp = self
            .0
            .compare(got, summation)
            .unwrap_or_else(|| panic!("{what}: sums as {summation:?}, which the oracle's inputs cannot"));
        assert_eq!(
            cmp.mismatches,
            0,
            "{what}: {} of {} elements mismatch; first (index, got, want) = {:?} ({})",
            cmp.mismatches,
            got.len(),
            cmp.first_mismatch,
            seed_note()
        );
    }
}

/// Compares `got` with the f64 oracle of C = A * B; panics with the first mismatch.
pub fn check_spmm<T: Scalar>(what: &str, a: CsMatView<T>, b: &[T], n: usize, got: &[T]) {
    SpmmOracle::new(a, b, n).check(what, got);
}

/// A CSR matrix from (row, col, value) triplets.
pub fn from_triplets(m: usize, k: usize, entries: &[(usize, usize, f32)]) -> CsMat<f32> {
    let mut tri = sprs::TriMat::new((m, k));
    for &(i, j, v) in entries {
        tri.add_triplet(i, j, v);
    }
    tri.to_csr()
}

/// A file of tests/data: `TILESPARSE_TEST_DATA` where the tests run away from the source tree (the GPU bundle).
pub fn data_path(file: &str) -> std::path::PathBuf {
    std::env::var_os("TILESPARSE_TEST_DATA")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data"))
        .join(file)
}

/// The folder of real matrices (TILESPARSE_MATRICES, as the GPU bundle sets, else ../shared/matrices beside
/// the checkout), or None after a visible skip line; with TILESPARSE_REQUIRE_GPU=1 a missing folder fails.
pub fn matrices_dir(test: &str) -> Option<std::path::PathBuf> {
    let dir = std::env::var_os("TILESPARSE_MATRICES")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/matrices"));
    if dir.is_dir() {
        return Some(dir);
    }
    let require = std::env::var("TILESPARSE_REQUIRE_GPU").as_deref() == Ok("1");
    assert!(!require, "TILESPARSE_REQUIRE_GPU=1 but {test} finds no matrices in {}", dir.display());
    let _ = writeln!(std::io::stderr(), "SKIP {test}: no matrices in {} (set TILESPARSE_MATRICES)", dir.display());
    None
}

/// Allocates device memory until at most `leave` bytes stay free (chunks halving from 1 GiB to 1 MiB); the
/// allocations are freed (into the pool) when the returned value is dropped.
pub fn exhaust_device_memory(gpu: &Gpu, leave: usize) -> Vec<cudarc::driver::CudaSlice<u8>> {
    // Memory the pool keeps from earlier frees does not show as free: give it back first.
    gpu.trim_pool().unwrap();
    let mut hog = Vec::new();
    let mut chunk = 1usize << 30;
    while chunk >= 1 << 20 {
        let (free, _) = gpu.memory().unwrap();
        if free <= leave {
            break;
        }
        // SAFETY: the bytes are never read.
        match unsafe { gpu.stream().alloc::<u8>(chunk.min(free - leave).max(1 << 20)) } {
            Ok(buf) => hog.push(buf),
            Err(_) => chunk /= 2,
        }
        gpu.synchronize().unwrap();
    }
    hog
}
