//! What a GPU vendor's runtime provides ([`GpuRuntime`]): memory, run-time compilation, launches
//! and events on one in-order stream, byte-oriented so that CUDA and HIP implement it the same way,
//! and [`DeviceBuffer`], device memory that frees itself.

use anyhow::Result;
use std::ffi::c_void;
use std::marker::PhantomData;
use std::rc::Rc;

/// A device address.
pub type DevicePtr = u64;

/// A device address of elements of type `T` (`f32`, [`half::f16`], `u64`, ...): what a kernel's
/// `T*` parameter receives. It is passed as the 64-bit address itself, and its `Debug` is the
/// address's, so a launch's bytes and record are those of the untyped [`DevicePtr`].
#[repr(transparent)]
pub struct TypedPtr<T>(DevicePtr, PhantomData<fn() -> T>);

impl<T> TypedPtr<T> {
    /// The address `addr`, holding elements of type `T`.
    pub fn new(addr: DevicePtr) -> Self {
        TypedPtr(addr, PhantomData)
    }

    /// The untyped address.
    pub fn addr(self) -> DevicePtr {
        self.0
    }
}

// A kernel reads a typed pointer parameter as the 8-byte address it is.
const _: () = assert!(size_of::<TypedPtr<half::f16>>() == 8 && align_of::<TypedPtr<f32>>() == align_of::<DevicePtr>());

impl<T> Clone for TypedPtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for TypedPtr<T> {}

impl<T> std::fmt::Debug for TypedPtr<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&self.0, f)
    }
}

/// What a GPU vendor's runtime provides to [`GpuSolver`](super::GpuSolver). All work goes to one
/// in-order stream.
pub trait GpuRuntime {
    type Module;
    type Function: Copy;
    type Event;
    /// An executable graph of captured work (`()` where the runtime captures none).
    type Graph;

    /// "cuda" or "hip".
    fn vendor(&self) -> &'static str;
    fn device_name(&self) -> String;
    /// Compilation target, e.g. "sm_90" or "gfx90a".
    fn arch(&self) -> String;
    fn multiprocessors(&self) -> u32;
    /// The device's ordinal among the vendor's devices.
    fn ordinal(&self) -> usize;
    /// The vendor's handle of the stream all work is ordered on (`CUstream`, `hipStream_t`), for a
    /// library that enqueues its own work after the solver's (NCCL's halo exchange).
    fn stream_handle(&self) -> *mut c_void;
    /// (free, total) device memory in bytes.
    fn mem_info(&self) -> Result<(usize, usize)>;
    fn alloc(&self, bytes: usize) -> Result<DevicePtr>;
    /// # Safety
    /// `ptr` comes from `alloc` and is freed once; no queued work still uses it after this call.
    unsafe fn free(&self, ptr: DevicePtr);
    /// Enqueues a zero fill of `bytes` bytes.
    fn zero(&self, ptr: DevicePtr, bytes: usize) -> Result<()>;
    /// Copies host bytes to the device after the stream's queued work (returns when done).
    fn upload(&self, dst: DevicePtr, src: &[u8]) -> Result<()>;
    /// Copies device bytes to the host after the stream's queued work (returns when done).
    fn download(&self, src: DevicePtr, dst: &mut [u8]) -> Result<()>;
    /// Compiler flags the runtime adds itself (part of the kernel cache key).
    fn compiler_flags(&self) -> Vec<String> {
        Vec::new()
    }
    /// Compiles one source into a loadable binary image for this device.
    fn compile(&self, source: &str, name: &str, options: &[String]) -> Result<Vec<u8>>;
    /// [`compile`](Self::compile) of each (source, name, options) job, in the jobs' order; a
    /// runtime whose compiler is thread-safe compiles them at once.
    fn compile_all(&self, jobs: &[(&str, &str, &[String])]) -> Vec<Result<Vec<u8>>> {
        jobs.iter().map(|&(source, name, options)| self.compile(source, name, options)).collect()
    }
    fn load_module(&self, image: &[u8]) -> Result<Self::Module>;
    fn function(&self, module: &Self::Module, name: &str) -> Result<Self::Function>;
    /// Enqueues a kernel; `args[i]` points at the value of the kernel's i-th parameter.
    ///
    /// # Safety
    /// The arguments must match the kernel's parameter list in number, order and type.
    unsafe fn launch(
        &self,
        f: Self::Function,
        grid: [u32; 3],
        block: [u32; 3],
        shared_bytes: u32,
        args: &mut [*mut c_void],
    ) -> Result<()>;
    fn event(&self) -> Result<Self::Event>;
    fn record(&self, event: &Self::Event) -> Result<()>;
    /// Milliseconds between two recorded events (both must have completed).
    fn elapsed_ms(&self, start: &Self::Event, end: &Self::Event) -> Result<f32>;
    fn synchronize(&self) -> Result<()>;
    /// Enqueues `side`'s launches on a second stream and then `main`'s on the main one: both
    /// after the work queued so far, and the work queued after this after both, so that one
    /// kernel's last blocks leave their multiprocessors to the other's. The caller guarantees the
    /// two write disjoint memory and neither reads what the other writes. The default runs them
    /// in turn on the one stream.
    fn alongside(&self, side: &mut dyn FnMut() -> Result<()>, main: &mut dyn FnMut() -> Result<()>) -> Result<()> {
        side()?;
        main()
    }
    /// Whether the stream's work can be captured into graphs ([`begin_capture`](Self::begin_capture)).
    fn captures(&self) -> bool {
        false
    }
    /// From now on the stream's work (launches, zero fills, event records) is captured, not run,
    /// until [`launch_capture`](Self::launch_capture); uploads and downloads are not allowed then.
    fn begin_capture(&self) -> Result<()> {
        anyhow::bail!("the {} runtime captures no graphs", self.vendor())
    }
    /// Ends the capture and enqueues what it captured as one graph launch, through `exec`: updated
    /// in place where the work has the same shape as its last, made anew otherwise. On an error
    /// the capture is over and nothing was enqueued.
    fn launch_capture(&self, exec: &mut Option<Self::Graph>) -> Result<()> {
        let _ = exec;
        anyhow::bail!("the {} runtime captures no graphs", self.vendor())
    }
    /// Lets a kernel use `bytes` of dynamic shared memory (beyond the default 48 KB where needed).
    fn allow_dynamic_shared(&self, f: Self::Function, bytes: u32) -> Result<()> {
        let _ = (f, bytes);
        Ok(())
    }
    /// Blocks of `threads` threads and `shared_bytes` of dynamic shared memory that fit on one
    /// multiprocessor at once (None when the runtime cannot tell).
    fn resident_blocks(&self, f: Self::Function, threads: u32, shared_bytes: u32) -> Option<u32> {
        let _ = (f, threads, shared_bytes);
        None
    }
    /// Compiler resources of a kernel (registers, spills, shared memory), for reports.
    fn function_info(&self, f: Self::Function) -> String {
        let _ = f;
        String::new()
    }
}

/// Device memory owned by its holder and freed on drop. Whoever drops buffers that queued work may
/// still use must drain the stream first ([`GpuSolver`](super::GpuSolver)'s `Drop` does).
pub struct DeviceBuffer<Rt: GpuRuntime> {
    ptr: DevicePtr,
    bytes: usize,
    rt: Rc<Rt>,
}

impl<Rt: GpuRuntime> DeviceBuffer<Rt> {
    /// `bytes` of device memory, zero-filled (the fill is queued on the stream).
    pub fn zeroed(rt: &Rc<Rt>, bytes: usize) -> Result<Self> {
        let b = DeviceBuffer { ptr: rt.alloc(bytes)?, bytes, rt: rt.clone() };
        rt.zero(b.ptr, bytes)?;
        Ok(b)
    }

    /// Device memory holding a copy of `data`.
    pub fn from_slice<T: Copy>(rt: &Rc<Rt>, data: &[T]) -> Result<Self> {
        let bytes = as_bytes(data);
        let b = DeviceBuffer { ptr: rt.alloc(bytes.len())?, bytes: bytes.len(), rt: rt.clone() };
        rt.upload(b.ptr, bytes)?;
        Ok(b)
    }

    /// The device address of the first byte.
    pub fn ptr(&self) -> DevicePtr {
        self.ptr
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Copies `data` to the start of the buffer after the queued work.
    pub fn upload<T: Copy>(&self, data: &[T]) -> Result<()> {
        let bytes = as_bytes(data);
        anyhow::ensure!(bytes.len() <= self.bytes, "upload of {} bytes into a buffer of {}", bytes.len(), self.bytes);
        self.rt.upload(self.ptr, bytes)
    }

    /// Copies `data` into the buffer from its element `at` (of `T`s) on, after the queued work.
    pub fn upload_at<T: Copy>(&self, at: usize, data: &[T]) -> Result<()> {
        let bytes = as_bytes(data);
        let offset = at * std::mem::size_of::<T>();
        anyhow::ensure!(
            offset + bytes.len() <= self.bytes,
            "upload of {} bytes at byte {offset} into a buffer of {}",
            bytes.len(),
            self.bytes
        );
        self.rt.upload(self.ptr + offset as u64, bytes)
    }

    /// Queues a zero fill of the whole buffer.
    pub fn zero(&self) -> Result<()> {
        self.rt.zero(self.ptr, self.bytes)
    }
}

impl<Rt: GpuRuntime> Drop for DeviceBuffer<Rt> {
    fn drop(&mut self) {
        // SAFETY: allocated by this buffer and freed once; see the type's docs for queued work.
        unsafe { self.rt.free(self.ptr) };
    }
}

pub fn as_bytes<T: Copy>(v: &[T]) -> &[u8] {
    // SAFETY: plain-old-data slices (f32, u32, u64) viewed as bytes.
    unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v)) }
}

pub fn as_bytes_mut<T: Copy>(v: &mut [T]) -> &mut [u8] {
    // SAFETY: as as_bytes; every bit pattern is a valid f32.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr() as *mut u8, std::mem::size_of_val(v)) }
}
