//! A test-only [`GpuRuntime`] that runs nothing and records everything the solver asks of the
//! device, in order: allocations, fills, copies, compilations (their options), function look-ups,
//! shared-memory grants, launches (kernel, grid, block, shared bytes and every parameter's value),
//! events, graph captures and the two-stream launches. Its attributes are an H200's (132
//! multiprocessors, sm_90) or, as `hip`, an MI250X's; occupancy is a fixed rule of threads and
//! shared bytes. The launch-trace test compares these records with fixtures, so a change that
//! moves a launch, a parameter or a compile option of any covered path fails it.

use super::runtime::{DevicePtr, GpuRuntime};
use anyhow::Result;
use sha2::{Digest, Sha256};
use std::cell::{Cell, RefCell};
use std::ffi::c_void;

thread_local! {
    /// The parameter values of the launch being enqueued (set by `kernel_params!`'s `launch`).
    static PARAMS: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Notes the parameter values of the launch about to be enqueued (called by every kernel's
/// `launch` under test).
pub(crate) fn note_params(values: String) {
    PARAMS.with(|p| *p.borrow_mut() = Some(values));
}

fn digest(bytes: &[u8]) -> String {
    super::sources::hex(&Sha256::digest(bytes)[..8])
}

/// Which vendor the fake plays.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Vendor {
    Cuda,
    Hip,
}

/// The recording runtime.
pub struct FakeRuntime {
    vendor: Vendor,
    log: RefCell<Vec<String>>,
    next_ptr: Cell<u64>,
    /// Each module's compile options (the fake's "image" is its options).
    modules: RefCell<Vec<String>>,
    functions: RefCell<Vec<String>>,
    events: Cell<u32>,
}

impl FakeRuntime {
    pub fn new(vendor: Vendor) -> Self {
        FakeRuntime {
            vendor,
            log: RefCell::new(Vec::new()),
            next_ptr: Cell::new(0x1_0000_0000),
            modules: RefCell::new(Vec::new()),
            functions: RefCell::new(Vec::new()),
            events: Cell::new(0),
        }
    }

    fn note(&self, line: String) {
        self.log.borrow_mut().push(line);
    }

    /// The records so far, one a line, and clears them.
    pub fn take_log(&self) -> Vec<String> {
        std::mem::take(&mut *self.log.borrow_mut())
    }
}

impl GpuRuntime for FakeRuntime {
    type Module = u32;
    type Function = usize;
    type Event = u32;
    type Graph = u32;

    fn vendor(&self) -> &'static str {
        match self.vendor {
            Vendor::Cuda => "cuda",
            Vendor::Hip => "hip",
        }
    }
    fn device_name(&self) -> String {
        "fake device".into()
    }
    fn arch(&self) -> String {
        match self.vendor {
            Vendor::Cuda => "sm_90".into(),
            Vendor::Hip => "gfx90a".into(),
        }
    }
    fn multiprocessors(&self) -> u32 {
        match self.vendor {
            Vendor::Cuda => 132,
            Vendor::Hip => 110,
        }
    }
    fn ordinal(&self) -> usize {
        0
    }
    fn stream_handle(&self) -> *mut c_void {
        std::ptr::null_mut()
    }
    fn mem_info(&self) -> Result<(usize, usize)> {
        Ok((140 << 30, 141 << 30))
    }
    fn alloc(&self, bytes: usize) -> Result<DevicePtr> {
        let p = self.next_ptr.get();
        self.next_ptr.set(p + (bytes as u64).div_ceil(256).max(1) * 256);
        self.note(format!("alloc {bytes} -> {p:#x}"));
        Ok(p)
    }
    unsafe fn free(&self, _ptr: DevicePtr) {}
    fn zero(&self, ptr: DevicePtr, bytes: usize) -> Result<()> {
        self.note(format!("zero {ptr:#x} {bytes}"));
        Ok(())
    }
    fn upload(&self, dst: DevicePtr, src: &[u8]) -> Result<()> {
        self.note(format!("upload {dst:#x} {} {}", src.len(), digest(src)));
        Ok(())
    }
    fn download(&self, src: DevicePtr, dst: &mut [u8]) -> Result<()> {
        dst.fill(0);
        self.note(format!("download {src:#x} {}", dst.len()));
        Ok(())
    }
    fn compiler_flags(&self) -> Vec<String> {
        // Keeps the fake's "images" apart from real ones in the kernel cache.
        vec!["--fake-runtime".into()]
    }
    fn compile(&self, _source: &str, _name: &str, options: &[String]) -> Result<Vec<u8>> {
        Ok(options.join(" ").into_bytes())
    }
    /// Compiled or read from the kernel cache alike, a module is recorded with its options.
    fn load_module(&self, image: &[u8]) -> Result<u32> {
        let options = String::from_utf8_lossy(image).into_owned();
        let mut modules = self.modules.borrow_mut();
        self.note(format!("module m{} {options}", modules.len()));
        modules.push(options);
        Ok(modules.len() as u32 - 1)
    }
    /// Fails, as a real module would, for the kernels its options leave out.
    fn function(&self, module: &u32, name: &str) -> Result<usize> {
        let options = self.modules.borrow()[*module as usize].clone();
        let needs = if name.ends_with("_half") {
            Some("-DHALF=1")
        } else if name == "fused_step_ylayers" || name == "fused_step_zlayers" {
            Some("-DYLAYERS=1")
        } else {
            None
        };
        if let Some(flag) = needs {
            anyhow::ensure!(options.split(' ').any(|o| o == flag), "no {name} in a module without {flag}");
        }
        let mut f = self.functions.borrow_mut();
        f.push(format!("m{module}.{name}"));
        Ok(f.len() - 1)
    }
    unsafe fn launch(
        &self,
        f: usize,
        grid: [u32; 3],
        block: [u32; 3],
        shared_bytes: u32,
        args: &mut [*mut c_void],
    ) -> Result<()> {
        let params = PARAMS.with(|p| p.borrow_mut().take()).unwrap_or_else(|| "?".into());
        let name = self.functions.borrow()[f].clone();
        self.note(format!(
            "launch {name} grid {grid:?} block {block:?} shared {shared_bytes} args {} params {}",
            args.len(),
            digest(params.as_bytes())
        ));
        Ok(())
    }
    fn event(&self) -> Result<u32> {
        let e = self.events.get();
        self.events.set(e + 1);
        Ok(e)
    }
    fn record(&self, event: &u32) -> Result<()> {
        self.note(format!("record e{event}"));
        Ok(())
    }
    fn elapsed_ms(&self, _start: &u32, _end: &u32) -> Result<f32> {
        Ok(1.0)
    }
    fn synchronize(&self) -> Result<()> {
        self.note("synchronize".into());
        Ok(())
    }
    fn alongside(&self, side: &mut dyn FnMut() -> Result<()>, main: &mut dyn FnMut() -> Result<()>) -> Result<()> {
        self.note("alongside: side".into());
        side()?;
        self.note("alongside: main".into());
        main()?;
        self.note("alongside: joined".into());
        Ok(())
    }
    fn captures(&self) -> bool {
        self.vendor == Vendor::Cuda
    }
    fn begin_capture(&self) -> Result<()> {
        self.note("capture begins".into());
        Ok(())
    }
    fn launch_capture(&self, exec: &mut Option<u32>) -> Result<()> {
        let how = if exec.is_some() { "updated" } else { "new" };
        *exec = Some(0);
        self.note(format!("capture launched ({how} graph)"));
        Ok(())
    }
    fn allow_dynamic_shared(&self, f: usize, bytes: u32) -> Result<()> {
        let name = self.functions.borrow()[f].clone();
        self.note(format!("dynamic shared {name} {bytes}"));
        Ok(())
    }
    fn resident_blocks(&self, _f: usize, threads: u32, shared_bytes: u32) -> Option<u32> {
        // 2048 threads and 228 KB of shared memory a multiprocessor (1 KB reserved a block).
        Some((2048 / threads.max(1)).min(233_472 / (shared_bytes + 1024)).min(32)).filter(|&n| n > 0)
    }
}
