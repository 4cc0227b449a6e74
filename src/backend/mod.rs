//! Compute backends behind one interface: the solver's time loop is written once, against
//! [`Backend`], and each backend applies a [`Problem`](crate::problem::Problem) the same way.
//!
//! Every step computes, in this order (CPU and GPU alike; the GPU computes psi of step 2 inside the
//! pass of step 4, from p^n, with the same arithmetic):
//! 1. free surface: mirror p^n antisymmetrically into the halo above z = 0;
//! 2. CPML: psi_i <- b_i psi_i + a_i dp^n/dx_i in each axis's layers;
//! 3. interior: p^{n+1} = g (2 p^n - g p^{n-1} + c^2 dt^2 L p^n), written over p^{n-1}
//!    (g is the sponge factor, 1 otherwise; damping p^{n-1} too makes it friction, not a mirror);
//! 4. CPML: zeta_i <- b_i zeta_i + a_i (d2p^n/dx_i2 + dpsi_i/dx_i);
//!    p^{n+1} += c^2 dt^2 (dpsi_i/dx_i + zeta_i), axis by axis;
//! 5. source: p^{n+1} += c^2 dt^2 w s(n dt) / (dx dy dz) at each tap;
//! 6. receivers: trace[r][n] = sum of w p^{n+1} over the receiver's taps (sample n is at (n+1) dt);
//! 7. swap p^n and p^{n+1}.

pub mod cpu;
pub mod cpu_half;
pub mod tuning;

use anyhow::Result;

use crate::grid::Section;

/// What a backend is, for reports and the output file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    /// "cpu", "cuda" or "hip".
    pub backend: &'static str,
    /// e.g. "NVIDIA H100 80GB HBM3" or "CPU (rayon, 2 threads)".
    pub name: String,
    /// Kernel variant in use ("fused", "three-pass", or "rayon" on the CPU).
    pub kernel: String,
}

pub trait Backend {
    fn info(&self) -> DeviceInfo;

    /// Enqueues time step `n` (see the module docs). GPU backends do not wait for it to finish.
    fn step(&mut self, n: usize) -> Result<()>;

    /// Copies the current wavefield p^n (after the last step) into `out`, dense (nz, ny, nx).
    fn snapshot(&mut self, out: &mut [f32]) -> Result<()>;

    /// Copies `sections` of the current wavefield p^n into `out`, one after the other, each
    /// laid out as its [`Section::shape`] (GPUs bring down only these points).
    fn snapshot_sections(&mut self, sections: &[Section], out: &mut [f32]) -> Result<()>;

    /// Receiver traces for the first `steps` steps, (nreceivers, steps) row-major.
    fn traces(&mut self, steps: usize) -> Result<Vec<f32>>;

    /// Whether every value of the current wavefield p^n is finite (the blow-up check: NaN or
    /// infinity once, and the rest of the run is garbage). Waits for the queued steps on a GPU;
    /// cheap enough for about once a second (one read of the field).
    fn field_is_finite(&mut self) -> Result<bool>;

    /// Seconds spent in each of the steps done so far (device time on GPUs). Waits for the device.
    fn step_seconds(&mut self) -> Result<Vec<f64>>;
}

#[cfg(any(feature = "cuda", feature = "hip"))]
pub mod gpu;
