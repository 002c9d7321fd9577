//! Kernel timing with CUDA events: warm-up runs, then one event pair per timed run, median reported. The timed
//! runs are enqueued behind a stream hold ([`Gpu::hold_stream`]) long enough for the host to enqueue all of
//! them, so that they run back to back: an event pair then brackets device time only, never the host's work
//! between launches (allocations, argument setup, a descheduled thread), which on problems of a few
//! microseconds was as long as the kernels and made single problems run 2x slow in some runs.

use std::time::{Duration, Instant};

use cudarc::driver::sys::CUevent_flags;

use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::kernels::KERNELS_BUILT;

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

/// How long the stream is held for `runs` runs whose host side took `per_run` each (the fastest warm-up run;
/// None without warm-up): three times their host time, at least 1 ms, at most 50 ms (beyond it the runs are
/// long enough that the host keeps ahead of the GPU anyway).
pub fn hold_for(per_run: Option<Duration>, runs: usize) -> Duration {
    let per_run = per_run.unwrap_or(Duration::from_micros(500));
    let runs = u32::try_from(runs).unwrap_or(u32::MAX);
    per_run.saturating_mul(3).saturating_mul(runs).clamp(Duration::from_millis(1), Duration::from_millis(50))
}

/// The stream hold where this build has kernels (without them only library baselines can be timed, unheld).
fn hold(gpu: &Gpu, duration: Duration) -> Result<()> {
    if KERNELS_BUILT {
        gpu.hold_stream(duration)?;
    }
    Ok(())
}

/// Runs `op` `warmup` times untimed, then `iters` times, each between two events on the GPU's stream, all of
/// them enqueued behind a stream hold (module documentation), so the figures are device time: no host
/// overhead, no launch queue effects between runs.
pub fn time_op(gpu: &Gpu, warmup: usize, iters: usize, mut op: impl FnMut() -> Result<()>) -> Result<Timings> {
    let mut per_run: Option<Duration> = None;
    for _ in 0..warmup {
        let t = Instant::now();
        op()?;
        let host = t.elapsed();
        per_run = Some(per_run.map_or(host, |p| p.min(host)));
    }
    gpu.synchronize()?;
    let ctx = gpu.context();
    let flags = Some(CUevent_flags::CU_EVENT_DEFAULT);
    let mut pairs = Vec::with_capacity(iters);
    hold(gpu, hold_for(per_run, iters))?;
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

/// Device time of `iters` back-to-back runs of `op` between two events (criterion's `iter_custom`), enqueued
/// behind a stream hold as in [`time_op`].
pub fn event_time(gpu: &Gpu, iters: u64, mut op: impl FnMut() -> Result<()>) -> Result<std::time::Duration> {
    let flags = Some(CUevent_flags::CU_EVENT_DEFAULT);
    let start = gpu.context().new_event(flags).map_err(Error::driver("creating an event", 0))?;
    let stop = gpu.context().new_event(flags).map_err(Error::driver("creating an event", 0))?;
    hold(gpu, hold_for(None, usize::try_from(iters).unwrap_or(usize::MAX)))?;
    start.record(gpu.stream()).map_err(Error::driver("recording an event", 0))?;
    for _ in 0..iters {
        op()?;
    }
    stop.record(gpu.stream()).map_err(Error::driver("recording an event", 0))?;
    stop.synchronize().map_err(Error::driver("waiting for an event", 0))?;
    let ms = start.elapsed_ms(&stop).map_err(Error::driver("reading an event", 0))?;
    Ok(std::time::Duration::from_secs_f64(ms as f64 / 1e3))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hold_covers_the_host_time_within_bounds() {
        let us = Duration::from_micros;
        assert_eq!(hold_for(Some(us(100)), 20), us(6000));
        assert_eq!(hold_for(Some(us(1)), 20), Duration::from_millis(1));
        assert_eq!(hold_for(Some(Duration::from_millis(5)), 20), Duration::from_millis(50));
        assert_eq!(hold_for(None, 4), us(6000));
        assert_eq!(hold_for(None, usize::MAX), Duration::from_millis(50));
        assert_eq!(hold_for(Some(Duration::MAX), 3), Duration::from_millis(50));
    }
}
