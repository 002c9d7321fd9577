//! Kernel timing with CUDA events: warm-up runs, then one event pair per timed run, median reported.

use cudarc::driver::sys::CUevent_flags;

use crate::error::{Error, Result};
use crate::gpu::Gpu;

/// Event-timed runs of one operation, in milliseconds.
#[derive(Clone, Debug)]
pub struct Timings {
    pub runs_ms: Vec<f64>,
}

impl Timings {
    /// The median run.
    pub fn median_ms(&self) -> f64 {
        let mut v = self.runs_ms.clone();
        v.sort_by(|a, b| a.total_cmp(b));
        match v.len() {
            0 => f64::NAN,
            l if l % 2 == 1 => v[l / 2],
            l => 0.5 * (v[l / 2 - 1] + v[l / 2]),
        }
    }

    /// The fastest run.
    pub fn min_ms(&self) -> f64 {
        self.runs_ms.iter().copied().fold(f64::INFINITY, f64::min)
    }
}

/// Runs `op` `warmup` times untimed, then `iters` times, each between two events on the GPU's stream, so
/// the figures are device time: no host overhead, no launch queue effects between runs.
pub fn time_op(gpu: &Gpu, warmup: usize, iters: usize, mut op: impl FnMut() -> Result<()>) -> Result<Timings> {
    for _ in 0..warmup {
        op()?;
    }
    gpu.synchronize()?;
    let ctx = gpu.context();
    let flags = Some(CUevent_flags::CU_EVENT_DEFAULT);
    let mut pairs = Vec::with_capacity(iters);
    for _ in 0..iters {
        let start = ctx.new_event(flags).map_err(Error::driver("creating an event", 0))?;
        let stop = ctx.new_event(flags).map_err(Error::driver("creating an event", 0))?;
        start.record(gpu.stream()).map_err(Error::driver("recording an event", 0))?;
        op()?;
        stop.record(gpu.stream()).map_err(Error::driver("recording an event", 0))?;
        pairs.push((start, stop));
    }
    gpu.synchronize()?;
    let runs_ms = pairs
        .iter()
        .map(|(s, e)| s.elapsed_ms(e).map(f64::from).map_err(Error::driver("reading an event", 0)))
        .collect::<Result<Vec<f64>>>()?;
    Ok(Timings { runs_ms })
}

/// Device time of `iters` back-to-back runs of `op` between two events (criterion's `iter_custom`).
pub fn event_time(gpu: &Gpu, iters: u64, mut op: impl FnMut() -> Result<()>) -> Result<std::time::Duration> {
    let flags = Some(CUevent_flags::CU_EVENT_DEFAULT);
    let start = gpu.context().new_event(flags).map_err(Error::driver("creating an event", 0))?;
    let stop = gpu.context().new_event(flags).map_err(Error::driver("creating an event", 0))?;
    start.record(gpu.stream()).map_err(Error::driver("recording an event", 0))?;
    for _ in 0..iters {
        op()?;
    }
    stop.record(gpu.stream()).map_err(Error::driver("recording an event", 0))?;
    stop.synchronize().map_err(Error::driver("waiting for an event", 0))?;
    let ms = start.elapsed_ms(&stop).map_err(Error::driver("reading an event", 0))?;
    Ok(std::time::Duration::from_secs_f64(ms as f64 / 1e3))
}
