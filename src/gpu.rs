//! The GPU handle: context, stream, lazily loaded and cached kernel modules, and the device's limits.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cudarc::driver::sys::{self, CUdevice_attribute as Attr};
use cudarc::driver::{
    CudaContext, CudaEvent, CudaFunction, CudaModule, CudaSlice, CudaStream, LaunchConfig, PushKernelArg,
};

use crate::error::{Error, Result};
use crate::kernels::{Family, KERNELS_BUILT};
use crate::spmm::{SpmmConfig, TensorCoreConfig};

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

impl DeviceInfo {
    /// Whether the device has thread block clusters (compute capability 9.0 and up).
    pub fn has_clusters(&self) -> bool {
        self.compute_capability.0 >= 9
    }
}

/// A CUDA device with one stream on which every tilesparse operation runs, in order.
///
/// Modules load on first use and stay cached, as do the functions looked up in them.
pub struct Gpu {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    /// For a branch ([`Gpu::fork_branches`]): the stream of the handle it branches from, whose buffers it takes as its
    /// own.
    parent: Option<Arc<CudaStream>>,
    /// What a handle and its branches share.
    caches: Arc<Caches>,
    /// Extra streams for kernels that may run side by side (made on first use, kept), each with its own column-tile
    /// counters for the branches that run on it.
    side_streams: Mutex<Vec<SideStream>>,
    /// Column-tile counters of the SpMM kernel's SM-affine block order ([`Gpu::tile_counters`]): this stream's.
    tile_counters: Arc<Mutex<TileCounters>>,
    /// The event that marks a fork of this stream into side streams ([`Gpu::fork_branches`]), made on first use.
    fork: Mutex<Option<Arc<CudaEvent>>>,
    info: DeviceInfo,
}

/// The loaded modules and functions, and what the driver was asked about them, shared by a handle and its
/// branches.
#[derive(Default)]
struct Caches {
    modules: Mutex<[Option<Arc<CudaModule>>; Family::ALL.len()]>,
    functions: Mutex<HashMap<String, CudaFunction>>,
    /// How many clusters of (kernel, blocks per cluster) the device runs at once ([`Gpu::cluster_capacity`]), the
    /// kernel by its driver handle.
    cluster_capacity: Mutex<HashMap<(usize, u32), usize>>,
    /// The tile kernels by config ([`Gpu::tile_kernel`]).
    tile_kernels: Mutex<HashMap<SpmmConfig, TileKernel>>,
    /// The tensor-core kernels by config and scalars ([`Gpu::tensor_core_kernel`]).
    tensor_core_kernels: Mutex<HashMap<(TensorCoreConfig, bool), TensorCoreKernel>>,
}

/// An SpMM tile kernel, how many of its blocks an SM holds at once, and the kernels that may follow it (the split
/// rows' fix-up, the fill of the rows its grid leaves out) for its element type ([`Gpu::tile_kernel`]).
#[derive(Clone)]
pub(crate) struct TileKernel {
    pub(crate) function: CudaFunction,
    pub(crate) blocks_per_sm: usize,
    pub(crate) fixup: CudaFunction,
    pub(crate) zero_rows: CudaFunction,
}

/// A tensor-core SpMM kernel and the kernels that may follow it for its element type: the split ranges' fix-up and
/// the fill of the empty windows its grid leaves out ([`Gpu::tensor_core_kernel`]).
#[derive(Clone)]
pub(crate) struct TensorCoreKernel {
    pub(crate) function: CudaFunction,
    pub(crate) fixup: CudaFunction,
    pub(crate) zero_windows: CudaFunction,
}

/// The column-tile counters of one stream's SpMM launches: the buffer in use, and those it replaced as it grew.
#[derive(Default)]
pub(crate) struct TileCounters {
    pub(crate) current: Option<CudaSlice<i32>>,
    /// Kept until the handle drops: a [`crate::Recording`] holds the address of the buffer it was recorded with,
    /// which a later, larger launch must not free under it. Each replaces one at most half its size, so these
    /// hold less than the buffer in use.
    retired: Vec<CudaSlice<i32>>,
}

/// A handle on a side stream and the event that marks the end of its work ([`Gpu::fork_branches`]).
pub(crate) type Branch = (Gpu, Arc<CudaEvent>);

/// A side stream, the column-tile counters of the launches queued on it, and the event that marks the end of its
/// work for a join ([`Gpu::fork_branches`]).
struct SideStream {
    stream: Arc<CudaStream>,
    tile_counters: Arc<Mutex<TileCounters>>,
    done: Arc<CudaEvent>,
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

    /// Refuses device memory made by another `Gpu` handle: [`Error::WrongGpu`]. Every operation of a handle runs
    /// on its one stream and cudarc's cross-stream events are off (see [`Gpu::new`]), so memory of another
    /// handle could still be in flight there, or be freed there while this handle's kernel reads it; memory of
    /// another device would fault.
    pub(crate) fn check_owns<T>(&self, what: &str, slice: &CudaSlice<T>) -> Result<()> {
        if Arc::ptr_eq(slice.stream(), &self.stream)
            || self.parent.as_ref().is_some_and(|p| Arc::ptr_eq(slice.stream(), p))
        {
            return Ok(());
        }
        Err(Error::WrongGpu(format!(
            "{what} was made by another Gpu handle (device {}); this one is device {}: use one handle for a \
             computation's operands, plans and results",
            slice.ordinal(),
            self.info.ordinal
        )))
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
        let gpu = Gpu {
            ctx,
            stream,
            parent: None,
            caches: Arc::new(Caches::default()),
            side_streams: Mutex::new(Vec::new()),
            tile_counters: Arc::default(),
            fork: Mutex::new(None),
            info,
        };
        gpu.keep_freed_memory()?;
        Ok(gpu)
    }

    /// Keeps freed device memory in the stream-ordered pool instead of returning it to the driver at every
    /// synchronisation (the pool's default release threshold is 0). Operations that allocate per call (the
    /// SpGEMM, whose output size is known only mid-way) then reuse memory instead of mapping fresh pages: on
    /// the H100, C = A^2 of 4elt took 0.17 to 0.51 ms end to end depending on what the pool had just released.
    /// [`Gpu::trim_pool`] gives the memory back. The pool is the device's, shared by the process.
    fn keep_freed_memory(&self) -> Result<()> {
        self.set_pool_attribute(
            sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
            u64::MAX,
            "setting the memory pool's release threshold",
        )
    }

    /// Returns the memory the pool keeps but no buffer uses to the driver (after waiting for queued work).
    pub fn trim_pool(&self) -> Result<()> {
        self.synchronize()?;
        if let Some(pool) = self.mem_pool()? {
            // SAFETY: trims unused memory only; live allocations are untouched.
            unsafe { sys::cuMemPoolTrimTo(pool, 0) }.result().map_err(Error::driver("trimming the memory pool", 0))?;
        }
        Ok(())
    }

    /// The device's properties.
    pub fn info(&self) -> &DeviceInfo {
        &self.info
    }

    /// The stream every operation is queued on.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// `count` side streams for independent kernels that may run concurrently, made once and kept. Work on
    /// them must be ordered against [`Gpu::stream`] with events ([`SideStreams`]).
    pub(crate) fn side_streams(&self, count: usize) -> Result<Vec<Arc<CudaStream>>> {
        let streams = self.first_side_streams(count)?;
        Ok(streams[..count].iter().map(|s| s.stream.clone()).collect())
    }

    /// The side streams, at least `count` of them (made here where they are fewer; refused while recording).
    fn first_side_streams(&self, count: usize) -> Result<std::sync::MutexGuard<'_, Vec<SideStream>>> {
        let mut streams = self.side_streams.lock().unwrap_or_else(|e| e.into_inner());
        if streams.len() < count {
            self.refuse_while_recording("creating side streams (on their first use)")?;
        }
        while streams.len() < count {
            let stream = self.ctx.new_stream().map_err(Error::driver("creating a stream", 0))?;
            let done = Arc::new(self.ctx.new_event(None).map_err(Error::driver("creating an event", 0))?);
            streams.push(SideStream { stream, tile_counters: Arc::default(), done });
        }
        Ok(streams)
    }

    /// A fork of this stream into its first `count` side streams, for products that run side by side
    /// ([`crate::spmm::spmm_concurrent`]): the fork's event (recorded on this stream, waited for by the side
    /// streams) and, per side stream, a handle on it with its join event (recorded there, waited for here).
    ///
    /// A branch handle shares this one's modules and caches, takes this handle's buffers as its own, and has its
    /// stream's column-tile counters. Its work is ordered against this stream only by those events, so it is never
    /// handed out. The events are made once and kept: made and destroyed per call, they cost the host more than a
    /// small product. An event waited for right after it is recorded, as here, gives the same order when calls
    /// share it: a later record only adds work to wait for.
    pub(crate) fn fork_branches(&self, count: usize) -> Result<(Arc<CudaEvent>, Vec<Branch>)> {
        let streams = self.first_side_streams(count)?;
        let mut fork = self.fork.lock().unwrap_or_else(|e| e.into_inner());
        if fork.is_none() {
            self.refuse_while_recording("creating the fork's event (on its first use)")?;
            *fork = Some(Arc::new(self.ctx.new_event(None).map_err(Error::driver("creating an event", 0))?));
        }
        let branch = |side: &SideStream| Gpu {
            ctx: self.ctx.clone(),
            stream: side.stream.clone(),
            parent: Some(self.stream.clone()),
            caches: self.caches.clone(),
            side_streams: Mutex::new(Vec::new()),
            tile_counters: side.tile_counters.clone(),
            fork: Mutex::new(None),
            info: self.info.clone(),
        };
        let branches = streams[..count].iter().map(|side| (branch(side), side.done.clone())).collect();
        Ok((fork.clone().expect("made just above"), branches))
    }

    /// The context.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// Waits for all queued work; reports any error a kernel raised.
    pub fn synchronize(&self) -> Result<()> {
        self.stream.synchronize().map_err(Error::driver("synchronizing the stream", 0))
    }

    /// Keeps the stream busy for `duration` (one thread spinning on the GPU's timer): work enqueued behind it
    /// meanwhile runs back to back once it ends, whatever the host's pace (the timing's hold, src/timing.rs).
    pub fn hold_stream(&self, duration: std::time::Duration) -> Result<()> {
        let f = self.function(Family::Util, "ts_hold_stream")?;
        let ns = u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX);
        let cfg = LaunchConfig { grid_dim: (1, 1, 1), block_dim: (1, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: the kernel takes one unsigned long long by value and touches no memory.
        unsafe { self.stream.launch_builder(&f).arg(&ns).launch(cfg) }
            .map(|_| ())
            .map_err(Error::driver("launching the stream hold", 0))
    }

    /// Free and total device memory, in bytes.
    pub fn memory(&self) -> Result<(usize, usize)> {
        self.ctx.mem_get_info().map_err(Error::driver("cuMemGetInfo", 0))
    }

    /// The device's memory pool, which serves every allocation of this crate (cudarc allocates stream-ordered
    /// where the device supports it); None where it does not.
    fn mem_pool(&self) -> Result<Option<sys::CUmemoryPool>> {
        if !self.ctx.has_async_alloc() {
            return Ok(None);
        }
        self.ctx.bind_to_thread().map_err(Error::driver("binding the context", 0))?;
        let mut pool = std::ptr::null_mut();
        // SAFETY: writes one handle; the device ordinal comes from the live context.
        unsafe { sys::cuDeviceGetMemPool(&mut pool, self.ctx.cu_device()) }
            .result()
            .map_err(Error::driver("cuDeviceGetMemPool", 0))?;
        Ok(Some(pool))
    }

    /// Restarts the pool's high-water mark at the bytes in use now (see [`Gpu::pool_usage`]).
    pub fn pool_reset_peak(&self) -> Result<()> {
        // Setting USED_MEM_HIGH (to 0) resets the mark.
        self.set_pool_attribute(
            sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_HIGH,
            0,
            "resetting the memory pool's high-water mark",
        )
    }

    /// Sets a cuuint64_t attribute of the device's memory pool; nothing without stream-ordered allocation.
    fn set_pool_attribute(&self, attr: sys::CUmemPool_attribute, value: u64, what: &'static str) -> Result<()> {
        if let Some(pool) = self.mem_pool()? {
            let mut value = value;
            // SAFETY: the attributes passed here (RELEASE_THRESHOLD, USED_MEM_HIGH) take a cuuint64_t.
            unsafe { sys::cuMemPoolSetAttribute(pool, attr, &mut value as *mut u64 as *mut std::ffi::c_void) }
                .result()
                .map_err(Error::driver(what, 0))?;
        }
        Ok(())
    }

    /// (bytes in use, most bytes in use since the last [`Gpu::pool_reset_peak`]) of the device's memory pool:
    /// every buffer this crate (and its cuSPARSE wrappers) allocate. None without stream-ordered allocation.
    pub fn pool_usage(&self) -> Result<Option<(u64, u64)>> {
        let Some(pool) = self.mem_pool()? else { return Ok(None) };
        let read = |attr| -> Result<u64> {
            let mut v = 0u64;
            // SAFETY: both attributes are cuuint64_t.
            unsafe { sys::cuMemPoolGetAttribute(pool, attr, &mut v as *mut u64 as *mut std::ffi::c_void) }
                .result()
                .map_err(Error::driver("reading the memory pool's usage", 0))?;
            Ok(v)
        };
        Ok(Some((
            read(sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_CURRENT)?,
            read(sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_HIGH)?,
        )))
    }

    fn module(&self, family: Family) -> Result<Arc<CudaModule>> {
        if !KERNELS_BUILT {
            return Err(Error::KernelsNotBuilt);
        }
        let mut modules = self.caches.modules.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(m) = &modules[family.index()] {
            return Ok(m.clone());
        }
        self.refuse_while_recording("loading a kernel module (on a kernel's first use)")?;
        let image = cudarc::nvrtc::Ptx::from_binary(family.fatbin().to_vec());
        let module = self.ctx.load_module(image).map_err(Error::driver("loading a kernel module", 0))?;
        modules[family.index()] = Some(module.clone());
        Ok(module)
    }

    /// How many thread block clusters of 1 x 1 x `cluster_z` blocks of `block` threads (static shared memory
    /// only) of `function` (one of this handle's, which stay loaded while it lives) can be resident at once
    /// (`cuOccupancyMaxActiveClusters`; 0 where the device has no clusters). Asked once per (kernel, cluster size)
    /// and cached.
    pub(crate) fn cluster_capacity(&self, function: &CudaFunction, block: u32, cluster_z: u32) -> Result<usize> {
        let key = (function.cu_function() as usize, cluster_z);
        if let Some(&c) = self.caches.cluster_capacity.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
            return Ok(c);
        }
        let capacity = if !self.info.has_clusters() {
            0
        } else {
            let one_cluster =
                LaunchConfig { grid_dim: (1, 1, cluster_z), block_dim: (block, 1, 1), shared_mem_bytes: 0 };
            let mut attribute = cluster_attribute(cluster_z);
            let config = cluster_config(&one_cluster, &self.stream, &mut attribute);
            let mut clusters: std::ffi::c_int = 0;
            self.ctx.bind_to_thread().map_err(Error::driver("binding the context", 0))?;
            // SAFETY: `config` and `attribute` are valid for the call; the function belongs to this context.
            unsafe { sys::cuOccupancyMaxActiveClusters(&mut clusters, function.cu_function(), &config) }
                .result()
                .map_err(Error::driver("asking how many clusters fit", 0))?;
            clusters.max(0) as usize
        };
        self.caches.cluster_capacity.lock().unwrap_or_else(|e| e.into_inner()).insert(key, capacity);
        Ok(capacity)
    }

    /// The SpMM kernel's column-tile counters (`cuda/spmm/block_order.cuh`), at least `len` ints, all zero
    /// between launches: made zero here, and every launch that uses them leaves them zero. One buffer per
    /// stream suffices because its launches run in order there (a side stream has its own); the guard is held
    /// over a launch. A buffer that grows (to a power of two) replaces the old one, which is kept until the handle
    /// drops ([`TileCounters`]).
    pub(crate) fn tile_counters(&self, len: usize) -> Result<std::sync::MutexGuard<'_, TileCounters>> {
        let mut counters = self.tile_counters.lock().unwrap_or_else(|e| e.into_inner());
        if counters.current.as_ref().is_none_or(|c| c.len() < len) {
            self.refuse_while_recording("allocating the SpMM column-tile counters (on their first use)")?;
            let len = len.max(1024).next_power_of_two();
            let grown =
                self.stream.alloc_zeros::<i32>(len).map_err(Error::driver("allocating SpMM tile counters", 4 * len))?;
            if let Some(old) = counters.current.replace(grown) {
                counters.retired.push(old);
            }
        }
        Ok(counters)
    }

    /// How many blocks of `block` threads (static shared memory only) of `function` one SM holds at once
    /// (`cuOccupancyMaxActiveBlocksPerMultiprocessor`: registers, shared memory, threads and the block limit). Asked
    /// once per tile kernel, which [`Gpu::tile_kernel`] keeps.
    fn blocks_per_sm(&self, function: &CudaFunction, block: u32) -> Result<usize> {
        self.ctx.bind_to_thread().map_err(Error::driver("binding the context", 0))?;
        let blocks = function
            .occupancy_max_active_blocks_per_multiprocessor(block, 0, None)
            .map_err(Error::driver("asking how many blocks fit on an SM", 0))?;
        Ok(blocks as usize)
    }

    /// The tile kernel of `config` (compiled: [`crate::spmm::check_config`]), its blocks per SM and the kernels that
    /// may follow it, looked up by the config: its name, which takes about 0.5 us to build (a tenth of a launch's
    /// cost to the host), is built on the first use only.
    pub(crate) fn tile_kernel(&self, config: &SpmmConfig) -> Result<TileKernel> {
        let key = config.kernel_key();
        if let Some(kernel) = self.caches.tile_kernels.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
            return Ok(kernel.clone());
        }
        let function = self.function(Family::Spmm, &config.kernel_name())?;
        let kernel = TileKernel {
            blocks_per_sm: self.blocks_per_sm(&function, config.block_width * config.block_items_y)?,
            function,
            fixup: self.function(Family::Spmm, &format!("spmm_fixup_{}", config.dtype.name()))?,
            zero_rows: self.function(Family::Spmm, &format!("spmm_zero_rows_{}", config.dtype.name()))?,
        };
        self.caches.tile_kernels.lock().unwrap_or_else(|e| e.into_inner()).insert(key, kernel.clone());
        Ok(kernel)
    }

    /// The tensor-core kernel of `config` (checked: [`crate::spmm::tensor_core::check_tensor_core`]), its twin that
    /// takes the scalars (`_s`) where `scalars` is set, with `dynamic_shared` bytes of dynamic shared memory
    /// ([`Gpu::function_with_shared`]), and the kernels that may follow it: looked up by the config, the names built
    /// on the first use only.
    pub(crate) fn tensor_core_kernel(
        &self,
        config: &TensorCoreConfig,
        scalars: bool,
        dynamic_shared: u32,
    ) -> Result<TensorCoreKernel> {
        let key = (*config, scalars);
        if let Some(kernel) = self.caches.tensor_core_kernels.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
            return Ok(kernel.clone());
        }
        let name = if scalars { format!("{}_s", config.kernel_name()) } else { config.kernel_name() };
        let kernel = TensorCoreKernel {
            function: self.function_with_shared(config.family(), &name, dynamic_shared)?,
            fixup: self.function(Family::Spmm, &format!("spmm_tc_fixup_{}", config.dtype.name()))?,
            zero_windows: self.function(Family::Spmm, &format!("spmm_zero_windows_{}", config.dtype.name()))?,
        };
        self.caches.tensor_core_kernels.lock().unwrap_or_else(|e| e.into_inner()).insert(key, kernel.clone());
        Ok(kernel)
    }

    /// Launches `function` on the stream with `params` as its one argument, the blocks grouped into thread
    /// block clusters of 1 x 1 x `cluster_z` (cudarc's launch builder has no cluster attribute:
    /// `cuLaunchKernelEx`).
    ///
    /// # Safety
    /// As for any launch: `params` must be what the kernel expects, every buffer it names alive until the kernel
    /// is done (the caller holds their stream guards), and `cfg.grid_dim.2` a multiple of `cluster_z` (at most 8).
    pub(crate) unsafe fn launch_clustered<P>(
        &self,
        function: &CudaFunction,
        cfg: LaunchConfig,
        cluster_z: u32,
        mut params: P,
    ) -> std::result::Result<(), cudarc::driver::DriverError> {
        self.ctx.bind_to_thread()?;
        let mut attribute = cluster_attribute(cluster_z);
        let config = cluster_config(&cfg, &self.stream, &mut attribute);
        let mut args = [&mut params as *mut P as *mut std::ffi::c_void];
        // SAFETY: the caller's contract; `config`, `attribute` and `args` outlive the call (the driver copies the
        // arguments before it returns).
        unsafe { sys::cuLaunchKernelEx(&config, function.cu_function(), args.as_mut_ptr(), std::ptr::null_mut()) }
            .result()
    }

    /// The kernel `name` of `family`, loaded once and cached.
    pub(crate) fn function(&self, family: Family, name: &str) -> Result<CudaFunction> {
        self.function_with_shared(family, name, 0)
    }

    /// [`Gpu::function`] for a kernel launched with `dynamic_shared` bytes of dynamic shared memory: when the
    /// function is loaded, its limit is raised to that once (beyond 48 KB a block gets it only so). Such a kernel
    /// must always be looked up here, with the same number.
    pub(crate) fn function_with_shared(&self, family: Family, name: &str, dynamic_shared: u32) -> Result<CudaFunction> {
        if let Some(f) = self.caches.functions.lock().unwrap_or_else(|e| e.into_inner()).get(name) {
            return Ok(f.clone());
        }
        let module = self.module(family)?;
        let f = module.load_function(name).map_err(Error::driver("looking up a kernel", 0))?;
        if dynamic_shared > 0 {
            f.set_attribute(
                sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                dynamic_shared as i32,
            )
            .map_err(Error::driver("raising a kernel's dynamic shared memory limit", 0))?;
        }
        self.caches.functions.lock().unwrap_or_else(|e| e.into_inner()).insert(name.to_string(), f.clone());
        Ok(f)
    }
}

/// The launch attribute that groups blocks into clusters of 1 x 1 x `cluster_z`.
fn cluster_attribute(cluster_z: u32) -> sys::CUlaunchAttribute {
    let mut attribute = sys::CUlaunchAttribute {
        id: sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION,
        pad: [0; 4],
        value: sys::CUlaunchAttributeValue { pad: [0; 64] },
    };
    attribute.value.clusterDim = sys::CUlaunchAttributeValue_union__bindgen_ty_1 { x: 1, y: 1, z: cluster_z };
    attribute
}

/// The driver's launch configuration of `cfg` on `stream` with `attribute` (which must outlive the result).
fn cluster_config(
    cfg: &LaunchConfig,
    stream: &CudaStream,
    attribute: &mut sys::CUlaunchAttribute,
) -> sys::CUlaunchConfig {
    sys::CUlaunchConfig {
        gridDimX: cfg.grid_dim.0,
        gridDimY: cfg.grid_dim.1,
        gridDimZ: cfg.grid_dim.2,
        blockDimX: cfg.block_dim.0,
        blockDimY: cfg.block_dim.1,
        blockDimZ: cfg.block_dim.2,
        sharedMemBytes: cfg.shared_mem_bytes,
        hStream: stream.cu_stream(),
        attrs: attribute,
        numAttrs: 1,
    }
}

/// A fork of the GPU's stream into side streams that start after everything queued so far, and their join:
/// [`SideStreams::join`] makes the main stream wait for all of them.
pub(crate) struct SideStreams<'a> {
    gpu: &'a Gpu,
    streams: Vec<Arc<CudaStream>>,
    ready: cudarc::driver::CudaEvent,
    used: Vec<bool>,
}

impl<'a> SideStreams<'a> {
    pub(crate) fn fork(gpu: &'a Gpu, count: usize) -> Result<Self> {
        let streams = gpu.side_streams(count)?;
        let ready = gpu.stream.record_event(None).map_err(Error::driver("recording an event", 0))?;
        Ok(SideStreams { gpu, used: vec![false; streams.len()], streams, ready })
    }

    /// Side stream `i`, waiting for the fork point on first use.
    pub(crate) fn get(&mut self, i: usize) -> Result<&Arc<CudaStream>> {
        if !self.used[i] {
            self.streams[i].wait(&self.ready).map_err(Error::driver("waiting for an event", 0))?;
            self.used[i] = true;
        }
        Ok(&self.streams[i])
    }

    /// The main stream waits for every side stream that was used.
    pub(crate) fn join(self) -> Result<()> {
        for (stream, used) in self.streams.iter().zip(&self.used) {
            if *used {
                let done = stream.record_event(None).map_err(Error::driver("recording an event", 0))?;
                self.gpu.stream.wait(&done).map_err(Error::driver("waiting for an event", 0))?;
            }
        }
        Ok(())
    }
}
