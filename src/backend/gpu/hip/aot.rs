//! Ahead-of-time compilation of the kernels with hipcc, for the MI-series static report: no AMD GPU
//! is needed. Each variant (the same -D options the run-time path hands hipRTC) is compiled to
//! device assembly for one architecture, and the code-object metadata that the AMDGPU backend
//! writes (`.vgpr_count`, `.sgpr_count`, `.group_segment_fixed_size`, spill counts, ...) is read
//! back per kernel. Occupancy is estimated from those numbers (see [`waves_per_simd`]).

use super::super::Tuning;
use super::super::plan::LayerPass;
use super::super::sources::{self, kernel_options};
use crate::boundary::{BoundaryDefines, BoundaryKind};
use anyhow::{Context, Result, bail, ensure};
use rayon::prelude::*;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The architectures of the static report: MI200 (MI210/MI250/MI250X) and MI300 (gfx940 is the
/// first MI300 target; MI300A/X production parts are gfx942, which Debian's HIP 5.2 predates).
pub const REPORT_ARCHS: [&str; 2] = ["gfx90a", "gfx940"];

/// One set of compile-time options for the kernel module.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Variant {
    pub radius: usize,
    /// Label of the options that are not the radius: the boundary's ([`BoundaryDefines::label`]),
    /// after "f16" for the f16 step.
    pub flavour: String,
    /// -D options exactly as the run-time compilation gets them.
    pub options: Vec<String>,
    /// Dynamic LDS the fused kernel is launched with (the STAGES ring; 0 by default on AMD).
    pub fused_dynamic_lds: u32,
}

/// The step module's source exactly as the run-time path assembles it (prelude + every kernel).
pub fn step_source() -> String {
    sources::assemble(&sources::STEP)
}

/// Every variant of the step module a run can compile: R = 1..8, with the default launch shape on
/// AMD ([`super::tuning`]), once per boundary variant ([`BoundaryDefines::VARIANTS`]: CPML runs
/// after the interior, from the variant without the sponge factor). Each holds the fused kernel, the three passes and update, CPML, free
/// surface, source/receiver and stream kernels. fused_step_layers, the in-pass layer experiment,
/// is CUDA-only and never built for AMD.
pub fn step_variants() -> Vec<Variant> {
    let mut v = Vec::new();
    for radius in 1..=8 {
        for boundary in BoundaryDefines::VARIANTS {
            let tuning = super::tuning(radius);
            v.push(Variant {
                radius,
                flavour: boundary.label().to_string(),
                options: kernel_options(radius, &tuning, boundary, false, LayerPass::After),
                fused_dynamic_lds: tuning.dynamic_shared_bytes(radius, false),
            });
        }
    }
    v
}

/// The f16 step's module source as a run assembles it (`sources::half_step`: every kernel of
/// [`step_source`] and fused_half.cu).
pub fn half_step_source() -> String {
    sources::assemble(&sources::half_step(&super::tuning(4)))
}

/// The f16 step's module variants, R = 1..8 for each boundary variant: the options a run hands
/// the compiler (the AMD launch shape made the f16 kernel's, plus -DHALF=1).
pub fn half_step_variants() -> Vec<Variant> {
    let mut v = Vec::new();
    for radius in 1..=8 {
        for boundary in BoundaryDefines::VARIANTS {
            let tuning = super::tuning(radius).for_half(radius).effective(radius);
            let mut options = kernel_options(radius, &tuning, boundary, false, LayerPass::After);
            options.push("-DHALF=1".into());
            let flavour = match boundary.label() {
                "none" => "f16".to_string(),
                label => format!("f16 {label}"),
            };
            v.push(Variant { radius, flavour, options, fused_dynamic_lds: 0 });
        }
    }
    v
}

/// The f16 step's own kernels (the module also holds every kernel of the f32 step).
pub const HALF_KERNELS: [&str; 9] = [
    "fused_step_half",
    "cpml_x_half",
    "cpml_y_half",
    "cpml_z_half",
    "free_surface_half",
    "inject_source_half",
    "record_receivers_half",
    "extract_section_half",
    "finite_check_half",
];

/// The -D options of the fused kernel's Laplacian-only build (the operator benchmark).
pub fn laplacian_options(radius: usize) -> Vec<String> {
    kernel_options(radius, &super::tuning(radius), BoundaryKind::None.kernel_defines(), true, LayerPass::After)
}

/// The -D options of the STREAM ceiling module, as `measure_ceiling` compiles it.
pub fn stream_options() -> Vec<String> {
    kernel_options(1, &Tuning::for_radius(1), BoundaryKind::None.kernel_defines(), false, LayerPass::After)
}

/// The kernels in the order the report lists them.
pub const KERNEL_ORDER: [&str; 26] = [
    "fused_step",
    "density_step",
    "pass_x",
    "pass_y",
    "pass_z",
    "update",
    "cpml_x",
    "cpml_y",
    "cpml_z",
    "free_surface",
    "inject_source",
    "record_receivers",
    "extract_section",
    "stream_copy",
    "stream_3r1w",
    "stream_fill",
    "stream_copy_x4",
    "stream_3r1w_x4",
    "finite_check",
    "keep_source",
    "correlate_image",
    "correlate_gradient",
    "illumination_max",
    "stack_normalised",
    "cpml_transposed_prepare",
    "cpml_transposed_gather",
];

impl Variant {
    /// The kernels its module holds, in [`KERNEL_ORDER`].
    pub fn kernels(&self) -> Vec<&'static str> {
        KERNEL_ORDER.to_vec()
    }
}

/// Resource usage of one kernel of one variant for one architecture.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelUsage {
    pub kernel: String,
    pub radius: usize,
    pub flavour: String,
    pub arch: String,
    pub vgprs: u32,
    pub agprs: u32,
    pub sgprs: u32,
    /// LDS bytes per workgroup: static (group segment) plus the dynamic bytes it is launched with.
    pub lds_bytes: u32,
    /// Scratch (private segment) bytes per work-item: non-zero means spills or stack use.
    pub scratch_bytes: u32,
    pub vgpr_spills: u32,
    pub sgpr_spills: u32,
    /// The kernel's launch bound (1024 when it declares none).
    pub max_workgroup: u32,
    /// Estimated waves per SIMD (of at most 8).
    pub waves_per_simd: u32,
}

impl KernelUsage {
    /// Whether the kernel spills registers to scratch memory.
    pub fn spills(&self) -> bool {
        self.vgpr_spills > 0 || self.sgpr_spills > 0 || self.scratch_bytes > 0
    }
}

/// The hipcc to use: $HIPCC, then $ROCM_PATH/bin/hipcc, /opt/rocm/bin/hipcc, /usr/bin/hipcc.
pub fn find_hipcc() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("HIPCC") {
        return Ok(PathBuf::from(p));
    }
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(r) = std::env::var_os("ROCM_PATH") {
        candidates.push(PathBuf::from(r).join("bin/hipcc"));
    }
    candidates.push(PathBuf::from("/opt/rocm/bin/hipcc"));
    candidates.push(PathBuf::from("/usr/bin/hipcc"));
    candidates.into_iter().find(|p| p.is_file()).with_context(|| {
        "hipcc not found (looked at $HIPCC, $ROCM_PATH/bin, /opt/rocm/bin, /usr/bin): \
         install ROCm or Debian's hipcc package"
    })
}

/// Compiles `source_file` (device code only) for `arch` with the run-time path's flags
/// ([`super::compiler_flags`]) and `options`; returns the assembly text.
pub fn compile_to_assembly(hipcc: &Path, source_file: &Path, arch: &str, options: &[String]) -> Result<String> {
    let stem = source_file.file_stem().and_then(|s| s.to_str()).unwrap_or("kernels");
    let tag: String = options.iter().flat_map(|o| o.chars()).filter(|c| c.is_ascii_alphanumeric()).collect::<String>();
    let out = source_file.with_file_name(format!("{stem}-{arch}-{tag}.s"));
    let output = Command::new(hipcc)
        .args(["-x", "hip", "--cuda-device-only", "-S"])
        .args(super::compiler_flags(arch))
        // hipRTC includes the HIP runtime header implicitly; hipcc needs it said.
        .args(["-include", "hip/hip_runtime.h", "-Wno-unused-command-line-argument"])
        .args(options)
        .arg(source_file)
        .arg("-o")
        .arg(&out)
        .output()
        .with_context(|| format!("cannot run {}", hipcc.display()))?;
    if !output.status.success() {
        bail!(
            "hipcc failed for {arch} with {}:\n{}",
            options.join(" "),
            String::from_utf8_lossy(&output.stderr).trim_end()
        );
    }
    let text = std::fs::read_to_string(&out).with_context(|| format!("hipcc wrote no {}", out.display()))?;
    let _ = std::fs::remove_file(&out);
    Ok(text)
}

/// Per-kernel fields of the `amdhsa.kernels` metadata in AMDGPU assembly (or `llvm-readelf --notes`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KernelMetadata {
    pub name: String,
    pub vgpr_count: u32,
    pub agpr_count: u32,
    pub sgpr_count: u32,
    pub group_segment_fixed_size: u32,
    pub private_segment_fixed_size: u32,
    pub vgpr_spill_count: u32,
    pub sgpr_spill_count: u32,
    pub max_flat_workgroup_size: u32,
}

/// Reads the kernel entries of the metadata block. Kernel-level keys sit at indentation 4 (the
/// first one after "  - "); deeper keys (kernel arguments) are skipped.
pub fn parse_metadata(asm: &str) -> Result<Vec<KernelMetadata>> {
    let mut kernels: Vec<KernelMetadata> = Vec::new();
    let mut inside = false;
    for line in asm.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("amdhsa.kernels:") {
            inside = true;
            continue;
        }
        if !inside {
            continue;
        }
        if trimmed.starts_with(".end_amdgpu_metadata") || (!line.starts_with(' ') && !line.is_empty()) {
            inside = false;
            continue;
        }
        let field = if let Some(rest) = line.strip_prefix("  - ") {
            kernels.push(KernelMetadata { max_flat_workgroup_size: 1024, ..Default::default() });
            rest
        } else if let Some(rest) = line.strip_prefix("    ") {
            if rest.starts_with(' ') || rest.starts_with('-') {
                continue;
            }
            rest
        } else {
            continue;
        };
        let Some(k) = kernels.last_mut() else { continue };
        let Some((key, value)) = field.split_once(':') else { continue };
        let value = value.trim();
        let num = || value.parse::<u32>().with_context(|| format!("metadata {key}: {value:?} is not a number"));
        match key.trim() {
            ".name" => k.name = value.to_string(),
            ".vgpr_count" => k.vgpr_count = num()?,
            ".agpr_count" => k.agpr_count = num()?,
            ".sgpr_count" => k.sgpr_count = num()?,
            ".group_segment_fixed_size" => k.group_segment_fixed_size = num()?,
            ".private_segment_fixed_size" => k.private_segment_fixed_size = num()?,
            ".vgpr_spill_count" => k.vgpr_spill_count = num()?,
            ".sgpr_spill_count" => k.sgpr_spill_count = num()?,
            ".max_flat_workgroup_size" => k.max_flat_workgroup_size = num()?,
            _ => {}
        }
    }
    ensure!(!kernels.is_empty(), "no amdhsa.kernels metadata in the assembly");
    ensure!(kernels.iter().all(|k| !k.name.is_empty()), "a kernel in the metadata has no .name");
    Ok(kernels)
}

fn align(v: u32, granule: u32) -> u32 {
    v.div_ceil(granule) * granule
}

/// Estimated waves per SIMD on CDNA2/CDNA3 (gfx90a, gfx94x): the minimum of the limits set by
/// registers (512 unified VGPR+AGPR per lane, granule 8; 800 SGPRs, granule 16), by LDS (64 KiB
/// per CU of 4 SIMDs, workgroups of `workgroup` threads) and the hardware's 8.
pub fn waves_per_simd(vgprs: u32, agprs: u32, sgprs: u32, lds_bytes: u32, workgroup: u32) -> u32 {
    const MAX_WAVES: u32 = 8;
    let unified = if agprs > 0 { align(vgprs.max(1), 4) + agprs } else { vgprs.max(1) };
    let by_vgpr = 512 / align(unified, 8);
    let by_sgpr = 800 / align(sgprs.max(1), 16);
    let by_lds = match 65536u32.checked_div(lds_bytes) {
        None => MAX_WAVES,
        Some(groups_per_cu) => groups_per_cu * workgroup.div_ceil(64).max(1) / 4,
    };
    by_vgpr.min(by_sgpr).min(by_lds).min(MAX_WAVES)
}

/// Compiles `source` for every (architecture, variant) pair, `jobs` hipcc processes at a time, and
/// returns every kernel's usage, ordered by kernel, radius, flavour and architecture.
pub fn report(source: &str, variants: &[Variant], archs: &[&str], jobs: usize) -> Result<Vec<KernelUsage>> {
    let hipcc = find_hipcc()?;
    // One directory per call: concurrent reports in one process must not remove each other's files.
    static CALLS: AtomicUsize = AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("seismic-hip-aot-{}-{call}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let file = dir.join("kernels.hip");
    std::fs::write(&file, source).with_context(|| format!("cannot write {}", file.display()))?;
    let work: Vec<(&str, &Variant)> = archs.iter().flat_map(|a| variants.iter().map(move |v| (*a, v))).collect();
    let pool = rayon::ThreadPoolBuilder::new().num_threads(jobs.max(1)).build()?;
    let results: Vec<Result<Vec<KernelUsage>>> = pool.install(|| {
        work.par_iter()
            .map(|(arch, v)| {
                let asm = compile_to_assembly(&hipcc, &file, arch, &v.options)?;
                let meta = parse_metadata(&asm).with_context(|| format!("{arch} {}", v.options.join(" ")))?;
                Ok(meta
                    .into_iter()
                    .map(|m| {
                        let dynamic = match m.name.as_str() {
                            "fused_step" => v.fused_dynamic_lds,
                            _ => 0,
                        };
                        (m, dynamic)
                    })
                    .map(|(m, dynamic)| KernelUsage {
                        waves_per_simd: waves_per_simd(
                            m.vgpr_count,
                            m.agpr_count,
                            m.sgpr_count,
                            m.group_segment_fixed_size + dynamic,
                            m.max_flat_workgroup_size,
                        ),
                        kernel: m.name,
                        radius: v.radius,
                        flavour: v.flavour.clone(),
                        arch: arch.to_string(),
                        vgprs: m.vgpr_count,
                        agprs: m.agpr_count,
                        sgprs: m.sgpr_count,
                        lds_bytes: m.group_segment_fixed_size + dynamic,
                        scratch_bytes: m.private_segment_fixed_size,
                        vgpr_spills: m.vgpr_spill_count,
                        sgpr_spills: m.sgpr_spill_count,
                        max_workgroup: m.max_flat_workgroup_size,
                    })
                    .collect())
            })
            .collect()
    });
    let _ = std::fs::remove_dir_all(&dir);
    let mut all = Vec::new();
    for r in results {
        all.extend(r?);
    }
    all.sort_by(|a, b| (&a.kernel, a.radius, &a.flavour, &a.arch).cmp(&(&b.kernel, b.radius, &b.flavour, &b.arch)));
    Ok(all)
}

fn same_numbers(a: &KernelUsage, b: &KernelUsage) -> bool {
    (a.vgprs, a.agprs, a.sgprs, a.lds_bytes, a.scratch_bytes, a.vgpr_spills, a.sgpr_spills, a.waves_per_simd)
        == (b.vgprs, b.agprs, b.sgprs, b.lds_bytes, b.scratch_bytes, b.vgpr_spills, b.sgpr_spills, b.waves_per_simd)
}

/// One row of the table: a kernel and flavour over a run of radii, with one usage per architecture.
struct Row<'a> {
    kernel: &'a str,
    flavour: String,
    radii: (usize, usize),
    per_arch: Vec<Option<&'a KernelUsage>>,
}

/// One radius's usages, one per architecture (None where that architecture was not compiled).
type RadiusCells<'a> = (usize, Vec<Option<&'a KernelUsage>>);

fn same_row(a: &[Option<&KernelUsage>], b: &[Option<&KernelUsage>]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| match (x, y) {
            (Some(x), Some(y)) => same_numbers(x, y),
            (None, None) => true,
            _ => false,
        })
}

/// Renders the usages as a markdown table, kernels in the order of `order`, one column group per
/// architecture. Flavours with identical numbers for a kernel and R are shown once as "any"; runs
/// of radii with identical numbers share a row. AGPRs, when used, appear as "+Na" after the VGPRs.
pub fn markdown_table(usages: &[KernelUsage], order: &[&str]) -> String {
    let rank = |k: &str| order.iter().position(|o| *o == k).unwrap_or(order.len());
    let mut archs: Vec<&str> = Vec::new();
    let mut kernels: Vec<&str> = Vec::new();
    let mut flavours: Vec<&str> = Vec::new();
    let mut radii: Vec<usize> = Vec::new();
    for u in usages {
        for (list, v) in
            [(&mut archs, u.arch.as_str()), (&mut kernels, u.kernel.as_str()), (&mut flavours, u.flavour.as_str())]
        {
            if !list.contains(&v) {
                list.push(v);
            }
        }
        if !radii.contains(&u.radius) {
            radii.push(u.radius);
        }
    }
    kernels.sort_by_key(|k| (rank(k), *k));
    radii.sort_unstable();
    let find = |k: &str, f: &str, r: usize, a: &str| {
        usages.iter().find(|u| (u.kernel.as_str(), u.flavour.as_str(), u.radius, u.arch.as_str()) == (k, f, r, a))
    };
    let mut rows: Vec<Row> = Vec::new();
    for &k in &kernels {
        // Per radius: either one "any" entry or one entry per flavour.
        let mut per_flavour: Vec<(String, Vec<RadiusCells>)> = Vec::new();
        for &r in &radii {
            let cells: Vec<(&str, Vec<Option<&KernelUsage>>)> = flavours
                .iter()
                .map(|&f| (f, archs.iter().map(|&a| find(k, f, r, a)).collect::<Vec<_>>()))
                .filter(|(_, c)| c.iter().any(Option::is_some))
                .collect();
            if cells.is_empty() {
                continue;
            }
            let collapse = cells.len() > 1 && cells.iter().all(|(_, c)| same_row(c, &cells[0].1));
            let entries = if collapse { vec![("any", cells[0].1.clone())] } else { cells };
            for (f, c) in entries {
                match per_flavour.iter_mut().find(|(name, _)| name == f) {
                    Some((_, list)) => list.push((r, c)),
                    None => per_flavour.push((f.to_string(), vec![(r, c)])),
                }
            }
        }
        per_flavour.sort_by_key(|(f, list)| (list[0].0, flavours.iter().position(|x| x == f)));
        for (f, list) in per_flavour {
            for (r, c) in list {
                if let Some(last) = rows.last_mut()
                    && last.kernel == k
                    && last.flavour == f
                    && last.radii.1 + 1 == r
                    && same_row(&last.per_arch, &c)
                {
                    last.radii.1 = r;
                    continue;
                }
                rows.push(Row { kernel: k, flavour: f.clone(), radii: (r, r), per_arch: c });
            }
        }
    }
    let mut s = String::from("| kernel | R | boundary | LDS bytes |");
    let mut rule = String::from("|---|---|---|---:|");
    for a in &archs {
        let _ = write!(s, " {a} VGPRs | {a} SGPRs | {a} scratch B | {a} spills | {a} waves/SIMD |");
        rule.push_str("---:|---:|---:|---:|---:|");
    }
    s.push('\n');
    s.push_str(&rule);
    s.push('\n');
    for row in &rows {
        let radii = if row.radii.0 == row.radii.1 {
            row.radii.0.to_string()
        } else {
            format!("{}-{}", row.radii.0, row.radii.1)
        };
        let lds = row.per_arch.iter().flatten().map(|u| u.lds_bytes).max().unwrap_or(0);
        let _ = write!(s, "| {} | {} | {} | {} |", row.kernel, radii, row.flavour, lds);
        for u in &row.per_arch {
            match u {
                Some(u) => {
                    let agprs = if u.agprs > 0 { format!("+{}a", u.agprs) } else { String::new() };
                    let _ = write!(
                        s,
                        " {}{agprs} | {} | {} | {} | {} |",
                        u.vgprs,
                        u.sgprs,
                        u.scratch_bytes,
                        u.vgpr_spills + u.sgpr_spills,
                        u.waves_per_simd
                    );
                }
                None => s.push_str(" - | - | - | - | - |"),
            }
        }
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\t.text\n\t.amdgpu_metadata\n---\namdhsa.kernels:\n  - .agpr_count:     4\n    .args:\n      - .address_space:  global\n        .name:           arg_name\n        .offset:         0\n        .size:           8\n    .group_segment_fixed_size: 17408\n    .max_flat_workgroup_size: 256\n    .name:           fused_step\n    .private_segment_fixed_size: 16\n    .sgpr_count:     61\n    .sgpr_spill_count: 2\n    .vgpr_count:     114\n    .vgpr_spill_count: 3\n  - .agpr_count:     0\n    .args:           []\n    .group_segment_fixed_size: 0\n    .name:           update\n    .private_segment_fixed_size: 0\n    .sgpr_count:     20\n    .sgpr_spill_count: 0\n    .vgpr_count:     27\n    .vgpr_spill_count: 0\namdhsa.target:   amdgcn-amd-amdhsa--gfx90a\namdhsa.version:\n  - 1\n  - 1\n...\n\t.end_amdgpu_metadata\n";

    #[test]
    fn parses_kernel_level_fields_and_skips_arguments() {
        let k = parse_metadata(SAMPLE).unwrap();
        assert_eq!(k.len(), 2);
        assert_eq!(k[0].name, "fused_step");
        assert_eq!(
            (k[0].vgpr_count, k[0].agpr_count, k[0].sgpr_count, k[0].group_segment_fixed_size),
            (114, 4, 61, 17408)
        );
        assert_eq!((k[0].private_segment_fixed_size, k[0].vgpr_spill_count, k[0].sgpr_spill_count), (16, 3, 2));
        assert_eq!(k[0].max_flat_workgroup_size, 256);
        assert_eq!(k[1].name, "update");
        assert_eq!(k[1].max_flat_workgroup_size, 1024, "default launch bound when none is declared");
        assert_eq!((k[1].vgpr_count, k[1].sgpr_count), (27, 20));
    }

    #[test]
    fn missing_metadata_is_an_error() {
        assert!(parse_metadata("\t.text\n").is_err());
    }

    #[test]
    fn occupancy_limits() {
        // 114 VGPRs -> 120 -> 4 waves; 17408 B LDS, 256-thread groups -> 3 groups per CU -> 3 waves.
        assert_eq!(waves_per_simd(114, 0, 61, 0, 256), 4);
        assert_eq!(waves_per_simd(114, 0, 61, 17408, 256), 3);
        assert_eq!(waves_per_simd(24, 0, 20, 0, 256), 8);
        assert_eq!(waves_per_simd(256, 0, 20, 0, 256), 2);
        // AGPRs share the file: 128 + 128 = 256 -> 2 waves.
        assert_eq!(waves_per_simd(128, 128, 20, 0, 256), 2);
        // SGPR bound: 102 -> 112 -> 7 waves.
        assert_eq!(waves_per_simd(16, 0, 102, 0, 256), 7);
    }

    #[test]
    fn table_merges_identical_radii_and_flavours() {
        let u = |r: usize, v: u32| KernelUsage {
            kernel: "update".into(),
            radius: r,
            flavour: "none".into(),
            arch: "gfx90a".into(),
            vgprs: v,
            agprs: 0,
            sgprs: 20,
            lds_bytes: 0,
            scratch_bytes: 0,
            vgpr_spills: 0,
            sgpr_spills: 0,
            max_workgroup: 256,
            waves_per_simd: 8,
        };
        let t = markdown_table(&[u(1, 27), u(2, 27), u(3, 27), u(4, 40)], &["update"]);
        assert!(t.contains("| update | 1-3 | none | 0 | 27 | 20 | 0 | 0 | 8 |"), "{t}");
        assert!(t.contains("| update | 4 | none | 0 | 40 | 20 | 0 | 0 | 8 |"), "{t}");
        assert_eq!(t.lines().count(), 4, "{t}");
        let sponge = |r: usize, v: u32| KernelUsage { flavour: "sponge".into(), ..u(r, v) };
        let t = markdown_table(&[u(1, 27), sponge(1, 27), u(2, 27), sponge(2, 30)], &["update"]);
        assert!(t.contains("| update | 1 | any | 0 | 27 |"), "{t}");
        assert!(t.contains("| update | 2 | none | 0 | 27 |"), "{t}");
        assert!(t.contains("| update | 2 | sponge | 0 | 30 |"), "{t}");
        assert_eq!(t.lines().count(), 5, "{t}");
        // Two architectures side by side; a row merges only when both agree.
        let other = |r: usize, v: u32| KernelUsage { arch: "gfx940".into(), ..u(r, v) };
        let t = markdown_table(&[u(1, 27), other(1, 25), u(2, 27), other(2, 26)], &["update"]);
        assert!(t.contains("gfx90a VGPRs") && t.contains("gfx940 VGPRs"), "{t}");
        assert!(t.contains("| update | 1 | none | 0 | 27 | 20 | 0 | 0 | 8 | 25 | 20 | 0 | 0 | 8 |"), "{t}");
        assert_eq!(t.lines().count(), 4, "{t}");
    }
}
