//! The CUDA runtime of the GPU solver: the driver API and NVRTC through cudarc, both loaded at run
//! time (no CUDA toolkit at build time). Kernels are compiled by NVRTC for the device's own
//! architecture (`sm_XY`) into a CUBIN, which the vendor-neutral layer caches on disk.

use super::{DevicePtr, GpuRuntime};
use anyhow::{Context, Result, anyhow, bail, ensure};
use cudarc::driver::safe::{self, CudaContext, CudaEvent, CudaStream};
use cudarc::driver::{result as cu, sys};
use cudarc::nvrtc::{Ptx, result as nvrtc, sys as nvrtc_sys};
use std::cell::Cell;
use std::ffi::{CString, c_void};
use std::sync::Arc;

/// Runs `f`, turning a panic of cudarc's loader (a missing library or symbol) into an error.
pub(crate) fn guarded<T>(what: &str, f: impl FnOnce() -> T) -> Result<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|e| {
        let msg = e
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        anyhow!("{what}: {msg}")
    })
}

/// Compiles `source` with NVRTC and `opts` (the architecture among them) into a CUBIN.
fn nvrtc_compile(source: &str, name: &str, opts: &[String]) -> Result<Vec<u8>> {
    // SAFETY: only tries to open the library.
    let present = guarded("loading libnvrtc", || unsafe { nvrtc_sys::is_culib_present() })?;
    if !present {
        bail!("no NVRTC found (libnvrtc.so): the CUDA backend compiles its kernels at run time and needs it");
    }
    let src = CString::new(source)?;
    let cname = CString::new(name)?;
    let prog = guarded("loading libnvrtc", || nvrtc::create_program(&src, Some(&cname)))??;
    // SAFETY: prog is live until destroy_program below.
    unsafe {
        let res = nvrtc::compile_program(prog, opts);
        let log = nvrtc::get_program_log(prog).ok().map(|l| {
            let bytes: Vec<u8> = l.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
            String::from_utf8_lossy(&bytes).into_owned()
        });
        if let Err(e) = res {
            let _ = nvrtc::destroy_program(prog);
            bail!("NVRTC failed to compile {name} ({}): {e}\n{}", opts.join(" "), log.unwrap_or_default());
        }
        let mut size = 0usize;
        nvrtc_sys::nvrtcGetCUBINSize(prog, &mut size).result()?;
        let mut cubin = vec![0u8; size];
        nvrtc_sys::nvrtcGetCUBIN(prog, cubin.as_mut_ptr() as *mut _).result()?;
        let _ = nvrtc::destroy_program(prog);
        Ok(cubin)
    }
}

/// Number of CUDA devices (an error when the driver cannot be loaded).
pub fn device_count() -> Result<usize> {
    // SAFETY: only tries to open the library.
    if !guarded("loading libcuda", || unsafe { sys::is_culib_present() })? {
        bail!("no CUDA driver found (libcuda.so)");
    }
    guarded("no CUDA driver found (libcuda.so)", cu::init)?.context("cuInit failed")?;
    Ok(cu::device::get_count().context("cuDeviceGetCount failed")?.max(0) as usize)
}

/// One CUDA device: its primary context and one stream on which all work is ordered, both owned
/// through cudarc's safe layer (released when the last user drops them).
pub struct CudaRuntime {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    /// The second stream of [`alongside`](GpuRuntime::alongside), joined back into `stream` by
    /// the end of each call, with the two events that fork and join it (made once: no
    /// allocation a step).
    side: Arc<CudaStream>,
    fork: CudaEvent,
    join: CudaEvent,
    /// Whether launches go to `side` (inside `alongside`).
    on_side: Cell<bool>,
    name: String,
    arch: String,
    multiprocessors: u32,
    /// Whether the stream is capturing (event records then become graph nodes).
    capturing: Cell<bool>,
}

/// An instantiated graph (destroyed on drop).
pub struct CudaGraphExec(sys::CUgraphExec);

impl Drop for CudaGraphExec {
    fn drop(&mut self) {
        // SAFETY: instantiated by launch_capture and destroyed once; a launch still in flight
        // keeps what it needs (the driver defers the release).
        unsafe {
            let _ = cu::graph::exec_destroy(self.0);
        }
    }
}

/// A loaded module (unloaded when the last holder drops it).
pub type CudaModule = Arc<safe::CudaModule>;

/// A kernel of a loaded [`CudaModule`], valid while the module is (the solver keeps it).
#[derive(Clone, Copy, Debug)]
pub struct CudaFunction(sys::CUfunction);

impl CudaRuntime {
    /// Opens device `ordinal`: loads the driver, retains the primary context, makes a stream.
    pub fn new(ordinal: usize) -> Result<CudaRuntime> {
        // SAFETY: only tries to open the library.
        let present = guarded("loading libcuda", || unsafe { sys::is_culib_present() })?;
        if !present {
            bail!(
                "no CUDA driver found (libcuda.so): install the NVIDIA driver or add its directory to \
                 LD_LIBRARY_PATH, or run with the CPU backend"
            );
        }
        guarded("no CUDA driver found (libcuda.so)", cu::init)?.context("cuInit failed")?;
        let count = cu::device::get_count().context("cuDeviceGetCount failed")?;
        if count <= 0 {
            bail!("the CUDA driver found no GPU");
        }
        if ordinal >= count as usize {
            bail!("CUDA device {ordinal} does not exist ({count} found)");
        }
        let ctx = CudaContext::new(ordinal).context("cannot retain the primary CUDA context")?;
        // The solver orders all its work on one stream and owns its memory as raw device
        // pointers, so cudarc's tracking of its own buffers across streams has nothing to do; off,
        // opening a second stream makes no context-wide synchronisation, which another thread's
        // graph capture on the same device would not survive.
        // SAFETY: no cudarc CudaSlice is used with this context.
        unsafe { ctx.disable_event_tracking() };
        let (major, minor) = ctx.compute_capability()?;
        use sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT;
        let multiprocessors = ctx.attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32;
        let name = ctx.name()?;
        let stream = ctx.new_stream().context("cuStreamCreate failed")?;
        let side = ctx.new_stream().context("cuStreamCreate failed")?;
        let ordering_only = Some(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING);
        let (fork, join) = (ctx.new_event(ordering_only)?, ctx.new_event(ordering_only)?);
        let arch = format!("sm_{major}{minor}");
        Ok(CudaRuntime {
            ctx,
            stream,
            side,
            fork,
            join,
            on_side: Cell::new(false),
            name,
            arch,
            multiprocessors,
            capturing: Cell::new(false),
        })
    }

    fn bind(&self) -> Result<()> {
        self.ctx.bind_to_thread().context("cuCtxSetCurrent failed")
    }

    /// Errors where the host would wait on the stream while it captures: the captured steps must
    /// be launched first (GpuSolver's end_capture); CUDA would invalidate the capture instead.
    fn not_capturing(&self, what: &str) -> Result<()> {
        ensure!(!self.capturing.get(), "{what} while the stream captures steps (the capture must be launched first)");
        Ok(())
    }
}

impl GpuRuntime for CudaRuntime {
    type Module = CudaModule;
    type Function = CudaFunction;
    type Event = CudaEvent;
    type Graph = CudaGraphExec;

    fn vendor(&self) -> &'static str {
        "cuda"
    }

    fn device_name(&self) -> String {
        self.name.clone()
    }

    fn arch(&self) -> String {
        self.arch.clone()
    }

    fn ordinal(&self) -> usize {
        self.ctx.ordinal()
    }

    fn stream_handle(&self) -> *mut c_void {
        self.stream.cu_stream() as *mut c_void
    }

    fn multiprocessors(&self) -> u32 {
        self.multiprocessors
    }

    fn mem_info(&self) -> Result<(usize, usize)> {
        self.bind()?;
        Ok(cu::mem_get_info()?)
    }

    fn alloc(&self, bytes: usize) -> Result<DevicePtr> {
        self.bind()?;
        // SAFETY: plain device allocation; freed by free().
        unsafe { cu::malloc_sync(bytes.max(4)) }.map_err(|e| anyhow!("cuMemAlloc of {bytes} bytes failed: {e}"))
    }

    unsafe fn free(&self, ptr: DevicePtr) {
        let _ = self.bind();
        // SAFETY: the caller frees each allocation once, after the work using it.
        unsafe {
            let _ = cu::stream::synchronize(self.stream.cu_stream());
            let _ = cu::free_sync(ptr);
        }
    }

    fn zero(&self, ptr: DevicePtr, bytes: usize) -> Result<()> {
        self.bind()?;
        // SAFETY: the caller passes a live allocation of at least `bytes`.
        unsafe { cu::memset_d8_async(ptr, 0, bytes, self.stream.cu_stream()) }?;
        Ok(())
    }

    /// On the solver's stream, then waited for: cuMemcpyHtoD from pageable memory may return
    /// before its DMA lands, and on the legacy stream it does not order the solver's non-blocking
    /// stream, whose next kernels (a decomposed run's next step, reading the ghost planes just
    /// uploaded) could then run first.
    fn upload(&self, dst: DevicePtr, src: &[u8]) -> Result<()> {
        self.not_capturing("an upload")?;
        self.bind()?;
        let stream = self.stream.cu_stream();
        // SAFETY: the caller passes a destination of at least src.len() bytes; `src` outlives the
        // copy, which is waited for before returning.
        unsafe {
            cu::memcpy_htod_async(dst, src, stream)?;
            cu::stream::synchronize(stream)?;
        }
        Ok(())
    }

    /// As [`upload`](Self::upload): ordered after the stream's work, complete on return.
    fn download(&self, src: DevicePtr, dst: &mut [u8]) -> Result<()> {
        self.not_capturing("a download")?;
        self.bind()?;
        let stream = self.stream.cu_stream();
        // SAFETY: as upload, `dst` outlives the copy, waited for before returning.
        unsafe {
            cu::memcpy_dtoh_async(dst, src, stream)?;
            cu::stream::synchronize(stream)?;
        }
        Ok(())
    }

    fn compiler_flags(&self) -> Vec<String> {
        // No contraction of a*b+c into FMAs: the CPU reference does not contract, and the
        // kernels' own fused multiply-adds are explicit.
        vec![
            format!("--gpu-architecture={}", self.arch),
            "--std=c++17".into(),
            "-default-device".into(),
            "--fmad=false".into(),
        ]
    }

    fn compile(&self, source: &str, name: &str, options: &[String]) -> Result<Vec<u8>> {
        let mut opts = self.compiler_flags();
        opts.extend(options.iter().cloned());
        nvrtc_compile(source, name, &opts)
    }

    fn compile_all(&self, jobs: &[(&str, &str, &[String])]) -> Vec<Result<Vec<u8>>> {
        // NVRTC programs are independent: the first on this thread and each other on one of its
        // own, so that a step's modules take the longest one's time, not the sum, and a single
        // module (the autotuner's candidates) starts no thread.
        let flags = self.compiler_flags();
        let options = |extra: &[String]| flags.iter().chain(extra).cloned().collect::<Vec<String>>();
        let Some((&(source, name, extra), rest)) = jobs.split_first() else { return Vec::new() };
        std::thread::scope(|scope| {
            let others: Vec<_> = rest
                .iter()
                .map(|&(source, name, extra)| {
                    let opts = options(extra);
                    scope.spawn(move || nvrtc_compile(source, name, &opts))
                })
                .collect();
            let first = nvrtc_compile(source, name, &options(extra));
            std::iter::once(first)
                .chain(
                    others
                        .into_iter()
                        .map(|h| h.join().unwrap_or_else(|_| Err(anyhow!("the NVRTC compile thread panicked")))),
                )
                .collect()
        })
    }

    fn load_module(&self, image: &[u8]) -> Result<CudaModule> {
        // A CUBIN produced by compile() (or read back from the cache).
        self.ctx.load_module(Ptx::from_binary(image.to_vec())).context("cuModuleLoadData failed")
    }

    fn function(&self, module: &CudaModule, name: &str) -> Result<CudaFunction> {
        let f = module.load_function(name).map_err(|e| anyhow!("kernel {name} not found in module: {e}"))?;
        Ok(CudaFunction(f.cu_function()))
    }

    unsafe fn launch(
        &self,
        f: CudaFunction,
        grid: [u32; 3],
        block: [u32; 3],
        shared_bytes: u32,
        args: &mut [*mut c_void],
    ) -> Result<()> {
        // SAFETY: the caller matches args to the kernel's parameters.
        unsafe {
            cu::launch_kernel(
                f.0,
                (grid[0], grid[1], grid[2]),
                (block[0], block[1], block[2]),
                shared_bytes,
                if self.on_side.get() { self.side.cu_stream() } else { self.stream.cu_stream() },
                args,
            )
        }
        .map_err(|e| anyhow!("kernel launch failed (grid {grid:?}, block {block:?}): {e}"))
    }

    fn event(&self) -> Result<CudaEvent> {
        Ok(self.ctx.new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))?)
    }

    fn record(&self, event: &CudaEvent) -> Result<()> {
        if !self.capturing.get() {
            return Ok(event.record(&self.stream)?);
        }
        // In a capture a plain record only orders work; an external one becomes a node that
        // records the event (its time included) at every launch.
        let external = sys::CUevent_record_flags::CU_EVENT_RECORD_EXTERNAL as u32;
        self.bind()?;
        // SAFETY: a live event and stream of this context.
        unsafe { sys::cuEventRecordWithFlags(event.cu_event(), self.stream.cu_stream(), external) }
            .result()
            .context("cuEventRecordWithFlags in a graph capture failed")
    }

    fn elapsed_ms(&self, start: &CudaEvent, end: &CudaEvent) -> Result<f32> {
        Ok(start.elapsed_ms(end)?)
    }

    fn allow_dynamic_shared(&self, f: CudaFunction, bytes: u32) -> Result<()> {
        if bytes == 0 {
            return Ok(());
        }
        // SAFETY: f is a loaded function.
        unsafe {
            cu::function::set_function_attribute(
                f.0,
                sys::CUfunction_attribute_enum::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                bytes as i32,
            )
        }
        .map_err(|e| anyhow!("cannot allow {bytes} B of dynamic shared memory: {e}"))
    }

    fn resident_blocks(&self, f: CudaFunction, threads: u32, shared_bytes: u32) -> Option<u32> {
        // SAFETY: f is a loaded function.
        let n =
            unsafe { cu::occupancy::max_active_block_per_multiprocessor(f.0, threads as i32, shared_bytes as usize) };
        n.ok().filter(|&n| n > 0).map(|n| n as u32)
    }

    fn function_info(&self, f: CudaFunction) -> String {
        use sys::CUfunction_attribute_enum::*;
        // SAFETY: f is a loaded function.
        let get = |a| unsafe { cu::function::get_function_attribute(f.0, a) }.unwrap_or(-1);
        format!(
            "{} registers, {} B local (spills), {} B static shared",
            get(CU_FUNC_ATTRIBUTE_NUM_REGS),
            get(CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES),
            get(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)
        )
    }

    /// The side stream waits for the main one through `fork`, the main one for the side's
    /// launches through `join`: in a capture both records only order work, and the side stream
    /// is part of the capture from its wait on until the main stream's wait on `join`.
    fn alongside(&self, side: &mut dyn FnMut() -> Result<()>, main: &mut dyn FnMut() -> Result<()>) -> Result<()> {
        self.bind()?;
        self.fork.record(&self.stream).context("cuEventRecord failed")?;
        self.side.wait(&self.fork).context("cuStreamWaitEvent failed")?;
        self.on_side.set(true);
        let side_queued = side();
        self.on_side.set(false);
        // Joined back whatever happened, so that a capture can end.
        self.join.record(&self.side).context("cuEventRecord failed")?;
        let main_queued = side_queued.and_then(|()| main());
        self.stream.wait(&self.join).context("cuStreamWaitEvent failed")?;
        main_queued
    }

    fn synchronize(&self) -> Result<()> {
        self.not_capturing("a synchronisation")?;
        self.stream.synchronize().context("CUDA stream synchronisation failed (a kernel faulted?)")
    }

    fn captures(&self) -> bool {
        true
    }

    fn begin_capture(&self) -> Result<()> {
        // Relaxed: other solvers on this thread or others (a test binary's threads, a survey's
        // shots) may allocate, load modules and open streams meanwhile; this stream's own work
        // never needs a call that capture forbids (launch_capture comes before any).
        use sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED;
        self.stream.begin_capture(CU_STREAM_CAPTURE_MODE_RELAXED).context("cuStreamBeginCapture failed")?;
        self.capturing.set(true);
        Ok(())
    }

    fn launch_capture(&self, exec: &mut Option<CudaGraphExec>) -> Result<()> {
        self.bind()?;
        self.capturing.set(false);
        let stream = self.stream.cu_stream();
        // SAFETY: the stream is capturing (begin_capture); the graph it returns is destroyed
        // below once the executable graph holds its work.
        let graph = unsafe { cu::stream::end_capture(stream) }.context("cuStreamEndCapture failed")?;
        ensure!(!graph.is_null(), "the graph capture returned no graph");
        let result = (|| -> Result<()> {
            // The same kernels with new arguments (the next steps) update the graph in place,
            // far cheaper than instantiating it again; launches already queued keep theirs.
            let updated = exec.as_ref().is_some_and(|e| {
                let mut info = sys::CUgraphExecUpdateResultInfo {
                    result: sys::CUgraphExecUpdateResult::CU_GRAPH_EXEC_UPDATE_SUCCESS,
                    errorNode: std::ptr::null_mut(),
                    errorFromNode: std::ptr::null_mut(),
                };
                // SAFETY: both graphs are live.
                unsafe { sys::cuGraphExecUpdate_v2(e.0, graph, &mut info) }.result().is_ok()
            });
            if !updated {
                *exec = None;
                // SAFETY: a complete captured graph.
                let e = unsafe { cu::graph::instantiate(graph, sys::CUgraphInstantiate_flags(0)) }
                    .context("cuGraphInstantiate failed")?;
                *exec = Some(CudaGraphExec(e));
            }
            let e = exec.as_ref().map(|e| e.0).context("no executable graph")?;
            // SAFETY: a live executable graph and stream of this context.
            unsafe { cu::graph::launch(e, stream) }.context("cuGraphLaunch failed")?;
            Ok(())
        })();
        // SAFETY: captured above, no longer used (an executable graph copies what it needs).
        unsafe {
            let _ = cu::graph::destroy(graph);
        }
        result
    }
}
