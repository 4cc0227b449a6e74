//! The step where the density varies (kernels/density.cu): its launch shape, its z-windows and the
//! launch. It replaces the fused step's interior launch; the free surface, the CPML layers (each
//! layer point's c^2 dt^2 taken as K bh from [`Layers::buoyancy`](super::kernels::Layers)), the
//! source and the receivers are the constant density's launches.

use super::kernels::{DensityStep, Launch};
use super::runtime::GpuRuntime;
use anyhow::Result;

/// Threads of a block in x and y (density.cu's DX and DY).
pub(super) fn block(radius: usize) -> [u32; 3] {
    [if radius > 4 { 16 } else { 32 }, 8, 1]
}

/// The z-window of a launch over `nz` planes of `tiles` xy tiles, `resident` blocks on the device
/// at once: a block's time is its planes plus the 2R it primes its queues with, and the launch
/// takes as many of those as it has waves, so the chunk count minimising waves x (planes + 2R)
/// wins (the fewest chunks among equals: each chunk reads its 2R priming planes again).
pub(super) fn window(nz: usize, radius: usize, tiles: u64, resident: u64) -> u32 {
    let (nz, r) = (nz.max(1) as u64, radius as u64);
    let cost = |chunks: u64| (tiles * chunks).div_ceil(resident.max(1)) * (nz.div_ceil(chunks) + 2 * r);
    let chunks = (1..=nz.div_ceil(2 * r.max(1))).min_by_key(|&c| (cost(c), c)).unwrap_or(1);
    nz.div_ceil(chunks) as u32
}

/// The density step's launch shape on one device.
#[derive(Clone, Copy, Debug)]
pub(super) struct DensityLaunch {
    radius: usize,
    vec: u32,
    /// Blocks resident on the whole device at once.
    resident: u64,
}

impl DensityLaunch {
    pub fn new<Rt: GpuRuntime>(rt: &Rt, f: Rt::Function, radius: usize, vec: u32) -> DensityLaunch {
        let [bx, by, _] = block(radius);
        let per_sm = rt.resident_blocks(f, bx * by, 0).unwrap_or(1).max(1);
        DensityLaunch { radius, vec, resident: (rt.multiprocessors() * per_sm) as u64 }
    }

    /// Enqueues `args` over its `nz` planes (its `window` is set here).
    pub fn launch<Rt: GpuRuntime>(&self, rt: &Rt, f: Rt::Function, args: DensityStep) -> Result<()> {
        let block = block(self.radius);
        let tiles_x = (args.nx as u32).div_ceil(block[0] * self.vec);
        let tiles_y = (args.ny as u32).div_ceil(block[1]);
        let window = window(args.nz as usize, self.radius, tiles_x as u64 * tiles_y as u64, self.resident);
        let grid = [tiles_x, tiles_y, (args.nz as u32).div_ceil(window)];
        DensityStep { window: window as i32, ..args }.launch(rt, f, Launch { grid, block, shared: 0 })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_covers_the_planes_and_fills_the_device() {
        // H200-like: 132 multiprocessors, one block each.
        for (nz, tiles) in [(512, 256), (1024, 1024), (600, 19 * 25), (7, 4), (1, 1)] {
            let w = window(nz, 4, tiles, 132) as usize;
            assert!(w >= 1 && w <= nz, "nz {nz}: window {w}");
            let blocks = tiles * nz.div_ceil(w) as u64;
            // Either one wave is not filled by the tiles alone, or the chunks fill at least one.
            assert!(blocks >= 132 || nz.div_ceil(w) as u64 >= nz.div_ceil(8) as u64, "nz {nz}: {blocks} blocks");
        }
        // Few tiles are split along z to fill the device.
        assert!(window(512, 4, 16, 132) < 128);
        // Many tiles run whole columns.
        assert_eq!(window(1024, 4, 1024, 132), 1024);
    }
}
