//! The GPU handle: context, stream, lazily loaded and cached kernel modules, and the device's limits.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cudarc::driver::sys::CUdevice_attribute as Attr;
use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaStream};

use crate::error::{Error, Result};
use crate::kernels::{Family, KERNELS_BUILT};

/// What the driver reports about the device, read once when the handle is made.
#[derive(Clone, Debug)]
pub struct DeviceInfo {
    pub ordinal: usize,
    pub name: String,
    /// (major, minor), e.g. (9, 0) for an H100.
    pub compute_capability: (i32, i32),
    pub sm_count: usize,
    /// Shared memory a block gets without opting in.
    pub shared_mem_per_block: usize,
    /// Shared memory a block can get after raising its dynamic limit.
    pub shared_mem_per_block_optin: usize,
    pub shared_mem_per_sm: usize,
    pub l2_bytes: usize,
    pub total_mem: usize,
    /// CUDA driver API version, e.g. 13000.
    pub driver_version: i32,
}

/// A CUDA device with one stream on which every tilesparse operation runs, in order.
///
/// Modules load on first use and stay cached, as do the functions looked up in them.
pub struct Gpu {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    modules: Mutex<[Option<Arc<CudaModule>>; Family::ALL.len()]>,
    functions: Mutex<HashMap<String, CudaFunction>>,
    info: DeviceInfo,
}

impl std::fmt::Debug for Gpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gpu").field("info", &self.info).finish_non_exhaustive()
    }
}

impl Gpu {
    /// Number of CUDA devices, or an error saying why there are none usable. Never panics, also where
    /// libcuda is absent (cudarc would panic on its first call there, so it is probed first).
    pub fn device_count() -> Result<usize> {
        // SAFETY: only tries to dlopen libcuda; no CUDA call is made.
        if !unsafe { cudarc::driver::sys::is_culib_present() } {
            return Err(Error::NoDriver);
        }
        let count = CudaContext::device_count().map_err(Error::driver("cuInit/cuDeviceGetCount", 0))?;
        Ok(count.max(0) as usize)
    }

    /// Opens device `ordinal`. Fails with [`Error::NoDriver`] or [`Error::NoDevice`] rather than panicking.
    pub fn new(ordinal: usize) -> Result<Gpu> {
        let count = Self::device_count()?;
        if ordinal >= count {
            return Err(Error::NoDevice { ordinal, count });
        }
        let ctx = CudaContext::new(ordinal).map_err(Error::driver("creating the context", 0))?;
        // SAFETY: every tilesparse operation runs on the one stream below, so cudarc's per-buffer events
        // (which order accesses across streams) are not needed; they would add an event record per launch.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx.new_stream().map_err(Error::driver("creating the stream", 0))?;
        let attr = |a: Attr| {
            ctx.attribute(a).map(|v| v.max(0) as usize).map_err(Error::driver("reading a device attribute", 0))
        };
        let mut driver_version = 0i32;
        // SAFETY: writes one int; the driver is initialised (CudaContext::new called cuInit).
        unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut driver_version) }
            .result()
            .map_err(Error::driver("cuDriverGetVersion", 0))?;
        let info = DeviceInfo {
            ordinal,
            name: ctx.name().map_err(Error::driver("reading the device name", 0))?,
            compute_capability: ctx.compute_capability().map_err(Error::driver("reading the compute capability", 0))?,
            sm_count: attr(Attr::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
            shared_mem_per_block: attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK)?,
            shared_mem_per_block_optin: attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?,
            shared_mem_per_sm: attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR)?,
            l2_bytes: attr(Attr::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)?,
            total_mem: ctx.total_mem().map_err(Error::driver("reading the memory size", 0))?,
            driver_version,
        };
        Ok(Gpu { ctx, stream, modules: Mutex::new(Default::default()), functions: Mutex::new(HashMap::new()), info })
    }

    /// The device's properties.
    pub fn info(&self) -> &DeviceInfo {
        &self.info
    }

    /// The stream every operation is queued on.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// The context.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// Waits for all queued work; reports any error a kernel raised.
    pub fn synchronize(&self) -> Result<()> {
        self.stream.synchronize().map_err(Error::driver("synchronizing the stream", 0))
    }

    /// Free and total device memory, in bytes.
    pub fn memory(&self) -> Result<(usize, usize)> {
        self.ctx.mem_get_info().map_err(Error::driver("cuMemGetInfo", 0))
    }

    fn module(&self, family: Family) -> Result<Arc<CudaModule>> {
        if !KERNELS_BUILT {
            return Err(Error::KernelsNotBuilt);
        }
        let mut modules = self.modules.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(m) = &modules[family.index()] {
            return Ok(m.clone());
        }
        let image = cudarc::nvrtc::Ptx::from_binary(family.fatbin().to_vec());
        let module = self.ctx.load_module(image).map_err(Error::driver("loading a kernel module", 0))?;
        modules[family.index()] = Some(module.clone());
        Ok(module)
    }

    /// The kernel `name` of `family`, loaded once and cached.
    pub(crate) fn function(&self, family: Family, name: &str) -> Result<CudaFunction> {
        if let Some(f) = self.functions.lock().unwrap_or_else(|e| e.into_inner()).get(name) {
            return Ok(f.clone());
        }
        let module = self.module(family)?;
        let f = module.load_function(name).map_err(Error::driver("looking up a kernel", 0))?;
        self.functions.lock().unwrap_or_else(|e| e.into_inner()).insert(name.to_string(), f.clone());
        Ok(f)
    }
}
