//! HIP backend for AMD MI-series GPUs, layered like cudarc: [`sys`] (bindgen output), [`result`]
//! (checked calls returning `Result`), [`safe`] (owning types that free on drop), and here
//! [`HipRuntime`], the [`GpuRuntime`] that lets the vendor-neutral [`GpuSolver`](super::GpuSolver)
//! run the same kernels as on NVIDIA. Kernels are compiled at run time by hipRTC for the device's
//! full gcnArchName (target features included) and cached like the CUDA path; [`aot`] compiles
//! them ahead of time with hipcc for the static resource report.

pub mod aot;
pub mod result;
pub mod safe;
pub mod sys;

use super::{DevicePtr, GpuRuntime, Tuning};
use anyhow::{Context, Result};
use safe::{Device, DeviceBuffer, Event, Function, Module, Stream};
use std::ffi::c_void;

/// The hipRTC / hipcc flags for `arch` (a gcnArchName such as "gfx90a" or "gfx90a:sramecc+:xnack-"),
/// before the kernels' -D options. Like the CUDA path, a*b+c is not contracted into FMAs, so that
/// results stay those of the CPU reference.
pub fn compiler_flags(arch: &str) -> Vec<String> {
    vec![format!("--offload-arch={arch}"), "-O3".into(), "-std=c++17".into(), "-ffp-contract=off".into()]
}

/// hipRTC of HIP 5.2 (Debian 12) aborts the whole process inside hiprtcCompileProgram
/// ("munmap_chunk(): invalid pointer") for targets newer than it knows, such as gfx940 (MI300) or
/// gfx1100, although the hipcc of the same release compiles for gfx940. Refuse those with an error.
fn check_hiprtc_target(arch: &str) -> Result<()> {
    let version = result::runtime_version()?;
    let (major, minor) = (version / 10_000_000, version / 100_000 % 100);
    let base = arch.split(':').next().unwrap_or(arch);
    let too_new = ["gfx94", "gfx95", "gfx11", "gfx12"].iter().any(|p| base.starts_with(p));
    anyhow::ensure!(
        !((major, minor) <= (5, 2) && too_new),
        "hipRTC of HIP {major}.{minor} cannot compile for {base} (it aborts the process): use a ROCm release that supports {base}"
    );
    Ok(())
}

/// Compiles kernels with hipRTC for `arch` as the backend does: [`compiler_flags`], then `options`.
pub fn compile_for(arch: &str, source: &str, name: &str, options: &[String]) -> Result<Vec<u8>> {
    check_hiprtc_target(arch)?;
    let mut all = compiler_flags(arch);
    all.extend(options.iter().cloned());
    Ok(safe::compile(source, name, &all)?)
}

/// The launch shape on AMD: [`Tuning::for_radius`] (measured best on NVIDIA), except that the
/// shared-memory ring of asynchronous copies is off (a shape set by hand can turn it on,
/// [`TuningOverride`](crate::backend::tuning::TuningOverride)). On AMD the
/// kernels' `cp_async16` is a plain load and store through registers, so the ring only adds LDS:
/// at R = 4 it would take a workgroup from 17 KiB to 53 KiB of the CU's 64 KiB, one workgroup
/// (one wave per SIMD) per CU.
pub fn tuning(radius: usize) -> Tuning {
    Tuning::for_radius_without_ring(radius)
}

/// One AMD GPU and the single in-order stream all of a run's work goes to.
pub struct HipRuntime {
    device: Device,
    stream: Stream,
}

impl HipRuntime {
    /// Opens device `ordinal` (errors clearly when no HIP driver or device is present).
    pub fn new(ordinal: i32) -> Result<HipRuntime> {
        let device = Device::open(ordinal).context("cannot open a HIP device (is the ROCm driver loaded?)")?;
        let stream = Stream::new()?;
        Ok(HipRuntime { device, stream })
    }

    pub fn device(&self) -> &Device {
        &self.device
    }
}

fn ptr(p: DevicePtr) -> *mut c_void {
    p as usize as *mut c_void
}

impl GpuRuntime for HipRuntime {
    type Module = Module;
    type Function = Function;
    type Event = Event;
    type Graph = ();

    fn vendor(&self) -> &'static str {
        "hip"
    }

    fn device_name(&self) -> String {
        self.device.name.clone()
    }

    /// The full gcnArchName ("gfx90a:sramecc+:xnack-"): code objects are specific to the target
    /// features, so the kernel cache is keyed by all of it.
    fn arch(&self) -> String {
        self.device.arch_name.clone()
    }

    fn multiprocessors(&self) -> u32 {
        self.device.compute_units
    }

    fn ordinal(&self) -> usize {
        self.device.ordinal as usize
    }

    fn stream_handle(&self) -> *mut c_void {
        self.stream.raw() as *mut c_void
    }

    fn mem_info(&self) -> Result<(usize, usize)> {
        self.device.bind()?;
        Ok(result::mem_get_info()?)
    }

    fn alloc(&self, bytes: usize) -> Result<DevicePtr> {
        self.device.bind()?;
        let buffer = DeviceBuffer::alloc(bytes).with_context(|| format!("cannot allocate {bytes} bytes on the GPU"))?;
        Ok(buffer.into_raw() as usize as DevicePtr)
    }

    unsafe fn free(&self, p: DevicePtr) {
        // SAFETY: `p` came from `alloc` (DeviceBuffer::into_raw) and is freed once (the caller's
        // contract); dropping the buffer calls hipFree.
        drop(unsafe { DeviceBuffer::from_raw(ptr(p), 0) });
    }

    fn zero(&self, p: DevicePtr, bytes: usize) -> Result<()> {
        // SAFETY: `p` is an allocation of at least `bytes` bytes (the solver's contract).
        unsafe { result::memset_async(ptr(p), 0, bytes, self.stream.raw()) }?;
        Ok(())
    }

    fn upload(&self, dst: DevicePtr, src: &[u8]) -> Result<()> {
        // SAFETY: `dst` holds at least src.len() bytes; `src` outlives the copy (we wait for it).
        unsafe { result::memcpy_htod_async(ptr(dst), src.as_ptr().cast(), src.len(), self.stream.raw()) }?;
        self.stream.synchronize()?;
        Ok(())
    }

    fn download(&self, src: DevicePtr, dst: &mut [u8]) -> Result<()> {
        // SAFETY: `src` holds at least dst.len() bytes; `dst` outlives the copy (we wait for it).
        unsafe { result::memcpy_dtoh_async(dst.as_mut_ptr().cast(), ptr(src), dst.len(), self.stream.raw()) }?;
        self.stream.synchronize()?;
        Ok(())
    }

    fn compiler_flags(&self) -> Vec<String> {
        compiler_flags(&self.device.arch_name)
    }

    fn compile(&self, source: &str, name: &str, options: &[String]) -> Result<Vec<u8>> {
        compile_for(&self.device.arch_name, source, name, options)
    }

    fn load_module(&self, image: &[u8]) -> Result<Module> {
        self.device.bind()?;
        Ok(Module::load(image)?)
    }

    fn function(&self, module: &Module, name: &str) -> Result<Function> {
        Ok(module.function(name)?)
    }

    unsafe fn launch(
        &self,
        f: Function,
        grid: [u32; 3],
        block: [u32; 3],
        shared_bytes: u32,
        args: &mut [*mut c_void],
    ) -> Result<()> {
        // SAFETY: the caller's contract (arguments match the kernel's parameters).
        unsafe { f.launch(grid, block, shared_bytes, &self.stream, args) }?;
        Ok(())
    }

    fn event(&self) -> Result<Event> {
        Ok(Event::new()?)
    }

    fn record(&self, event: &Event) -> Result<()> {
        Ok(event.record(&self.stream)?)
    }

    fn elapsed_ms(&self, start: &Event, end: &Event) -> Result<f32> {
        Ok(start.elapsed_ms(end)?)
    }

    fn synchronize(&self) -> Result<()> {
        Ok(self.stream.synchronize()?)
    }

    /// AMD GPUs need no opt-in for dynamic LDS; this only checks that static plus dynamic LDS fit
    /// in a workgroup's share (64 KiB on MI200/MI300), so that a launch cannot fail later.
    fn allow_dynamic_shared(&self, f: Function, bytes: u32) -> Result<()> {
        let fixed = f.attribute(sys::hipFunction_attribute::HIP_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)?.max(0) as u32;
        let limit = self.device.max_shared_per_block;
        anyhow::ensure!(
            fixed + bytes <= limit,
            "the kernel needs {fixed} B static + {bytes} B dynamic LDS but {} allows {limit} B per workgroup \
             (lower stages or block_y in SEISMIC_TUNING)",
            self.device.name
        );
        Ok(())
    }

    fn resident_blocks(&self, f: Function, threads: u32, shared_bytes: u32) -> Option<u32> {
        f.resident_blocks(threads, shared_bytes).ok().filter(|&n| n > 0)
    }

    fn function_info(&self, f: Function) -> String {
        use sys::hipFunction_attribute as A;
        let get = |a| f.attribute(a).unwrap_or(-1);
        format!(
            "{} registers, {} B scratch (spills), {} B static LDS",
            get(A::HIP_FUNC_ATTRIBUTE_NUM_REGS),
            get(A::HIP_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES),
            get(A::HIP_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)
        )
    }
}
