//! Checked HIP runtime and hipRTC calls: each wraps one [`sys`] function, turns its status code into
//! `Result<_, HipError>` / `Result<_, HiprtcError>`, and returns outputs by value. Pointers and handles
//! stay raw here; [`super::safe`] owns and frees them.

use super::sys;
use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::fmt;
use std::ptr;

/// A failed HIP runtime call: which call, the status code, and HIP's own name and text for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HipError {
    pub call: &'static str,
    pub code: u32,
    pub name: String,
    pub message: String,
}

impl fmt::Display for HipError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} failed: {} ({}): {}", self.call, self.name, self.code, self.message)
    }
}

impl std::error::Error for HipError {}

/// A failed hipRTC call; for compilation failures `log` holds the compiler's messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HiprtcError {
    pub call: &'static str,
    pub code: u32,
    pub message: String,
    pub log: String,
}

impl fmt::Display for HiprtcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} failed: {} ({})", self.call, self.message, self.code)?;
        if !self.log.is_empty() {
            write!(f, "\n{}", self.log.trim_end())?;
        }
        Ok(())
    }
}

impl std::error::Error for HiprtcError {}

fn c_text(p: *const c_char) -> String {
    if p.is_null() {
        return String::from("(no text)");
    }
    // SAFETY: HIP returns pointers to static NUL-terminated strings for error names and texts.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// Turns a HIP status into `Ok(())` or a [`HipError`] naming `call`.
pub fn check(code: sys::hipError_t, call: &'static str) -> Result<(), HipError> {
    if code == sys::hipError_t::hipSuccess {
        return Ok(());
    }
    // SAFETY: both functions accept any status value and return static strings.
    let (name, message) = unsafe { (c_text(sys::hipGetErrorName(code)), c_text(sys::hipGetErrorString(code))) };
    Err(HipError { call, code: code.0, name, message })
}

/// Turns a hipRTC status into `Ok(())` or a [`HiprtcError`] naming `call` (without a log).
pub fn check_rtc(code: sys::hiprtcResult, call: &'static str) -> Result<(), HiprtcError> {
    if code == sys::hiprtcResult::HIPRTC_SUCCESS {
        return Ok(());
    }
    // SAFETY: hiprtcGetErrorString accepts any status value and returns a static string.
    let message = c_text(unsafe { sys::hiprtcGetErrorString(code) });
    Err(HiprtcError { call, code: code.0, message, log: String::new() })
}

/// The HIP runtime version, e.g. 50221153 for ROCm 5.2.
pub fn runtime_version() -> Result<i32, HipError> {
    let mut v: c_int = 0;
    // SAFETY: writes one int.
    check(unsafe { sys::hipRuntimeGetVersion(&mut v) }, "hipRuntimeGetVersion")?;
    Ok(v)
}

/// How many HIP devices this process sees (an error, not 0, when no driver is present).
pub fn device_count() -> Result<i32, HipError> {
    let mut n: c_int = 0;
    // SAFETY: writes one int.
    check(unsafe { sys::hipGetDeviceCount(&mut n) }, "hipGetDeviceCount")?;
    Ok(n)
}

/// Makes `device` current for this host thread.
pub fn set_device(device: i32) -> Result<(), HipError> {
    // SAFETY: plain value argument.
    check(unsafe { sys::hipSetDevice(device) }, "hipSetDevice")
}

/// The marketing name of `device`, e.g. "AMD Instinct MI250X".
pub fn device_name(device: i32) -> Result<String, HipError> {
    let mut buf = [0 as c_char; 256];
    // SAFETY: HIP writes at most `len` bytes including the terminating NUL.
    check(unsafe { sys::hipDeviceGetName(buf.as_mut_ptr(), buf.len() as c_int, device) }, "hipDeviceGetName")?;
    buf[buf.len() - 1] = 0;
    Ok(c_text(buf.as_ptr()))
}

#[cfg(not(hip_props_r0600))]
use sys::{hipDeviceProp_t as DeviceProps, hipGetDeviceProperties as get_device_properties};
#[cfg(hip_props_r0600)]
use sys::{hipDeviceProp_tR0600 as DeviceProps, hipGetDevicePropertiesR0600 as get_device_properties};

/// The device's full gcnArchName, e.g. "gfx90a:sramecc+:xnack-" (what hipRTC compiles for).
pub fn device_arch_name(device: i32) -> Result<String, HipError> {
    let mut props = DeviceProps::default();
    // SAFETY: fills one properties struct of the layout these headers declare.
    check(unsafe { get_device_properties(&mut props, device) }, "hipGetDeviceProperties")?;
    let raw = &mut props.gcnArchName;
    let last = raw.len() - 1;
    raw[last] = 0;
    Ok(c_text(raw.as_ptr()))
}

/// Total global memory of `device` in bytes.
pub fn device_total_mem(device: i32) -> Result<usize, HipError> {
    let mut bytes = 0usize;
    // SAFETY: writes one size_t.
    check(unsafe { sys::hipDeviceTotalMem(&mut bytes, device) }, "hipDeviceTotalMem")?;
    Ok(bytes)
}

/// One integer attribute of `device`.
pub fn device_attribute(device: i32, attribute: sys::hipDeviceAttribute_t) -> Result<i32, HipError> {
    let mut v: c_int = 0;
    // SAFETY: writes one int.
    check(unsafe { sys::hipDeviceGetAttribute(&mut v, attribute, device) }, "hipDeviceGetAttribute")?;
    Ok(v)
}

/// The number of compute units of `device`.
pub fn multiprocessor_count(device: i32) -> Result<i32, HipError> {
    device_attribute(device, sys::hipDeviceAttribute_t::hipDeviceAttributeMultiprocessorCount)
}

/// (free, total) global memory of the current device in bytes.
pub fn mem_get_info() -> Result<(usize, usize), HipError> {
    let (mut free, mut total) = (0usize, 0usize);
    // SAFETY: writes two size_t.
    check(unsafe { sys::hipMemGetInfo(&mut free, &mut total) }, "hipMemGetInfo")?;
    Ok((free, total))
}

/// Allocates `bytes` of device memory (uninitialised).
pub fn malloc(bytes: usize) -> Result<*mut c_void, HipError> {
    let mut p: *mut c_void = ptr::null_mut();
    // SAFETY: writes one pointer.
    check(unsafe { sys::hipMalloc(&mut p, bytes.max(1)) }, "hipMalloc")?;
    Ok(p)
}

/// Frees memory from [`malloc`].
///
/// # Safety
/// `p` came from [`malloc`], is freed once, and no queued work still uses it.
pub unsafe fn free(p: *mut c_void) -> Result<(), HipError> {
    // SAFETY: the caller's contract.
    check(unsafe { sys::hipFree(p) }, "hipFree")
}

/// Copies `bytes` from host `src` to device `dst` (blocking).
///
/// # Safety
/// `dst` holds at least `bytes` device bytes and `src` at least `bytes` host bytes.
pub unsafe fn memcpy_htod(dst: *mut c_void, src: *const c_void, bytes: usize) -> Result<(), HipError> {
    // SAFETY: the caller's contract; HIP does not write through `src` despite its `void*` type.
    check(unsafe { sys::hipMemcpyHtoD(dst, src as *mut c_void, bytes) }, "hipMemcpyHtoD")
}

/// Copies `bytes` from device `src` to host `dst` (blocking; waits for prior work on the null stream).
///
/// # Safety
/// `src` holds at least `bytes` device bytes and `dst` at least `bytes` writable host bytes.
pub unsafe fn memcpy_dtoh(dst: *mut c_void, src: *const c_void, bytes: usize) -> Result<(), HipError> {
    // SAFETY: the caller's contract.
    check(unsafe { sys::hipMemcpyDtoH(dst, src as *mut c_void, bytes) }, "hipMemcpyDtoH")
}

/// Asynchronous device-to-host copy on `stream`.
///
/// # Safety
/// As [`memcpy_dtoh`]; `dst` must stay valid until the stream reaches this copy.
pub unsafe fn memcpy_dtoh_async(
    dst: *mut c_void,
    src: *const c_void,
    bytes: usize,
    stream: sys::hipStream_t,
) -> Result<(), HipError> {
    // SAFETY: the caller's contract.
    check(unsafe { sys::hipMemcpyDtoHAsync(dst, src as *mut c_void, bytes, stream) }, "hipMemcpyDtoHAsync")
}

/// Asynchronous host-to-device copy on `stream`.
///
/// # Safety
/// As [`memcpy_htod`]; `src` must stay valid and unchanged until the stream reaches this copy.
pub unsafe fn memcpy_htod_async(
    dst: *mut c_void,
    src: *const c_void,
    bytes: usize,
    stream: sys::hipStream_t,
) -> Result<(), HipError> {
    // SAFETY: the caller's contract; HIP does not write through `src`.
    check(unsafe { sys::hipMemcpyHtoDAsync(dst, src as *mut c_void, bytes, stream) }, "hipMemcpyHtoDAsync")
}

/// Enqueues a fill of `bytes` bytes at `dst` with `value` on `stream`.
///
/// # Safety
/// `dst` holds at least `bytes` device bytes; `stream` is live.
pub unsafe fn memset_async(
    dst: *mut c_void,
    value: u8,
    bytes: usize,
    stream: sys::hipStream_t,
) -> Result<(), HipError> {
    // SAFETY: the caller's contract.
    check(unsafe { sys::hipMemsetAsync(dst, c_int::from(value), bytes, stream) }, "hipMemsetAsync")
}

/// Sets `bytes` bytes at `dst` to `value` (blocking).
///
/// # Safety
/// `dst` holds at least `bytes` device bytes.
pub unsafe fn memset(dst: *mut c_void, value: u8, bytes: usize) -> Result<(), HipError> {
    // SAFETY: the caller's contract.
    check(unsafe { sys::hipMemset(dst, c_int::from(value), bytes) }, "hipMemset")
}

/// Creates a stream that does not synchronise with the null stream.
pub fn stream_create() -> Result<sys::hipStream_t, HipError> {
    let mut s: sys::hipStream_t = ptr::null_mut();
    // SAFETY: writes one handle.
    check(unsafe { sys::hipStreamCreateWithFlags(&mut s, sys::hipStreamNonBlocking) }, "hipStreamCreateWithFlags")?;
    Ok(s)
}

/// Waits until all work queued on `stream` is done.
///
/// # Safety
/// `stream` is a live stream handle.
pub unsafe fn stream_synchronize(stream: sys::hipStream_t) -> Result<(), HipError> {
    // SAFETY: the caller's contract.
    check(unsafe { sys::hipStreamSynchronize(stream) }, "hipStreamSynchronize")
}

/// # Safety
/// `stream` is a live stream handle, destroyed once.
pub unsafe fn stream_destroy(stream: sys::hipStream_t) -> Result<(), HipError> {
    // SAFETY: the caller's contract.
    check(unsafe { sys::hipStreamDestroy(stream) }, "hipStreamDestroy")
}

/// Creates a timing event.
pub fn event_create() -> Result<sys::hipEvent_t, HipError> {
    let mut e: sys::hipEvent_t = ptr::null_mut();
    // SAFETY: writes one handle.
    check(unsafe { sys::hipEventCreateWithFlags(&mut e, sys::hipEventDefault) }, "hipEventCreateWithFlags")?;
    Ok(e)
}

/// # Safety
/// `event` and `stream` are live handles.
pub unsafe fn event_record(event: sys::hipEvent_t, stream: sys::hipStream_t) -> Result<(), HipError> {
    // SAFETY: the caller's contract.
    check(unsafe { sys::hipEventRecord(event, stream) }, "hipEventRecord")
}

/// # Safety
/// `event` is a live handle.
pub unsafe fn event_synchronize(event: sys::hipEvent_t) -> Result<(), HipError> {
    // SAFETY: the caller's contract.
    check(unsafe { sys::hipEventSynchronize(event) }, "hipEventSynchronize")
}

/// Milliseconds between two recorded, completed events.
///
/// # Safety
/// Both are live handles.
pub unsafe fn event_elapsed_ms(start: sys::hipEvent_t, stop: sys::hipEvent_t) -> Result<f32, HipError> {
    let mut ms = 0f32;
    // SAFETY: the caller's contract; writes one float.
    check(unsafe { sys::hipEventElapsedTime(&mut ms, start, stop) }, "hipEventElapsedTime")?;
    Ok(ms)
}

/// # Safety
/// `event` is a live handle, destroyed once.
pub unsafe fn event_destroy(event: sys::hipEvent_t) -> Result<(), HipError> {
    // SAFETY: the caller's contract.
    check(unsafe { sys::hipEventDestroy(event) }, "hipEventDestroy")
}

/// Loads a code object (as hipRTC or hipcc --genco produce) onto the current device.
pub fn module_load_data(image: &[u8]) -> Result<sys::hipModule_t, HipError> {
    let mut m: sys::hipModule_t = ptr::null_mut();
    // SAFETY: HIP reads the ELF image, whose size it takes from its headers; `image` outlives the call.
    check(unsafe { sys::hipModuleLoadData(&mut m, image.as_ptr().cast()) }, "hipModuleLoadData")?;
    Ok(m)
}

/// # Safety
/// `module` is a live handle; functions from it are not used afterwards.
pub unsafe fn module_unload(module: sys::hipModule_t) -> Result<(), HipError> {
    // SAFETY: the caller's contract.
    check(unsafe { sys::hipModuleUnload(module) }, "hipModuleUnload")
}

/// Looks up the `extern "C"` kernel `name` in `module`.
///
/// # Safety
/// `module` is a live handle.
pub unsafe fn module_get_function(module: sys::hipModule_t, name: &CStr) -> Result<sys::hipFunction_t, HipError> {
    let mut f: sys::hipFunction_t = ptr::null_mut();
    // SAFETY: the caller's contract; `name` is NUL-terminated.
    check(unsafe { sys::hipModuleGetFunction(&mut f, module, name.as_ptr()) }, "hipModuleGetFunction")?;
    Ok(f)
}

/// One attribute of a loaded kernel (registers, scratch bytes, static LDS bytes, ...).
///
/// # Safety
/// `f` is a function of a loaded module.
pub unsafe fn func_get_attribute(
    f: sys::hipFunction_t,
    attribute: sys::hipFunction_attribute,
) -> Result<i32, HipError> {
    let mut v: c_int = 0;
    // SAFETY: the caller's contract; writes one int.
    check(unsafe { sys::hipFuncGetAttribute(&mut v, attribute, f) }, "hipFuncGetAttribute")?;
    Ok(v)
}

/// Blocks of `threads` threads with `shared_bytes` of dynamic LDS that one compute unit runs at once.
///
/// # Safety
/// `f` is a function of a loaded module.
pub unsafe fn occupancy_blocks_per_cu(
    f: sys::hipFunction_t,
    threads: i32,
    shared_bytes: usize,
) -> Result<i32, HipError> {
    let mut v: c_int = 0;
    // SAFETY: the caller's contract; writes one int.
    check(
        unsafe { sys::hipModuleOccupancyMaxActiveBlocksPerMultiprocessor(&mut v, f, threads, shared_bytes) },
        "hipModuleOccupancyMaxActiveBlocksPerMultiprocessor",
    )?;
    Ok(v)
}

/// Queues kernel `f` on `stream`.
///
/// # Safety
/// `params` holds one pointer per kernel parameter, each to a value of that parameter's exact type,
/// all valid for the duration of this call; device pointers among them stay valid until the kernel ends.
pub unsafe fn module_launch_kernel(
    f: sys::hipFunction_t,
    grid: (u32, u32, u32),
    block: (u32, u32, u32),
    shared_bytes: u32,
    stream: sys::hipStream_t,
    params: &mut [*mut c_void],
) -> Result<(), HipError> {
    // SAFETY: the caller's contract.
    check(
        unsafe {
            sys::hipModuleLaunchKernel(
                f,
                grid.0,
                grid.1,
                grid.2,
                block.0,
                block.1,
                block.2,
                shared_bytes,
                stream,
                params.as_mut_ptr(),
                ptr::null_mut(),
            )
        },
        "hipModuleLaunchKernel",
    )
}

/// hipRTC's version as (major, minor).
pub fn rtc_version() -> Result<(i32, i32), HiprtcError> {
    let (mut major, mut minor): (c_int, c_int) = (0, 0);
    // SAFETY: writes two ints.
    check_rtc(unsafe { sys::hiprtcVersion(&mut major, &mut minor) }, "hiprtcVersion")?;
    Ok((major, minor))
}

/// Creates a hipRTC program from `source`; `headers` are (include name, contents) pairs that
/// `#include "name"` in the source resolves to without touching the file system.
pub fn rtc_create_program(
    source: &CStr,
    name: &CStr,
    headers: &[(CString, CString)],
) -> Result<sys::hiprtcProgram, HiprtcError> {
    let mut prog: sys::hiprtcProgram = ptr::null_mut();
    let mut contents: Vec<*const c_char> = headers.iter().map(|(_, c)| c.as_ptr()).collect();
    let mut names: Vec<*const c_char> = headers.iter().map(|(n, _)| n.as_ptr()).collect();
    let (contents_ptr, names_ptr) = if headers.is_empty() {
        (ptr::null_mut(), ptr::null_mut())
    } else {
        (contents.as_mut_ptr(), names.as_mut_ptr())
    };
    // SAFETY: all strings are NUL-terminated and outlive the call; hipRTC copies them.
    check_rtc(
        unsafe {
            sys::hiprtcCreateProgram(
                &mut prog,
                source.as_ptr(),
                name.as_ptr(),
                headers.len() as c_int,
                contents_ptr,
                names_ptr,
            )
        },
        "hiprtcCreateProgram",
    )?;
    Ok(prog)
}

/// Compiles `prog` with `options`; on failure the error carries the program log.
///
/// # Safety
/// `prog` is a live program handle.
pub unsafe fn rtc_compile_program(prog: sys::hiprtcProgram, options: &[CString]) -> Result<(), HiprtcError> {
    let mut opts: Vec<*const c_char> = options.iter().map(|o| o.as_ptr()).collect();
    // SAFETY: the caller's contract; options are NUL-terminated and outlive the call.
    let code = unsafe { sys::hiprtcCompileProgram(prog, opts.len() as c_int, opts.as_mut_ptr()) };
    check_rtc(code, "hiprtcCompileProgram").map_err(|mut e| {
        // SAFETY: as above.
        e.log = unsafe { rtc_program_log(prog) }.unwrap_or_default();
        e
    })
}

/// The compiler messages of the last compilation of `prog`.
///
/// # Safety
/// `prog` is a live program handle.
pub unsafe fn rtc_program_log(prog: sys::hiprtcProgram) -> Result<String, HiprtcError> {
    let mut size = 0usize;
    // SAFETY: the caller's contract; writes one size_t.
    check_rtc(unsafe { sys::hiprtcGetProgramLogSize(prog, &mut size) }, "hiprtcGetProgramLogSize")?;
    if size == 0 {
        return Ok(String::new());
    }
    let mut buf = vec![0u8; size];
    // SAFETY: `buf` holds the `size` bytes hipRTC reported.
    check_rtc(unsafe { sys::hiprtcGetProgramLog(prog, buf.as_mut_ptr().cast()) }, "hiprtcGetProgramLog")?;
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    Ok(String::from_utf8_lossy(&buf[..end]).into_owned())
}

/// The compiled code object of `prog` (an AMDGPU ELF that [`module_load_data`] accepts).
///
/// # Safety
/// `prog` is a live, successfully compiled program handle.
pub unsafe fn rtc_code(prog: sys::hiprtcProgram) -> Result<Vec<u8>, HiprtcError> {
    let mut size = 0usize;
    // SAFETY: the caller's contract; writes one size_t.
    check_rtc(unsafe { sys::hiprtcGetCodeSize(prog, &mut size) }, "hiprtcGetCodeSize")?;
    let mut code = vec![0u8; size];
    if size > 0 {
        // SAFETY: `code` holds the `size` bytes hipRTC reported.
        check_rtc(unsafe { sys::hiprtcGetCode(prog, code.as_mut_ptr().cast()) }, "hiprtcGetCode")?;
    }
    Ok(code)
}

/// # Safety
/// `prog` is a live program handle, destroyed once.
pub unsafe fn rtc_destroy_program(mut prog: sys::hiprtcProgram) -> Result<(), HiprtcError> {
    // SAFETY: the caller's contract.
    check_rtc(unsafe { sys::hiprtcDestroyProgram(&mut prog) }, "hiprtcDestroyProgram")
}
