//! The device's STREAM-like bandwidth ceilings (copy, and the leapfrog's 3 reads and 1 write),
//! measured with kernels/stream.cu and cached per device: the denominators of every reported
//! fraction of the memory bound.

use super::kernels::{Launch, StreamCopy, StreamFill, StreamThreeReadOneWrite};
use super::plan::LayerPass;
use super::runtime::{DevicePtr, GpuRuntime};
use super::sources::{self, cache_dir, kernel_options, load_kernels};
use crate::backend::tuning::Tuning;
use crate::boundary::BoundaryKind;
use anyhow::{Result, ensure};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Ceiling {
    pub device: String,
    /// b = a, float4.
    pub copy_gbs: f64,
    /// d = a + b + c, float4 (the leapfrog's 3 reads and 1 write).
    pub three_read_one_write_gbs: f64,
    /// Bytes per array.
    pub array_bytes: u64,
    pub repetitions: usize,
}

pub(crate) fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 { v[n / 2] } else { 0.5 * (v[n / 2 - 1] + v[n / 2]) }
}

/// Measures the copy and 3-read-1-write ceilings with arrays of `array_bytes` (>= 1 GiB advised),
/// median of `reps` timed runs after one untimed.
pub fn measure_ceiling<Rt: GpuRuntime>(rt: &Rt, array_bytes: usize, reps: usize) -> Result<Ceiling> {
    let n4 = (array_bytes / 16).max(1) as u64;
    let bytes = n4 as usize * 16;
    let (free, _) = rt.mem_info()?;
    ensure!(4 * bytes + (256 << 20) <= free, "not enough free GPU memory for 4 arrays of {bytes} bytes");
    let m = load_kernels(
        rt,
        &[sources::STREAM],
        &kernel_options(1, &Tuning::for_radius(1), BoundaryKind::None.kernel_defines(), false, LayerPass::After),
    )?;
    let copy = [rt.function(&m, "stream_copy")?, rt.function(&m, "stream_copy_x4")?];
    let triad = [rt.function(&m, "stream_3r1w")?, rt.function(&m, "stream_3r1w_x4")?];
    let fill = rt.function(&m, "stream_fill")?;
    let arrays: Vec<DevicePtr> = (0..4).map(|_| rt.alloc(bytes)).collect::<Result<_>>()?;
    let result = (|| -> Result<Ceiling> {
        let blocks = (rt.multiprocessors() * 8).min(n4.div_ceil(256) as u32).max(1);
        for (i, &a) in arrays.iter().enumerate() {
            let seed = 1.0f32 + i as f32;
            StreamFill { a, n: n4, seed }.launch(rt, fill, Launch::linear(blocks, 256))?;
        }
        // Two launch styles (a grid-stride loop over a full device, and one block per 1024
        // vectors with 4 loads in flight per thread); the ceiling is the better of the two.
        let time = |three: bool, variant: usize| -> Result<f64> {
            let f = if three { triad[variant] } else { copy[variant] };
            let grid = if variant == 0 { blocks } else { n4.div_ceil(1024) as u32 };
            let ev: Vec<Rt::Event> = (0..=reps + 1).map(|_| rt.event()).collect::<Result<_>>()?;
            for e in &ev[..=reps] {
                rt.record(e)?;
                let l = Launch::linear(grid, 256);
                let [a, b, c, d] = [arrays[0], arrays[1], arrays[2], arrays[3]];
                if three {
                    StreamThreeReadOneWrite { a, b, c, d, n: n4 }.launch(rt, f, l)?;
                } else {
                    StreamCopy { a, b: d, n: n4 }.launch(rt, f, l)?;
                }
            }
            rt.record(&ev[reps + 1])?;
            rt.synchronize()?;
            let mut t: Vec<f64> =
                (1..=reps).map(|i| Ok(rt.elapsed_ms(&ev[i], &ev[i + 1])? as f64 * 1e-3)).collect::<Result<_>>()?;
            let moved = if three { 4.0 } else { 2.0 } * bytes as f64;
            Ok(moved / median(&mut t) / 1e9)
        };
        let copy_gbs = time(false, 0)?.max(time(false, 1)?);
        let three_read_one_write_gbs = time(true, 0)?.max(time(true, 1)?);
        Ok(Ceiling {
            device: rt.device_name(),
            copy_gbs,
            three_read_one_write_gbs,
            array_bytes: bytes as u64,
            repetitions: reps,
        })
    })();
    let _ = rt.synchronize();
    for a in arrays {
        // SAFETY: allocated above, stream drained.
        unsafe { rt.free(a) };
    }
    result
}

/// The device's ceilings, measured once (1 GiB arrays, 20 repetitions) and cached as JSON in
/// [`cache_dir`], keyed by vendor, device name and architecture.
pub fn ceiling_cached<Rt: GpuRuntime>(rt: &Rt) -> Result<Ceiling> {
    let name: String = rt.device_name().chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
    let path = cache_dir().join(format!("ceiling-{}-{}-{name}.json", rt.vendor(), rt.arch()));
    if let Ok(text) = std::fs::read_to_string(&path)
        && let Ok(c) = serde_json::from_str::<Ceiling>(&text)
    {
        return Ok(c);
    }
    let c = measure_ceiling(rt, 1 << 30, 20)?;
    if std::fs::create_dir_all(cache_dir()).is_ok() {
        let _ = std::fs::write(&path, serde_json::to_string_pretty(&c)?);
    }
    Ok(c)
}
