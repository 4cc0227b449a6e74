//! Host memory and disk a run needs, checked before anything large is allocated or written:
//! each check names the input key or the grid at fault and the figures. `host` has the host
//! memory's checks (what building a problem needs); this module the result file's size and the
//! disk space for it.

mod host;

pub use host::{
    available_host_memory, base_host_bytes, check_host_bytes, check_host_memory, check_run_grid_host_bytes,
    check_run_host_bytes, run_host_items, snapshot_values,
};

use crate::output::plan::OutputPlan;
use crate::problem::Problem;
use anyhow::{Result, ensure};
use host::GIB;

/// Bytes the result file will hold: the velocity, snapshots, traces and positions, statistics,
/// plus the input text and headers.
pub fn output_file_bytes(problem: &Problem, plan: &OutputPlan, input_len: usize) -> f64 {
    // The file covers the model, without absorbing layers outside it.
    let model = plan.region(problem).shape;
    let points = model.iter().map(|&n| n as f64).product::<f64>();
    let snapshots = plan.snapshot_steps.len() as f64 * plan.snapshot_len(model) as f64 * 4.0
        + plan.snapshot_steps.len() as f64 * 16.0;
    let receivers = problem.receivers.len() as f64;
    let traces = receivers * problem.steps as f64 * 4.0 + receivers * 24.0;
    let stats = problem.steps as f64 * 32.0;
    4.0 * points + snapshots + traces + stats + input_len as f64 + 64.0 * 1024.0
}

/// Free bytes for an unprivileged user on the file system holding `dir` (statvfs); None where
/// it cannot be told.
pub fn free_disk_bytes(dir: &std::path::Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `c` is a valid NUL-terminated path and `st` points to writable memory for one statvfs.
    let rc = unsafe { libc::statvfs(c.as_ptr(), st.as_mut_ptr()) };
    if rc != 0 {
        return None;
    }
    // SAFETY: statvfs returned 0, so it filled `st`.
    let st = unsafe { st.assume_init() };
    // The field types differ between platforms (u32 on some 32-bit ones).
    #[allow(clippy::unnecessary_cast)]
    Some((st.f_bavail as u64).saturating_mul(st.f_frsize as u64))
}

/// Result files above this size are said in a warning, bytes.
pub const LARGE_OUTPUT: f64 = 10.0 * GIB;

/// Errors when the result file (of [`output_file_bytes`]) cannot fit in the free space of the
/// file system holding `path`, with both figures; returns a warning line when it is large (above
/// [`LARGE_OUTPUT`] or half the free space).
pub fn check_output_space(path: &std::path::Path, key: &str, file_bytes: f64) -> Result<Option<String>> {
    let dir = crate::output::safe::parent_dir(path);
    let Some(free) = free_disk_bytes(&dir) else { return Ok(None) };
    let free = free as f64;
    ensure!(
        file_bytes <= free,
        "{key} = {}: the result file needs about {:.3} GiB, but the file system holding {} has only {:.3} GiB \
         free: reduce the snapshots (output.snapshot_every, output.snapshot), the receivers or the steps",
        path.display(),
        file_bytes / GIB,
        dir.display(),
        free / GIB
    );
    Ok((file_bytes > LARGE_OUTPUT || file_bytes > 0.5 * free).then(|| {
        format!(
            "the result file {} will be about {:.2} GiB ({:.2} GiB free there)",
            path.display(),
            file_bytes / GIB,
            free / GIB
        )
    }))
}
