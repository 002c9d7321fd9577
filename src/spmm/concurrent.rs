//! Independent products side by side on the device: [`spmm_concurrent`].
//!
//! Why: a product of a few hundred rows at a small n fills few of the device's SMs, for a few microseconds that are
//! mostly its launch's ramp and tail, and the products of one stream run one after another. A step's independent
//! products (a layer's query, key and value projections; a mixture's experts) can overlap instead: the first is
//! queued on the handle's stream, each other on a side stream of its own after an event of the handle's stream,
//! and the handle's stream waits for all of them before anything queued after the call. Inside [`Gpu::record`] the
//! side streams join the recording, so the products become parallel branches of one graph.
//!
//! Safe by construction: the jobs borrow their C mutably and their A, B and bias shared, all at once, so no job's C
//! is another job's operand or C, and nothing queued before or after the call overlaps the branches.

use super::{auto_kernel, check_bias, check_config, check_gpu_operands, check_shapes, run_kernel, SpmmEpilogue};
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::spmm::tensor_core::{check_tensor_core_here, BlockLayout};
use crate::{DeviceCsr, DeviceDense, Scalar, SpmmKernel};

/// At most this many products at once: the handle's stream and up to seven side streams. More jobs share them in
/// turn, in order within each.
pub const MAX_BRANCHES: usize = 8;

/// One product of [`spmm_concurrent`]: C = A * B with `kernel` (None: the automatic choice, [`super::spmm_auto`]'s)
/// and `epilogue`.
pub struct SpmmJob<'a, T: Scalar> {
    pub a: &'a DeviceCsr<T>,
    pub b: &'a DeviceDense<T>,
    pub c: &'a mut DeviceDense<T>,
    pub kernel: Option<SpmmKernel>,
    pub epilogue: SpmmEpilogue<'a>,
}

impl<'a, T: Scalar> SpmmJob<'a, T> {
    /// C = A * B by the automatic choice, no epilogue.
    pub fn new(a: &'a DeviceCsr<T>, b: &'a DeviceDense<T>, c: &'a mut DeviceDense<T>) -> Self {
        SpmmJob { a, b, c, kernel: None, epilogue: SpmmEpilogue::default() }
    }
}

/// Runs `jobs` side by side on the device, the first on the handle's stream and each other on a side stream of its
/// own (up to [`MAX_BRANCHES`] at once, then in turn), and returns the kernel each ran; the handle's stream waits
/// for all of them, so whatever is queued after the call sees every C written. Each job's C gets the bits the same
/// product gets alone.
///
/// Every job is checked first (its operands `gpu`'s, the shapes, the bias, the kernel able to run it): a refused job
/// queues nothing of any job. What the products build on their first use of a matrix (its statistics, its
/// tensor-core blocks) is built on `gpu`'s stream before the fork, so jobs that share an A do not build it twice or
/// read it half built. In a recording ([`Gpu::record`]) the side streams must exist already: run the call once
/// before recording it.
///
/// Recorded is how it pays most: four small products that took 17.6 us one after another on one stream took 9.3 us
/// side by side in a recording (H200, NOTES.md step 111). Issued call by call, the host sets the pace of such small
/// products: with its fork and join (10 event calls for four jobs) it took 18-20 us where one stream took 20-25 us
/// (step 112).
pub fn spmm_concurrent<T: Scalar>(gpu: &Gpu, jobs: &mut [SpmmJob<'_, T>]) -> Result<Vec<SpmmKernel>> {
    let mut kernels = Vec::with_capacity(jobs.len());
    for job in jobs.iter() {
        check_gpu_operands(gpu, job.a, job.b, job.c)?;
        check_shapes(job.a, job.b, job.c)?;
        check_bias(gpu, job.a, job.epilogue.bias)?;
        let (m, k, n) = (job.a.rows(), job.a.cols(), job.b.cols());
        let kernel = match job.kernel {
            Some(kernel) => kernel,
            None => auto_kernel(gpu, job.a, n)?,
        };
        match &kernel {
            SpmmKernel::Tiled(config) => check_config(config, T::DTYPE, m, k, n)?,
            SpmmKernel::TensorCore(config) => check_tensor_core_here(gpu, config, T::DTYPE, m, n)?,
        }
        job.a.derived(gpu)?;
        if let SpmmKernel::TensorCore(config) = &kernel {
            job.a.tensor_core_blocks(gpu, BlockLayout::of(config)?)?;
        }
        kernels.push(kernel);
    }
    if jobs.len() < 2 {
        for (job, kernel) in jobs.iter_mut().zip(&kernels) {
            run_kernel(gpu, job.a, job.b, job.epilogue, job.c, kernel)?;
        }
        return Ok(kernels);
    }
    // The handle's own stream is the first lane: one side stream fewer to fork and join (two event calls each).
    let lanes = jobs.len().min(MAX_BRANCHES);
    let (fork, branches) = gpu.fork_branches(lanes - 1)?;
    fork.record(gpu.stream()).map_err(Error::driver("recording the fork's event", 0))?;
    let mut join = Join { gpu, branches: &branches, armed: true };
    for (branch, _) in &branches {
        branch.stream().wait(&fork).map_err(Error::driver("waiting for the fork's event", 0))?;
    }
    let mut ran = Ok(());
    for (i, (job, kernel)) in jobs.iter_mut().zip(&kernels).enumerate() {
        let lane = match i % lanes {
            0 => gpu,
            side => &branches[side - 1].0,
        };
        ran = run_kernel(lane, job.a, job.b, job.epilogue, job.c, kernel);
        if ran.is_err() {
            break;
        }
    }
    let joined = join.join();
    ran?;
    joined?;
    Ok(kernels)
}

/// Makes the handle's stream wait for every branch's work: by [`Join::join`], or on drop where something between
/// the fork and the join panicked or failed (the branches' work is queued and must be waited for, whatever else).
struct Join<'a> {
    gpu: &'a Gpu,
    /// Each branch with its join event ([`Gpu::fork_branches`]).
    branches: &'a [crate::gpu::Branch],
    armed: bool,
}

impl Join<'_> {
    fn join(&mut self) -> Result<()> {
        self.armed = false;
        let mut result = Ok(());
        for (branch, done) in self.branches {
            let recorded = done.record(branch.stream()).map_err(Error::driver("recording a branch's event", 0));
            let waited = recorded
                .and_then(|()| self.gpu.stream().wait(done).map_err(Error::driver("waiting for a branch's event", 0)));
            result = result.and(waited);
        }
        result
    }
}

impl Drop for Join<'_> {
    fn drop(&mut self) {
        if self.armed {
            // An error here has nowhere to go; the stream's next synchronisation reports a failed driver.
            let _ = self.join();
        }
    }
}
