//! Compute backends behind one interface: the solver's time loop is written once, against
//! [`Backend`], and each backend applies a [`Problem`] the same way; [`registry`] opens the one
//! a run asks for.
//!
//! Every step computes, in this order (CPU and GPU alike; the GPU computes psi of step 2 inside the
//! pass of step 4, from p^n, with the same arithmetic):
//! 1. free surface: mirror p^n antisymmetrically into the halo above z = 0;
//! 2. CPML: psi_i <- b_i psi_i + a_i dp^n/dx_i in each axis's layers;
//! 3. interior: p^{n+1} = g (2 p^n - g p^{n-1} + c^2 dt^2 L p^n), written over p^{n-1}
//!    (g is the sponge factor, 1 otherwise; damping p^{n-1} too makes it friction, not a mirror);
//! 4. CPML: zeta_i <- b_i zeta_i + a_i (d2p^n/dx_i2 + dpsi_i/dx_i);
//!    p^{n+1} += c^2 dt^2 (dpsi_i/dx_i + zeta_i), axis by axis in
//!    [`CPML_AXIS_ORDER`](crate::boundary::CPML_AXIS_ORDER) (y, z, x);
//! 5. source: p^{n+1} += c^2 dt^2 w s(n dt) / (dx dy dz) at each tap;
//! 6. receivers: trace\[r\]\[n\] = sum of w p^{n+1} over the receiver's taps (sample n is at
//!    (n+1) dt);
//! 7. swap p^n and p^{n+1}.

pub mod cpml_transposed;
pub mod cpu;
pub mod cpu_half;
pub mod imaging;
pub mod registry;
pub mod tuning;

use anyhow::{Result, bail};

use crate::grid::Section;
use crate::problem::Problem;

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

/// p^n where it lives on a GPU, for an exchange that moves halo planes device to device (NCCL).
#[derive(Clone, Copy, Debug)]
pub struct DeviceField {
    /// The device's ordinal.
    pub device: usize,
    /// Device address of interior z-plane 0 of p^n; plane z starts `z * plane_values` f32 later.
    pub plane0: u64,
    /// f32 values of one padded plane (its x and y padding, always zero, included), so that
    /// consecutive z-planes are one contiguous run.
    pub plane_values: usize,
    /// The stream the backend's work is ordered on (`CUstream` or `hipStream_t`).
    pub stream: *mut std::ffi::c_void,
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

    /// Starts another shot of the same model (a survey): p^n, p^{n-1} and the memory variables
    /// back to zero, traces and step timings cleared, and the source and receivers of `problem`
    /// in place of the current ones. `problem` has the grid, model, time and boundary the backend
    /// was opened with ([`Problem::set_shot`]); the model stays where it is and nothing is
    /// allocated for the fields or compiled again.
    fn start_shot(&mut self, problem: &Problem) -> Result<()>;

    /// Time step `n` without step 6: a subdomain of a decomposed run exchanges its halo planes
    /// first, then calls [`record_receivers`](Self::record_receivers) (its receivers may read them).
    fn step_field(&mut self, n: usize) -> Result<()> {
        let _ = n;
        bail!("the {} backend does not run decomposed domains", self.info().backend)
    }

    /// [`step_field`](Self::step_field) in two parts, so that a decomposed run can send the planes
    /// its neighbours need while the rest is computed: interior z-planes `first` now (with their
    /// source taps), the rest in [`finish_field`](Self::finish_field), except the planes `leave`
    /// (ghost planes an exchange writes meanwhile, which no other plane reads in that step); in
    /// between, [`next_planes_out`](Self::next_planes_out) reads the new planes. Every other plane
    /// gets [`step_field`](Self::step_field)'s values. Backends that do not split a step
    /// ([`splits_steps`](Self::splits_steps) false) do the whole step here.
    fn begin_field(
        &mut self,
        n: usize,
        first: &[std::ops::Range<usize>],
        leave: &[std::ops::Range<usize>],
    ) -> Result<()> {
        let _ = (first, leave);
        self.step_field(n)
    }

    /// [`planes_out`](Self::planes_out) of the new wavefield p^{n+1} of the step
    /// [`begin_field`](Self::begin_field) began (planes of its `first` only).
    fn next_planes_out(&mut self, z0: usize, planes: usize, buf: &mut [f32]) -> Result<()> {
        self.planes_out(z0, planes, buf)
    }

    /// The rest of step `n`, begun by [`begin_field`](Self::begin_field).
    fn finish_field(&mut self, n: usize) -> Result<()> {
        let _ = n;
        Ok(())
    }

    /// Whether [`begin_field`](Self::begin_field) computes its `first` planes alone.
    fn splits_steps(&self) -> bool {
        false
    }

    /// Step 6 of the step just done by [`step_field`](Self::step_field).
    fn record_receivers(&mut self) -> Result<()> {
        bail!("the {} backend does not run decomposed domains", self.info().backend)
    }

    /// Copies interior z-planes `z0..z0 + planes` of the current wavefield p^n into `buf`, dense
    /// (planes, ny, nx): the halo a neighbouring subdomain needs.
    fn planes_out(&mut self, z0: usize, planes: usize, buf: &mut [f32]) -> Result<()> {
        let _ = (z0, planes, buf);
        bail!("the {} backend does not run decomposed domains", self.info().backend)
    }

    /// Overwrites interior z-planes `z0..z0 + planes` of p^n with `buf`, dense (planes, ny, nx):
    /// the halo received from a neighbouring subdomain.
    fn planes_in(&mut self, z0: usize, planes: usize, buf: &[f32]) -> Result<()> {
        let _ = (z0, planes, buf);
        bail!("the {} backend does not run decomposed domains", self.info().backend)
    }

    /// Copies rows `y0..y0 + rows` of every interior z-plane of p^n into `buf`, dense (nz, rows,
    /// nx): the halo rows a neighbouring block of y-z blocks needs.
    fn rows_out(&mut self, y0: usize, rows: usize, buf: &mut [f32]) -> Result<()> {
        let _ = (y0, rows, buf);
        bail!("the {} backend does not run y-z blocks", self.info().backend)
    }

    /// Overwrites rows `y0..y0 + rows` of every interior z-plane of p^n with `buf`, dense (nz,
    /// rows, nx): the halo rows received from a neighbouring block.
    fn rows_in(&mut self, y0: usize, rows: usize, buf: &[f32]) -> Result<()> {
        let _ = (y0, rows, buf);
        bail!("the {} backend does not run y-z blocks", self.info().backend)
    }

    /// Waits until the work queued so far is done (a no-op where nothing is queued, on the CPU).
    fn wait(&mut self) -> Result<()> {
        Ok(())
    }

    /// Where p^n lives on the device (GPU backends storing f32), for work queued after this
    /// backend's on its stream; it moves with every step (the fields swap).
    fn device_field(&self) -> Option<DeviceField> {
        None
    }

    /// [`device_field`](Self::device_field) of p^{n+1} while a step begun by
    /// [`begin_field`](Self::begin_field) is open, else of p^n.
    fn next_device_field(&self) -> Option<DeviceField> {
        self.device_field()
    }

    /// The imaging condition on the device (GPU backends storing f32); None where the host
    /// computes it from snapshots.
    fn device_imaging(&mut self) -> Option<&mut dyn imaging::DeviceImaging> {
        None
    }
}

#[cfg(any(feature = "cuda", feature = "hip"))]
pub mod gpu;
