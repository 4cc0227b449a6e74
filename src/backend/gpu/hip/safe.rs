//! Owning HIP types over [`super::result`]: each handle is released exactly once when its owner is
//! dropped (device memory with hipFree, modules with hipModuleUnload, events, streams, hipRTC
//! programs). Errors on release are ignored: there is no one to report them to in `Drop`.

use super::result::{self, HipError, HiprtcError};
use super::sys;
use std::ffi::{CString, c_void};

/// One HIP device, made current for this thread by [`Device::open`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Device {
    pub ordinal: i32,
    /// Marketing name, e.g. "AMD Instinct MI250X".
    pub name: String,
    /// Full gcnArchName with target features, e.g. "gfx90a:sramecc+:xnack-".
    pub arch_name: String,
    pub compute_units: u32,
    /// Shared memory (LDS) a workgroup may use, static plus dynamic, in bytes.
    pub max_shared_per_block: u32,
}

impl Device {
    /// Opens device `ordinal` (errors clearly when there is no HIP driver or no such device).
    pub fn open(ordinal: i32) -> Result<Device, HipError> {
        let count = result::device_count()?;
        if ordinal < 0 || ordinal >= count {
            return Err(HipError {
                call: "hipGetDeviceCount",
                code: 101,
                name: "hipErrorInvalidDevice".into(),
                message: format!("device {ordinal} requested, {count} HIP device(s) present"),
            });
        }
        result::set_device(ordinal)?;
        Ok(Device {
            ordinal,
            name: result::device_name(ordinal)?,
            arch_name: result::device_arch_name(ordinal)?,
            compute_units: result::multiprocessor_count(ordinal)?.max(1) as u32,
            max_shared_per_block: result::device_attribute(
                ordinal,
                sys::hipDeviceAttribute_t::hipDeviceAttributeMaxSharedMemoryPerBlock,
            )?
            .max(0) as u32,
        })
    }

    /// The architecture without target features ("gfx90a"), as a short label.
    pub fn arch(&self) -> &str {
        self.arch_name.split(':').next().unwrap_or(&self.arch_name)
    }

    /// Makes this device current for the calling thread.
    pub fn bind(&self) -> Result<(), HipError> {
        result::set_device(self.ordinal)
    }
}

/// Device memory, freed with hipFree on drop.
#[derive(Debug)]
pub struct DeviceBuffer {
    ptr: *mut c_void,
    bytes: usize,
}

impl DeviceBuffer {
    /// Allocates `bytes` of uninitialised device memory on the current device.
    pub fn alloc(bytes: usize) -> Result<DeviceBuffer, HipError> {
        Ok(DeviceBuffer { ptr: result::malloc(bytes)?, bytes })
    }

    pub fn as_ptr(&self) -> *mut c_void {
        self.ptr
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Gives up ownership: the caller frees the memory (with [`DeviceBuffer::from_raw`]).
    pub fn into_raw(self) -> *mut c_void {
        let p = self.ptr;
        std::mem::forget(self);
        p
    }

    /// Takes back ownership of memory from [`DeviceBuffer::into_raw`].
    ///
    /// # Safety
    /// `ptr` came from `into_raw` of a buffer of `bytes` bytes and is owned by nobody else.
    pub unsafe fn from_raw(ptr: *mut c_void, bytes: usize) -> DeviceBuffer {
        DeviceBuffer { ptr, bytes }
    }

    /// Copies `src` into the start of the buffer (blocking).
    pub fn copy_from_host(&mut self, src: &[u8]) -> Result<(), HipError> {
        assert!(src.len() <= self.bytes, "host slice larger than the device buffer");
        // SAFETY: the buffer holds at least src.len() bytes.
        unsafe { result::memcpy_htod(self.ptr, src.as_ptr().cast(), src.len()) }
    }

    /// Copies the start of the buffer into `dst` (blocking).
    pub fn copy_to_host(&self, dst: &mut [u8]) -> Result<(), HipError> {
        assert!(dst.len() <= self.bytes, "host slice larger than the device buffer");
        // SAFETY: the buffer holds at least dst.len() bytes.
        unsafe { result::memcpy_dtoh(dst.as_mut_ptr().cast(), self.ptr, dst.len()) }
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        // SAFETY: owned, freed once.
        let _ = unsafe { result::free(self.ptr) };
    }
}

/// An in-order stream that does not synchronise with the null stream; destroyed on drop.
#[derive(Debug)]
pub struct Stream(sys::hipStream_t);

impl Stream {
    pub fn new() -> Result<Stream, HipError> {
        Ok(Stream(result::stream_create()?))
    }

    pub fn raw(&self) -> sys::hipStream_t {
        self.0
    }

    pub fn synchronize(&self) -> Result<(), HipError> {
        // SAFETY: live handle.
        unsafe { result::stream_synchronize(self.0) }
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        // SAFETY: owned, destroyed once; waits for queued work first so nothing runs on a dead stream.
        unsafe {
            let _ = result::stream_synchronize(self.0);
            let _ = result::stream_destroy(self.0);
        }
    }
}

/// A timing event; destroyed on drop.
#[derive(Debug)]
pub struct Event(sys::hipEvent_t);

impl Event {
    pub fn new() -> Result<Event, HipError> {
        Ok(Event(result::event_create()?))
    }

    pub fn record(&self, stream: &Stream) -> Result<(), HipError> {
        // SAFETY: both handles are live.
        unsafe { result::event_record(self.0, stream.raw()) }
    }

    pub fn synchronize(&self) -> Result<(), HipError> {
        // SAFETY: live handle.
        unsafe { result::event_synchronize(self.0) }
    }

    /// Milliseconds from `self` to `later` (both recorded and completed).
    pub fn elapsed_ms(&self, later: &Event) -> Result<f32, HipError> {
        // SAFETY: both handles are live.
        unsafe { result::event_elapsed_ms(self.0, later.0) }
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: owned, destroyed once.
        let _ = unsafe { result::event_destroy(self.0) };
    }
}

/// A loaded code object; unloaded on drop (its [`Function`]s must not be launched afterwards).
#[derive(Debug)]
pub struct Module(sys::hipModule_t);

impl Module {
    /// Loads a code object (from hipRTC or hipcc --genco) onto the current device.
    pub fn load(image: &[u8]) -> Result<Module, HipError> {
        Ok(Module(result::module_load_data(image)?))
    }

    /// The `extern "C"` kernel `name`.
    pub fn function(&self, name: &str) -> Result<Function, HipError> {
        let cname = CString::new(name).map_err(|_| HipError {
            call: "hipModuleGetFunction",
            code: 1,
            name: "hipErrorInvalidValue".into(),
            message: format!("kernel name {name:?} contains a NUL byte"),
        })?;
        // SAFETY: live module handle.
        Ok(Function(unsafe { result::module_get_function(self.0, &cname) }?))
    }
}

impl Drop for Module {
    fn drop(&mut self) {
        // SAFETY: owned, unloaded once.
        let _ = unsafe { result::module_unload(self.0) };
    }
}

/// A kernel inside a [`Module`]; a plain handle, valid while its module is loaded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Function(sys::hipFunction_t);

impl Function {
    /// Queues this kernel on `stream`.
    ///
    /// # Safety
    /// The module is still loaded, and `params` match the kernel's parameters (see
    /// [`result::module_launch_kernel`]).
    pub unsafe fn launch(
        &self,
        grid: [u32; 3],
        block: [u32; 3],
        shared_bytes: u32,
        stream: &Stream,
        params: &mut [*mut c_void],
    ) -> Result<(), HipError> {
        // SAFETY: the caller's contract.
        unsafe {
            result::module_launch_kernel(
                self.0,
                (grid[0], grid[1], grid[2]),
                (block[0], block[1], block[2]),
                shared_bytes,
                stream.raw(),
                params,
            )
        }
    }
}

impl Function {
    /// One attribute of this kernel as the runtime reports it.
    pub fn attribute(&self, attribute: sys::hipFunction_attribute) -> Result<i32, HipError> {
        // SAFETY: a function handle from a loaded module.
        unsafe { result::func_get_attribute(self.0, attribute) }
    }

    /// Blocks of `threads` threads with `shared_bytes` of dynamic LDS one compute unit runs at once.
    pub fn resident_blocks(&self, threads: u32, shared_bytes: u32) -> Result<u32, HipError> {
        // SAFETY: a function handle from a loaded module.
        unsafe { result::occupancy_blocks_per_cu(self.0, threads as i32, shared_bytes as usize) }
            .map(|n| n.max(0) as u32)
    }
}

/// A hipRTC program; destroyed on drop.
#[derive(Debug)]
pub struct Program(sys::hiprtcProgram);

/// hipRTC calls, one at a time in the process: Debian's hipRTC 5.2 crashes (SIGSEGV) in about one
/// run in four of tests/hip_rtc.rs when test threads compile at once.
fn rtc_lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Program {
    /// `headers`: (include name, contents) pairs the source may `#include "name"`.
    pub fn new(source: &str, name: &str, headers: &[(&str, &str)]) -> Result<Program, HiprtcError> {
        let bad = |what: &str| HiprtcError {
            call: "hiprtcCreateProgram",
            code: 3,
            message: format!("{what} contains a NUL byte"),
            log: String::new(),
        };
        let src = CString::new(source).map_err(|_| bad("kernel source"))?;
        let cname = CString::new(name).map_err(|_| bad("program name"))?;
        let hdrs = headers
            .iter()
            .map(|(n, c)| Ok((CString::new(*n).map_err(|_| bad(n))?, CString::new(*c).map_err(|_| bad(n))?)))
            .collect::<Result<Vec<_>, HiprtcError>>()?;
        let _one = rtc_lock();
        Ok(Program(result::rtc_create_program(&src, &cname, &hdrs)?))
    }

    /// Compiles with `options`; the error carries the compiler log.
    pub fn compile(&self, options: &[String]) -> Result<(), HiprtcError> {
        let opts = options
            .iter()
            .map(|o| {
                CString::new(o.as_str()).map_err(|_| HiprtcError {
                    call: "hiprtcCompileProgram",
                    code: 3,
                    message: format!("option {o:?} contains a NUL byte"),
                    log: String::new(),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let _one = rtc_lock();
        // SAFETY: live program handle.
        unsafe { result::rtc_compile_program(self.0, &opts) }
    }

    /// The compiler messages of the last compilation.
    pub fn log(&self) -> Result<String, HiprtcError> {
        let _one = rtc_lock();
        // SAFETY: live program handle.
        unsafe { result::rtc_program_log(self.0) }
    }

    /// The compiled code object (call after a successful [`Program::compile`]).
    pub fn code(&self) -> Result<Vec<u8>, HiprtcError> {
        let _one = rtc_lock();
        // SAFETY: live program handle.
        unsafe { result::rtc_code(self.0) }
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        let _one = rtc_lock();
        // SAFETY: owned, destroyed once.
        let _ = unsafe { result::rtc_destroy_program(self.0) };
    }
}

/// Compiles one HIP source with hipRTC; `options` are all of them, target included (see
/// [`super::compiler_flags`]). Needs no GPU. Errors carry the compiler log; an empty code object is
/// an error too.
pub fn compile(source: &str, name: &str, options: &[String]) -> Result<Vec<u8>, HiprtcError> {
    let program = Program::new(source, name, &[])?;
    program.compile(options).map_err(|mut e| {
        e.message = format!("{} (options: {})", e.message, options.join(" "));
        e
    })?;
    let code = program.code()?;
    if code.is_empty() {
        return Err(HiprtcError {
            call: "hiprtcGetCode",
            code: 0,
            message: format!("hipRTC returned an empty code object for {name} ({})", options.join(" ")),
            log: program.log().unwrap_or_default(),
        });
    }
    Ok(code)
}
