//! The SpMM kernel chosen by measurement: [`spmm_tune`] times every kernel that can run a product on the caller's
//! own A, B and C and keeps the fastest.
//!
//! [`super::spmm_auto`] chooses from A's row statistics with rules fitted to sweeps on an H100 (src/spmm/select.rs,
//! NOTES.md). On the benchmark suite that choice is within 2% of the fastest compiled kernel, but shapes no sweep
//! covered can lose more. For an A multiplied many times (a pruned weight, a graph's adjacency), tuning once costs
//! a few runs of each kernel, and [`TunedSpmm::kernel`] is then passed to [`super::spmm_kernel`]. The choice is
//! returned, not cached: store it with the matrix (`SpmmKernel` prints and parses as its kernel name).
//! [`spmm_tune_bias_relu`] tunes C = ReLU(A * B + bias) the same way, each candidate timed with its fused epilogue,
//! and [`spmm_tune_with`] any [`SpmmEpilogue`]: with beta not 0 every timed run reads C as well as writing it.
//! For an A whose values change before every product ([`TuneOptions::values_change`]), each tensor-core candidate
//! is timed with the rewrite of its blocks that an update costs it.
//!
//! Two rounds: every candidate is run `warmup` times and timed `screen_iters` times, the automatic choice first;
//! where that choice takes `cutoff_from_ms` (1 ms) or more, a candidate whose first timed run takes more than
//! `screen_cutoff` times the fastest median so far is not timed again in this round. The automatic choice and the
//! `finalists` fastest others are then timed again in `rounds` interleaved rounds of `iters` runs, so that a drift
//! of the clocks during tuning falls on all of them alike. The automatic choice is kept unless a finalist's median is
//! at least `margin` faster: a choice is not changed for a difference the timing cannot tell apart.

use std::time::{Duration, Instant};

use cudarc::driver::CudaSlice;

use super::tensor_core::{check_tensor_core, wgmma_runs_on, BlockLayout, TensorCoreConfig};
use super::{auto_kernel, check_config, spmm_kernel_with, SpmmEpilogue, SpmmKernel};
use crate::csr::DeviceCsr;
use crate::dense::DeviceDense;
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::kernels::compiled_spmm_variants_for;
use crate::scalar::{DType, Scalar};
use crate::timing::time_op;

/// How [`spmm_tune`] measures.
#[derive(Clone, Debug)]
pub struct TuneOptions {
    /// Untimed runs of a candidate before each of its timings.
    pub warmup: usize,
    /// Timed runs of every candidate in the first round (their median ranks it).
    pub screen_iters: usize,
    /// How many of the fastest candidates, besides the automatic choice, are timed again.
    pub finalists: usize,
    /// Interleaved rounds of the second timing.
    pub rounds: usize,
    /// Timed runs of each finalist per round.
    pub iters: usize,
    /// The share by which a finalist's median must beat the automatic choice's to replace it (0.02: 2% faster).
    pub margin: f64,
    /// Where the automatic choice's first-round median is at least `cutoff_from_ms`, a candidate whose first timed
    /// run takes more than this many times the fastest first-round median so far (the automatic choice is screened
    /// first) gets no more first-round runs: that run ranks it. Infinity screens every candidate in full.
    pub screen_cutoff: f64,
    /// The automatic choice's first-round median (ms) from which `screen_cutoff` applies (default 1 ms). Below it
    /// every candidate is screened in one timing call: a second call costs a stream hold of 1-3 ms and a
    /// synchronization, more than the runs it would save. Measured on the H100 (NOTES.md, "SpMM step 55"): with the
    /// cutoff at every size, the f32 suite's median tuning time rose from 171 to 307 ms while its longest fell from
    /// 4.6 to 2.6 s.
    pub cutoff_from_ms: f64,
    /// Whether A's values change before every product, as a weight's do in training ([`DeviceCsr::set_values`]):
    /// then each timed run of a tensor-core kernel first writes A's values into its blocks again (the same bits),
    /// the work each update costs it and a tile does not pay, so the choice is the fastest update and product.
    /// Tuning builds the blocks of every layout it times, and each update rewrites all the built ones: keep only
    /// the chosen kernel's afterwards ([`DeviceCsr::keep_tensor_core_blocks_of`]).
    pub values_change: bool,
}

impl Default for TuneOptions {
    fn default() -> Self {
        TuneOptions {
            warmup: 1,
            screen_iters: 3,
            finalists: 3,
            rounds: 3,
            iters: 7,
            margin: 0.02,
            screen_cutoff: 2.0,
            cutoff_from_ms: 1.0,
            values_change: false,
        }
    }
}

/// A kernel and the median of its timed runs in milliseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Timed {
    pub kernel: SpmmKernel,
    pub ms: f64,
}

/// What [`spmm_tune`] found.
#[derive(Clone, Debug)]
pub struct TunedSpmm {
    /// The kernel to use: the fastest finalist where it beat the automatic choice by the margin, else that choice.
    pub kernel: SpmmKernel,
    /// Its median over the second round, in milliseconds.
    pub ms: f64,
    /// [`auto_kernel`]'s choice, what [`super::spmm_auto`] runs.
    pub automatic: SpmmKernel,
    /// Its median over the second round.
    pub automatic_ms: f64,
    /// The second round, fastest first (the automatic choice among them).
    pub finalists: Vec<Timed>,
    /// Candidates timed in the first round.
    pub screened: usize,
    /// Candidates that could not run (e.g. out of device memory for their tensor-core blocks), and why.
    pub skipped: Vec<(SpmmKernel, String)>,
    /// Host time the tuning took, from the automatic choice to the chosen kernel's last run.
    pub elapsed: Duration,
}

impl TunedSpmm {
    /// The automatic choice's median over the chosen kernel's (1.0 where the choice stands).
    pub fn speedup(&self) -> f64 {
        self.automatic_ms / self.ms
    }
}

/// Every kernel compiled in this build that can run C (m x n) = A (m x k) * B of `dtype` on `info`'s device: the
/// tiled variants that [`check_config`] accepts and the tensor-core kernels that [`check_tensor_core`] accepts and
/// the device runs. Empty in a build without kernels. Pure.
pub fn tune_candidates(info: &crate::gpu::DeviceInfo, dtype: DType, m: usize, k: usize, n: usize) -> Vec<SpmmKernel> {
    candidates_with(wgmma_runs_on(info), dtype, m, k, n)
}

/// [`tune_candidates`] for a device that does (`wgmma`) or does not run the warpgroup-mma kernel.
pub(crate) fn candidates_with(wgmma: bool, dtype: DType, m: usize, k: usize, n: usize) -> Vec<SpmmKernel> {
    let tiles = compiled_spmm_variants_for(dtype)
        .filter(|c| check_config(c, dtype, m, k, n).is_ok())
        .map(|c| SpmmKernel::Tiled(*c));
    let tensor_cores = TensorCoreConfig::all(dtype)
        .into_iter()
        .filter(|c| (wgmma || !c.is_wgmma()) && check_tensor_core(c, dtype, m, n).is_ok())
        .map(SpmmKernel::TensorCore);
    tiles.chain(tensor_cores).collect()
}

/// The second round's kernels, as indices into `screened`: `automatic` first, then the `count` fastest others by
/// their first-round medians (a median that is not finite never qualifies). Pure.
pub(crate) fn pick_finalists(screened: &[f64], automatic: usize, count: usize) -> Vec<usize> {
    let mut others: Vec<usize> = (0..screened.len()).filter(|&i| i != automatic && screened[i].is_finite()).collect();
    others.sort_by(|&a, &b| screened[a].total_cmp(&screened[b]).then(a.cmp(&b)));
    std::iter::once(automatic).chain(others.into_iter().take(count)).collect()
}

/// The winner among the second round's medians `ms`, whose entry 0 is the automatic choice: the fastest entry
/// where it is at least `margin` faster than entry 0, else entry 0. Pure.
pub(crate) fn choose(ms: &[f64], margin: f64) -> usize {
    let Some(&automatic) = ms.first() else { return 0 };
    let best = (1..ms.len()).filter(|&i| ms[i].is_finite()).min_by(|&a, &b| ms[a].total_cmp(&ms[b]).then(a.cmp(&b)));
    match best {
        Some(i) if !automatic.is_finite() || ms[i] <= automatic * (1.0 - margin) => i,
        _ => 0,
    }
}

/// Whether a candidate whose first timed run took `first_ms` gets no more first-round runs: it took more than
/// `cutoff` times the fastest first-round median so far. Pure.
pub(crate) fn screened_out(first_ms: f64, fastest_ms: f64, cutoff: f64) -> bool {
    first_ms > cutoff * fastest_ms
}

/// Whether a candidate's failure is one tuning passes over (the kernel cannot run this product on this device now)
/// rather than one to return.
fn skippable(e: &Error) -> bool {
    matches!(e, Error::OutOfDeviceMemory { .. } | Error::Unsupported { .. } | Error::TooLarge(_))
}

/// Times the SpMM kernels that can run C = A * B (every compiled tile and tensor-core kernel, [`tune_candidates`])
/// on these operands and returns the fastest, measured as described in the module documentation. On return C holds
/// A * B by the chosen kernel. The tensor-core kernels tried build A's blocks for their windows, which stay with A
/// as after [`super::spmm_tensor_core`]. The automatic choice's own failure is returned; another candidate that
/// fails for lack of device memory or an unsupported shape is listed in [`TunedSpmm::skipped`].
pub fn spmm_tune<T: Scalar>(
    gpu: &Gpu,
    a: &DeviceCsr<T>,
    b: &DeviceDense<T>,
    c: &mut DeviceDense<T>,
    opts: &TuneOptions,
) -> Result<TunedSpmm> {
    spmm_tune_with(gpu, a, b, c, SpmmEpilogue::default(), opts)
}

/// [`spmm_tune`] for C = ReLU(A * B + bias) (`bias` one f32 per row of C): every candidate is timed with the fused
/// epilogue it would run with ([`super::spmm_kernel_bias_relu`]), and on return C holds ReLU(A * B + bias) by the
/// chosen kernel. A bias of the wrong length is the automatic choice's error, before anything is timed.
pub fn spmm_tune_bias_relu<T: Scalar>(
    gpu: &Gpu,
    a: &DeviceCsr<T>,
    b: &DeviceDense<T>,
    bias: &CudaSlice<f32>,
    c: &mut DeviceDense<T>,
    opts: &TuneOptions,
) -> Result<TunedSpmm> {
    spmm_tune_with(gpu, a, b, c, SpmmEpilogue::bias_relu(bias), opts)
}

/// [`spmm_tune`] for C = alpha * A * B + beta * C, then the bias and ReLU where `epilogue` has a bias: every
/// candidate is timed with the epilogue it would run with ([`super::spmm_kernel_with`]), so that the scalars' cost
/// (the tensor-core kernels' twins that apply them, the read of C where beta is not 0) is part of the choice. On
/// return C holds the epilogue's result by the chosen kernel, on C's values from before the call: where beta is not
/// 0, the timed runs, which each read the last one's C, work on C while a copy of its starting values waits on the
/// device (m x n elements more device memory while tuning, [`Error::OutOfDeviceMemory`] where there is none).
pub fn spmm_tune_with<T: Scalar>(
    gpu: &Gpu,
    a: &DeviceCsr<T>,
    b: &DeviceDense<T>,
    c: &mut DeviceDense<T>,
    epilogue: SpmmEpilogue,
    opts: &TuneOptions,
) -> Result<TunedSpmm> {
    gpu.refuse_while_recording("tuning (it times kernels)")?;
    if !(0.0..1.0).contains(&opts.margin)
        || opts.screen_iters == 0
        || opts.rounds == 0
        || opts.iters == 0
        || opts.screen_cutoff.is_nan()
        || opts.screen_cutoff < 1.0
        || opts.cutoff_from_ms.is_nan()
    {
        return Err(Error::Usage(format!(
            "tuning needs a margin in [0, 1), a screen cutoff of at least 1 and at least one timed run per round \
             (got {opts:?})"
        )));
    }
    let (m, k, n) = (a.rows(), a.cols(), b.cols());
    let start = Instant::now();
    let automatic = auto_kernel(gpu, a, n)?;
    let run = |c: &mut DeviceDense<T>, kernel: &SpmmKernel| {
        if let (true, SpmmKernel::TensorCore(config)) = (opts.values_change, kernel) {
            a.rewrite_unchanged_tensor_core_values(gpu, BlockLayout::of(config)?)?;
        }
        spmm_kernel_with(gpu, a, b, c, kernel, epilogue)
    };
    // C's starting values, where the runs read them.
    let start_c =
        if epilogue.reads_c() { Some(c.copy(gpu, "keeping C's starting values while tuning")?) } else { None };
    // Shapes, the bias and the build are checked by the automatic choice's own run, before anything else is timed.
    run(c, &automatic)?;
    let mut candidates = tune_candidates(gpu.info(), T::DTYPE, m, k, n);
    let automatic_at = match candidates.iter().position(|&kernel| kernel == automatic) {
        Some(i) => i,
        None => {
            candidates.push(automatic);
            candidates.len() - 1
        }
    };
    let mut time_after = |warmup: usize, kernel: &SpmmKernel, iters: usize| -> Result<Vec<f64>> {
        time_op(gpu, warmup, iters, || run(c, kernel)).map(|t| t.runs_ms)
    };
    let mut screened = vec![f64::NAN; candidates.len()];
    let mut skipped = Vec::new();
    let mut fastest = f64::INFINITY;
    // The automatic choice first, so that the cutoff has a time to compare with from the first other candidate.
    let order = std::iter::once(automatic_at).chain((0..candidates.len()).filter(|&i| i != automatic_at));
    for i in order {
        let kernel = &candidates[i];
        // With the cutoff (the automatic choice timed, and slow enough: NaN until then), one run decides whether
        // the rest are taken.
        let first = if screened[automatic_at] >= opts.cutoff_from_ms { 1 } else { opts.screen_iters };
        let runs = time_after(opts.warmup, kernel, first).and_then(|mut runs| {
            if first < opts.screen_iters && !screened_out(runs[0], fastest, opts.screen_cutoff) {
                runs.extend(time_after(0, kernel, opts.screen_iters - first)?);
            }
            Ok(runs)
        });
        match runs {
            Ok(runs) => {
                screened[i] = median(runs);
                fastest = fastest.min(screened[i]);
            }
            Err(e) if i != automatic_at && skippable(&e) => skipped.push((*kernel, e.to_string())),
            Err(e) => return Err(e),
        }
    }
    let finalists = pick_finalists(&screened, automatic_at, opts.finalists);
    let mut runs: Vec<Vec<f64>> = vec![Vec::new(); finalists.len()];
    for _ in 0..opts.rounds {
        for (j, &i) in finalists.iter().enumerate() {
            runs[j].extend(time_after(opts.warmup, &candidates[i], opts.iters)?);
        }
    }
    let ms: Vec<f64> = runs.into_iter().map(median).collect();
    let chosen = choose(&ms, opts.margin);
    let kernel = candidates[finalists[chosen]];
    // C from the chosen kernel, whichever ran last, on C's starting values.
    if let Some(start_c) = &start_c {
        c.copy_from(gpu, start_c)?;
    }
    run(c, &kernel)?;
    gpu.synchronize()?;
    let mut timed: Vec<Timed> =
        finalists.iter().zip(&ms).map(|(&i, &ms)| Timed { kernel: candidates[i], ms }).collect();
    timed.sort_by(|x, y| x.ms.total_cmp(&y.ms));
    Ok(TunedSpmm {
        kernel,
        ms: ms[chosen],
        automatic,
        automatic_ms: ms[0],
        finalists: timed,
        screened: screened.iter().filter(|v| v.is_finite()).count(),
        skipped,
        elapsed: start.elapsed(),
    })
}

/// The median of `runs` (NaN for none).
fn median(runs: Vec<f64>) -> f64 {
    crate::timing::Timings { runs_ms: runs }.median_ms()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::KERNELS_BUILT;

    #[test]
    fn the_finalists_are_the_automatic_choice_then_the_fastest_others() {
        let screened = [3.0, 1.0, f64::NAN, 2.0, 1.0, 0.5];
        assert_eq!(pick_finalists(&screened, 0, 3), vec![0, 5, 1, 4]);
        // The automatic choice is never listed twice, and is kept even when slow or not timed.
        assert_eq!(pick_finalists(&screened, 5, 2), vec![5, 1, 4]);
        assert_eq!(pick_finalists(&screened, 2, 1), vec![2, 5]);
        // Fewer candidates than asked for; none at all.
        assert_eq!(pick_finalists(&[1.0, 2.0], 1, 5), vec![1, 0]);
        assert_eq!(pick_finalists(&[1.0], 0, 3), vec![0]);
        assert_eq!(pick_finalists(&[f64::NAN, f64::INFINITY], 0, 3), vec![0]);
    }

    #[test]
    fn a_candidate_is_screened_out_past_the_cutoff_only() {
        assert!(!screened_out(2.0, 1.0, 2.0), "exactly twice the fastest is screened in full");
        assert!(screened_out(2.001, 1.0, 2.0));
        assert!(!screened_out(0.5, 1.0, 2.0));
        assert!(!screened_out(1e9, 1.0, f64::INFINITY), "an infinite cutoff screens every candidate in full");
        assert!(!screened_out(5.0, f64::INFINITY, 2.0), "nothing timed yet: no cutoff");
        assert!(!screened_out(f64::NAN, 1.0, 2.0));
    }

    #[test]
    fn the_automatic_choice_stands_unless_beaten_by_the_margin() {
        // 5% faster replaces it; 1% faster does not, at a 2% margin.
        assert_eq!(choose(&[10.0, 9.5, 11.0], 0.02), 1);
        assert_eq!(choose(&[10.0, 9.9, 11.0], 0.02), 0);
        assert_eq!(choose(&[10.0, 9.9], 0.0), 1);
        // The fastest of several wins, not the first that beats the margin.
        assert_eq!(choose(&[10.0, 9.0, 8.0, 8.5], 0.02), 2);
        // Exactly at the margin replaces it.
        assert_eq!(choose(&[10.0, 9.75], 0.025), 1);
        // A finalist that did not time never wins; an automatic choice without a time loses to one that did.
        assert_eq!(choose(&[10.0, f64::NAN], 0.02), 0);
        assert_eq!(choose(&[f64::NAN, 12.0], 0.02), 1);
        assert_eq!(choose(&[10.0], 0.02), 0);
        assert_eq!(choose(&[], 0.02), 0);
    }

    #[test]
    fn the_candidates_are_the_compiled_kernels_that_accept_the_shape() {
        for dtype in [DType::F32, DType::F16, DType::Bf16] {
            for (m, k, n) in [(4096, 4096, 256), (7, 96, 40), (1, 1, 1), (300, 500, 33)] {
                let all = candidates_with(true, dtype, m, k, n);
                if !KERNELS_BUILT {
                    assert!(all.is_empty(), "{dtype} {m}x{k}x{n}: a build without kernels has no candidates");
                    continue;
                }
                let tiles = all.iter().filter(|c| matches!(c, SpmmKernel::Tiled(_))).count();
                let accepted = compiled_spmm_variants_for(dtype).filter(|c| check_config(c, dtype, m, k, n).is_ok());
                assert_eq!(tiles, accepted.count(), "{dtype} {m}x{k}x{n}");
                assert!(tiles > 0, "{dtype} {m}x{k}x{n}: some tile runs every n");
                for kernel in &all {
                    match kernel {
                        SpmmKernel::Tiled(c) => {
                            assert_eq!(c.dtype, dtype);
                            check_config(c, dtype, m, k, n).unwrap();
                            if n % 2 == 1 {
                                assert_eq!(c.dense_vector_width, 1, "{c}: odd n takes scalar rows of B only");
                            }
                        }
                        SpmmKernel::TensorCore(c) => check_tensor_core(c, dtype, m, n).unwrap(),
                    }
                }
                // The automatic choice is one of them, with or without the warpgroup-mma kernel.
                let stats = crate::csr::RowStats::from_indptr(&(0..=m).map(|r| r * k.min(3)).collect::<Vec<_>>());
                for wgmma in [true, false] {
                    let some = candidates_with(wgmma, dtype, m, k, n);
                    let auto = SpmmKernel::select_with(wgmma, m, k, n, m * k.min(3), &stats, dtype, None);
                    assert!(some.contains(&auto), "{dtype} {m}x{k}x{n} wgmma {wgmma}: {auto} not a candidate");
                    let has_wgmma = some.iter().any(|c| matches!(c, SpmmKernel::TensorCore(t) if t.is_wgmma()));
                    assert_eq!(has_wgmma, wgmma && dtype == DType::F32, "{dtype} wgmma {wgmma}");
                }
            }
        }
        // f64 has no SpMM kernels.
        assert!(candidates_with(true, DType::F64, 64, 64, 64).is_empty());
        // A choice can be stored as its name and parsed back.
        for dtype in [DType::F32, DType::F16, DType::Bf16] {
            for kernel in candidates_with(true, dtype, 4096, 4096, 256) {
                assert_eq!(kernel.to_string().parse::<SpmmKernel>(), Ok(kernel), "{kernel}");
            }
        }
    }
}
