//! Recorded sequences of operations, replayed with one launch: CUDA graphs captured from a [`Gpu`]'s stream.
//!
//! Why: a product of a few microseconds on the device costs the host about as much to issue (the choice of kernel,
//! the argument checks, the driver's launch), so a loop of small products, a sparse network's layers at a small
//! batch, runs at the host's pace. [`Gpu::record`] captures what a closure queues, once, and
//! [`Recording::replay`] queues all of it again with one driver call, on the same buffers.
//!
//! What a recording may hold: the SpMM products in every form ([`crate::spmm()`], [`crate::spmm_auto`],
//! [`crate::spmm_concurrent`], whose side streams join the recording as parallel branches, the
//! tensor-core kernels, the epilogues, A^T through [`crate::DeviceCsr::transposed`], [`crate::spmm_layouts`]), the
//! dense transposition into a matrix made before ([`crate::DeviceDense::transpose_into`]), new values of A from the
//! device ([`crate::DeviceCsr::set_values_from_device`], [`crate::DeviceCsr::update_values`], which rewrite the
//! tensor-core blocks and A^T in the same recording), the production SpMV with a plan made before
//! ([`crate::spmv()`]), and your own kernels on [`Gpu::stream`]. The SpGEMM and the making of an SpMV plan read
//! back from the device and cannot be recorded.
//!
//! What a product builds on its first use of a matrix (the statistics of a matrix made on the device, the
//! tensor-core blocks, a kernel module, the column-tile counters, the side streams) needs a synchronisation, which
//! a recording cannot hold: run each operation once before recording it. Those first uses, and everything that
//! copies to or from the host, synchronises or allocates a buffer that outlives the operation, refuse to run while
//! the stream records ([`Error::Recording`]) rather than break the recording.

use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode, CUstreamCaptureStatus};
use cudarc::driver::CudaGraph;

use crate::error::{Error, Result};
use crate::gpu::Gpu;

/// Operations recorded from a [`Gpu`]'s stream by [`Gpu::record`], replayed by [`Recording::replay`].
pub struct Recording {
    /// The instantiated graph; None where the driver gave none (cudarc's end of a capture may).
    graph: Option<CudaGraph>,
    /// The handle's stream, which [`Recording::replay`] checks it is given.
    stream: std::sync::Arc<cudarc::driver::CudaStream>,
}

impl std::fmt::Debug for Recording {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recording").finish_non_exhaustive()
    }
}

impl Gpu {
    /// Whether this handle's stream is recording (a [`Gpu::record`], or a capture begun on [`Gpu::stream`]
    /// through cudarc). An invalidated capture counts as recording: it still holds the stream.
    pub fn is_recording(&self) -> Result<bool> {
        let status = self.stream().capture_status().map_err(Error::driver("asking whether the stream records", 0))?;
        Ok(status != CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE)
    }

    /// [`Error::Recording`] naming `what` where the stream records: for the operations that synchronise, copy
    /// to or from the host, build what a product keeps on first use, or make a buffer that outlives them.
    pub(crate) fn refuse_while_recording(&self, what: &str) -> Result<()> {
        if self.is_recording()? {
            return Err(Error::Recording(format!(
                "{what} cannot be recorded (it synchronises, copies to or from the host, or makes what later \
                 operations keep); run it before Gpu::record, and run each product once before recording it"
            )));
        }
        Ok(())
    }

    /// Records what `f` queues on this handle's stream, without running it, into a [`Recording`] that
    /// [`Recording::replay`] runs again with one launch, as often as wanted; gives back `f`'s own result too.
    ///
    /// Run every operation once before recording it: what a product builds on its first use of a matrix cannot
    /// be recorded ([`Error::Recording`], see the [module](crate::record) docs). The recording holds the device
    /// addresses of the buffers `f` used, not their contents: between replays, write new inputs into the same
    /// buffers ([`crate::DeviceDense::overwrite`], [`crate::DeviceCsr::set_values`]) and read the outputs from
    /// them. The products' own temporaries are allocated and freed inside the recording.
    ///
    /// Where `f` fails, the recording is ended and dropped, and `f`'s error returned; where it panics, the recording
    /// is ended as the panic unwinds. Either way the stream then runs as before. A recording while this stream
    /// already records is [`Error::Recording`].
    pub fn record<R>(&self, f: impl FnOnce(&Gpu) -> Result<R>) -> Result<(Recording, R)> {
        if self.is_recording()? {
            return Err(Error::Recording("the stream is already recording".into()));
        }
        let stream = self.stream();
        // Thread-local: a call of this thread that the driver deems unsafe while recording (a synchronous
        // allocation or copy) fails instead of running outside the recording.
        stream
            .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .map_err(Error::driver("beginning a recording", 0))?;
        let mut unwinding = EndOnUnwind { stream, armed: true };
        let result = f(self);
        unwinding.armed = false;
        let graph = stream.end_capture(CUgraphInstantiate_flags(0));
        let value = result?;
        let graph = graph.map_err(Error::driver("ending a recording (an operation in it broke it)", 0))?;
        if let Some(graph) = &graph {
            graph.upload().map_err(Error::driver("uploading a recording", 0))?;
        }
        Ok((Recording { graph, stream: stream.clone() }, value))
    }
}

/// Ends the stream's capture where the closure of [`Gpu::record`] panics, so that the stream does not stay recording
/// (every later operation on it would be refused or fail).
struct EndOnUnwind<'a> {
    stream: &'a std::sync::Arc<cudarc::driver::CudaStream>,
    armed: bool,
}

impl Drop for EndOnUnwind<'_> {
    fn drop(&mut self) {
        if self.armed {
            // The graph of a closure that panicked is dropped; an error here has nowhere to go.
            let _ = self.stream.end_capture(CUgraphInstantiate_flags(0));
        }
    }
}

impl Recording {
    /// Queues everything recorded on `gpu`'s stream again, with one launch, on the buffers it was recorded with;
    /// [`Error::WrongGpu`] for another handle than the one it was recorded from.
    ///
    /// # Safety
    /// Every buffer the recorded operations read or wrote must still be allocated, at the same address: the
    /// operands (A's arrays and the tensor-core blocks it had built, B, C, a bias, an SpMV plan), and a matrix's
    /// transpose where one was used. Dropping or replacing one of them before the last replay lets the device read
    /// or write freed memory: dropping an operand, a rewrite of A's structure, [`crate::DeviceCsr::forget_transposed`],
    /// [`crate::DeviceCsr::keep_tensor_core_blocks_of`] or `keep_transposed_tensor_core_blocks_of` dropping a layout
    /// the recording reads, or a failed update of A's values (which drops the blocks it could not rewrite). Writing
    /// new contents into them between replays is what a recording is for. What the handle keeps for its launches
    /// (column-tile counters, side streams) it keeps until it drops.
    pub unsafe fn replay(&self, gpu: &Gpu) -> Result<()> {
        if !std::sync::Arc::ptr_eq(&self.stream, gpu.stream()) {
            return Err(Error::WrongGpu("the recording was made from another Gpu handle's stream".into()));
        }
        match &self.graph {
            Some(graph) => graph.launch().map_err(Error::driver("replaying a recording", 0)),
            None => Ok(()),
        }
    }
}
