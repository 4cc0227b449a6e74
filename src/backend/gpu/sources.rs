//! The kernel sources (one file per kernel, behind the prelude), the `-D` options that specialise
//! them, and the on-disk cache of compiled modules, keyed by source, options and architecture.

use super::GpuRuntime;
use super::plan::LayerPass;
use crate::backend::tuning::Tuning;
use crate::boundary::BoundaryDefines;
use anyhow::Result;
use sha2::{Digest, Sha256};
use std::path::PathBuf;

pub const PRELUDE: &str = include_str!("../../../kernels/prelude.h");
/// The CPML point update and the fused kernels' layer parameters (after the prelude in every module).
pub const LAYERS: &str = include_str!("../../../kernels/layers.h");
pub const FUSED: &str = include_str!("../../../kernels/fused.cu");
pub const FUSED_RING: &str = include_str!("../../../kernels/fused_ring.cu");
/// The fused step with f16 storage (built with -DHALF=1, beside [`STEP`]).
pub const FUSED_HALF: &str = include_str!("../../../kernels/fused_half.cu");
pub const PASS_X: &str = include_str!("../../../kernels/pass_x.cu");
pub const PASS_Y: &str = include_str!("../../../kernels/pass_y.cu");
pub const PASS_Z: &str = include_str!("../../../kernels/pass_z.cu");
pub const UPDATE: &str = include_str!("../../../kernels/update.cu");
pub const CPML: &str = include_str!("../../../kernels/cpml.cu");
pub const FREE_SURFACE: &str = include_str!("../../../kernels/free_surface.cu");
pub const SOURCES: &str = include_str!("../../../kernels/sources.cu");
pub const SECTION: &str = include_str!("../../../kernels/section.cu");
pub const STREAM: &str = include_str!("../../../kernels/stream.cu");
pub const FINITE_CHECK: &str = include_str!("../../../kernels/finite_check.cu");
/// Reverse-time migration's imaging condition.
pub const IMAGING: &str = include_str!("../../../kernels/imaging.cu");
/// A backward step's CPML terms.
pub const CPML_TRANSPOSED: &str = include_str!("../../../kernels/cpml_transposed.cu");
/// The step where the density varies.
pub const DENSITY: &str = include_str!("../../../kernels/density.cu");

/// The step of a 2D grid.
pub const PLANE: &str = include_str!("../../../kernels/plane.cu");

/// Every kernel of a step (and the run's blow-up check and imaging condition).
pub const STEP: [&str; 14] = [
    FUSED,
    DENSITY,
    PASS_X,
    PASS_Y,
    PASS_Z,
    UPDATE,
    CPML,
    CPML_TRANSPOSED,
    FREE_SURFACE,
    SOURCES,
    SECTION,
    STREAM,
    FINITE_CHECK,
    IMAGING,
];

/// Every kernel of a 2D grid's step (and the run's blow-up check and imaging condition).
pub const PLANE_STEP: [&str; 7] = [PLANE, FREE_SURFACE, SOURCES, SECTION, FINITE_CHECK, IMAGING, CPML_TRANSPOSED];

/// The fused kernel's source for a tuning (both define `fused_step`).
pub fn fused(t: &Tuning) -> &'static str {
    if t.tile_ring == 1 { FUSED_RING } else { FUSED }
}

/// [`STEP`] with the fused kernel `t` asks for.
pub fn step(t: &Tuning) -> [&'static str; STEP.len()] {
    let mut s = STEP;
    s[0] = fused(t);
    s
}

/// The f16 step's module: [`step`] with [`FUSED_HALF`] (the `*_half` kernels need -DHALF=1).
pub fn half_step(t: &Tuning) -> [&'static str; STEP.len() + 1] {
    let s = step(t);
    std::array::from_fn(|i| if i < s.len() { s[i] } else { FUSED_HALF })
}

/// The prelude and layers.h followed by `parts`, as one translation unit.
pub fn assemble(parts: &[&str]) -> String {
    let mut s = PRELUDE.replace("#pragma once", "");
    s.push('\n');
    s.push_str(&LAYERS.replace("#pragma once", ""));
    for p in parts {
        s.push('\n');
        s.push_str(p);
    }
    s
}

/// Where compiled kernels and device measurements are kept: $SEISMIC_CACHE_DIR, else
/// $XDG_CACHE_HOME/seismic-run, else ~/.cache/seismic-run (else a temporary directory).
pub fn cache_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("SEISMIC_CACHE_DIR") {
        return PathBuf::from(d);
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME") {
        return PathBuf::from(d).join("seismic-run");
    }
    if let Some(h) = std::env::var_os("HOME") {
        return PathBuf::from(h).join(".cache").join("seismic-run");
    }
    std::env::temp_dir().join("seismic-run")
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Compiles (or reads back from the disk cache) a module of `parts` with `options`.
pub fn load_kernels<Rt: GpuRuntime>(rt: &Rt, parts: &[&str], options: &[String]) -> Result<Rt::Module> {
    let mut modules = load_kernels_all(rt, &[(parts, options)])?;
    Ok(modules.pop().expect("one module"))
}

/// [`load_kernels`] of several modules, those not in the disk cache compiled at once
/// ([`GpuRuntime::compile_all`]).
pub fn load_kernels_all<Rt: GpuRuntime>(rt: &Rt, modules: &[(&[&str], &[String])]) -> Result<Vec<Rt::Module>> {
    let dir = cache_dir();
    let sources: Vec<String> = modules.iter().map(|(parts, _)| assemble(parts)).collect();
    let paths: Vec<PathBuf> = modules
        .iter()
        .zip(&sources)
        .map(|((_, options), source)| {
            let mut h = Sha256::new();
            for s in [rt.vendor(), &rt.arch(), &rt.compiler_flags().join(" "), &options.join(" "), source] {
                h.update(s.as_bytes());
                h.update([0u8]);
            }
            dir.join(format!("{}-{}-{}.bin", rt.vendor(), rt.arch(), hex(&h.finalize()[..12])))
        })
        .collect();
    let mut images: Vec<Option<Vec<u8>>> = paths.iter().map(|p| std::fs::read(p).ok()).collect();
    let missing: Vec<usize> = (0..modules.len()).filter(|&i| images[i].is_none()).collect();
    let jobs: Vec<(&str, &str, &[String])> =
        missing.iter().map(|&i| (sources[i].as_str(), "seismic_kernels.cu", modules[i].1)).collect();
    for (&i, image) in missing.iter().zip(rt.compile_all(&jobs)) {
        let image = image?;
        // The cache is an optimisation: a read-only or missing directory only costs a recompile.
        if std::fs::create_dir_all(&dir).is_ok() {
            let name = paths[i].file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            let tmp = paths[i].with_file_name(format!(".{name}.{}.tmp", std::process::id()));
            if std::fs::write(&tmp, &image).is_ok() {
                let _ = std::fs::rename(&tmp, &paths[i]);
            }
        }
        images[i] = Some(image);
    }
    // Loaded in the modules' order whatever the cache held (a module's handle does not depend on
    // which of them another process compiled first); a cached image that does not load is
    // compiled again.
    let mut loaded = Vec::with_capacity(modules.len());
    for (i, image) in images.into_iter().enumerate() {
        let image = image.expect("every module read or compiled");
        let module = match rt.load_module(&image) {
            Ok(m) => m,
            Err(_) if !missing.contains(&i) => {
                rt.load_module(&rt.compile(&sources[i], "seismic_kernels.cu", modules[i].1)?)?
            }
            Err(e) => return Err(e),
        };
        loaded.push(module);
    }
    Ok(loaded)
}

/// A module's compile-time parameters, typed: each becomes one `-D` define, in the order
/// [`KernelDefines::options`] lists them (part of the kernel cache's key). prelude.h refuses to
/// compile without every define it needs; the unit test `every_define_the_kernels_need_is_set`
/// holds the two together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelDefines {
    pub radius: usize,
    pub block_x: u32,
    pub block_y: u32,
    pub vec: u32,
    /// The boundary's own defines ([`crate::boundary::Boundary::kernel_defines`]).
    pub boundary: BoundaryDefines,
    /// The fused kernel writes out = L p (the operator benchmark).
    pub laplacian_only: bool,
    pub stages: u32,
    pub min_blocks: u32,
    pub unroll_z: u32,
    pub rows: u32,
    pub order: u32,
    pub halo_ring: u32,
    /// The module also holds fused_step_ylayers and fused_step_zlayers.
    pub ylayers: bool,
    /// Every row of the grid is whole vectors and that pays (`on_grid`); None before a grid is
    /// known (HIP's ahead-of-time images), where the kernels' default (0) holds.
    pub whole_rows: Option<bool>,
    /// The module also holds the f16 step (the `*_half` kernels).
    pub half: bool,
}

impl KernelDefines {
    /// The defines of a module in the launch shape `t` (made effective at `radius`; `layers`:
    /// with the fused kernels that compute the CPML y layers, and the z layers of the tiles
    /// between them, in their pass).
    pub fn new(radius: usize, t: &Tuning, boundary: BoundaryDefines, laplacian_only: bool, layers: LayerPass) -> Self {
        let t = t.effective(radius);
        KernelDefines {
            radius,
            block_x: t.block_x,
            block_y: t.block_y,
            vec: t.vec,
            boundary,
            laplacian_only,
            stages: t.stages,
            min_blocks: t.min_blocks,
            unroll_z: t.unroll_z,
            rows: t.rows,
            order: t.order,
            halo_ring: t.halo_ring,
            ylayers: layers == LayerPass::YLayers,
            whole_rows: None,
            half: false,
        }
    }

    /// With the grid's own parameter. WHOLE_ROWS, where every row is whole vectors: the fused
    /// kernels store a row's last vector without the per-lane path (24-32 SASS instructions a
    /// plane of the march fewer). NVRTC spends registers on it, so it is asked for only where that
    /// was measured to pay: the step at R = 8 and the Laplacian-only operator from R = 5 (at R = 4
    /// the step spilled, at R = 1 the Laplacian lost a block a multiprocessor).
    pub fn on_grid(self, shape: [usize; 3]) -> Self {
        let pays = self.radius == 8 || (self.laplacian_only && self.radius >= 5);
        KernelDefines { whole_rows: Some(pays && shape[0].is_multiple_of(self.vec.max(1) as usize)), ..self }
    }

    /// The `-D` options, in their fixed order.
    pub fn options(&self) -> Vec<String> {
        let flag = |b: bool| b as u32;
        let mut o = vec![
            format!("-DRADIUS={}", self.radius),
            format!("-DBLOCK_X={}", self.block_x),
            format!("-DBLOCK_Y={}", self.block_y),
            format!("-DVEC={}", self.vec),
        ];
        o.extend(self.boundary.options());
        o.extend([
            format!("-DLAPLACIAN_ONLY={}", flag(self.laplacian_only)),
            format!("-DSTAGES={}", self.stages),
            format!("-DMIN_BLOCKS={}", self.min_blocks),
            format!("-DUNROLL_Z={}", self.unroll_z),
            format!("-DROWS={}", self.rows),
            format!("-DORDER={}", self.order),
            format!("-DHALO_RING={}", self.halo_ring),
            format!("-DYLAYERS={}", flag(self.ylayers)),
        ]);
        if let Some(whole) = self.whole_rows {
            o.push(format!("-DWHOLE_ROWS={}", flag(whole)));
        }
        if self.half {
            o.push("-DHALF=1".into());
        }
        o
    }
}

/// A module's whole compile-time parameters on a grid of `shape` ([`KernelDefines::on_grid`]).
/// HIP's ahead-of-time images, built before any grid is known, take [`kernel_options`].
pub fn module_options(
    shape: [usize; 3],
    radius: usize,
    t: &Tuning,
    boundary: BoundaryDefines,
    laplacian_only: bool,
    layers: LayerPass,
) -> Vec<String> {
    KernelDefines::new(radius, t, boundary, laplacian_only, layers).on_grid(shape).options()
}

/// Compile-time parameters of a module without the grid's own ([`KernelDefines::new`]).
pub fn kernel_options(
    radius: usize,
    t: &Tuning,
    boundary: BoundaryDefines,
    laplacian_only: bool,
    layers: LayerPass,
) -> Vec<String> {
    KernelDefines::new(radius, t, boundary, laplacian_only, layers).options()
}

#[cfg(test)]
mod tests {
    use super::{FUSED_HALF, KernelDefines, PRELUDE, STEP, half_step, step};
    use crate::backend::gpu::LayerPass;
    use crate::backend::tuning::Tuning;
    use crate::boundary::BoundaryKind;

    /// The defines prelude.h's `#if !defined(...) ... #error` asks the host for.
    fn required() -> Vec<String> {
        let start = PRELUDE.find("#if !defined(").expect("prelude.h checks its defines");
        let check = &PRELUDE[start..start + PRELUDE[start..].find("#error").expect("and refuses without them")];
        check.split("defined(").skip(1).map(|d| d[..d.find(')').expect("a closed defined()")].to_string()).collect()
    }

    /// Modules are loaded in their order whether the disk cache held some of them or none: the
    /// second cached (by another process, say) and the first not still gives the first handle to
    /// the first.
    #[test]
    fn modules_load_in_their_order_whatever_the_cache_holds() {
        use crate::backend::gpu::fake::{FakeRuntime, Vendor};
        let unique = format!(
            "-DCACHE_ORDER_TEST={}",
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
        );
        let [first, second] = [vec![unique.clone(), "-DPART=1".to_string()], vec![unique, "-DPART=2".to_string()]];
        let parts: &[&str] = &[PRELUDE];
        super::load_kernels(&FakeRuntime::new(Vendor::Cuda), parts, &second).expect("the second, into the cache");
        let rt = FakeRuntime::new(Vendor::Cuda);
        super::load_kernels_all(&rt, &[(parts, &first), (parts, &second)]).expect("both");
        let modules: Vec<String> = rt.take_log().into_iter().filter(|l| l.starts_with("module ")).collect();
        assert_eq!(modules.len(), 2, "{modules:?}");
        assert!(modules[0].starts_with("module m0 ") && modules[0].ends_with("-DPART=1"), "{modules:?}");
        assert!(modules[1].starts_with("module m1 ") && modules[1].ends_with("-DPART=2"), "{modules:?}");
    }

    #[test]
    fn every_define_the_kernels_need_is_set() {
        let need = required();
        assert!(need.len() >= 13 && need.contains(&"YLAYERS".to_string()), "{need:?}");
        let t = Tuning::for_radius(4);
        for d in [
            KernelDefines::new(4, &t, BoundaryKind::Cpml.kernel_defines(), false, LayerPass::After),
            KernelDefines::new(4, &t, BoundaryKind::Sponge.kernel_defines(), true, LayerPass::YLayers)
                .on_grid([64, 64, 64]),
        ] {
            let set: Vec<String> =
                d.options().iter().map(|o| o[2..o.find('=').expect("-DNAME=value")].to_string()).collect();
            for n in &need {
                assert!(set.contains(n), "{n} is not set: {set:?}");
            }
        }
    }

    #[test]
    fn the_options_keep_their_order_and_values() {
        let t = Tuning::for_radius(8);
        let d = KernelDefines {
            half: true,
            ..KernelDefines::new(8, &t, BoundaryKind::Sponge.kernel_defines(), false, LayerPass::YLayers)
                .on_grid([64, 8, 8])
        };
        let o = d.options();
        assert_eq!(o[0], "-DRADIUS=8");
        assert_eq!(o[4..6], ["-DSPONGE=1".to_string(), "-DLAPLACIAN_ONLY=0".to_string()]);
        assert_eq!(o[o.len() - 3..], ["-DYLAYERS=1".to_string(), "-DWHOLE_ROWS=1".to_string(), "-DHALF=1".to_string()]);
    }

    /// The f16 module holds every part of the f32 step and the f16 step after them.
    #[test]
    fn the_half_step_module_adds_the_f16_kernels_to_the_step() {
        let t = Tuning::for_radius(4);
        let (full, half) = (step(&t), half_step(&t));
        assert_eq!(&half[..STEP.len()], &full[..]);
        assert_eq!(half[STEP.len()], FUSED_HALF);
    }
}
