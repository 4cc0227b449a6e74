//! The MI-series static check: every step-module kernel for R <= 4 is compiled ahead of time with
//! hipcc for gfx90a and gfx940, and the test fails if any of them spills registers (or uses scratch
//! memory), or if the metadata is missing a kernel. No AMD GPU is needed; the full R = 1..8 table
//! is printed by tools/hip-static-report.
#![cfg(feature = "hip")]

use seismic_run::backend::gpu::hip::aot;

#[test]
fn no_register_spills_for_radius_up_to_4_on_gfx90a_and_gfx940() {
    let variants: Vec<aot::Variant> = aot::step_variants().into_iter().filter(|v| v.radius <= 4).collect();
    assert_eq!(variants.len(), 8, "R = 1..4, without and with the sponge");
    let jobs = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2);
    let usages = aot::report(&aot::step_source(), &variants, &aot::REPORT_ARCHS, jobs).expect("hipcc compiles");
    for arch in aot::REPORT_ARCHS {
        for v in &variants {
            for k in v.kernels() {
                let found = usages
                    .iter()
                    .find(|u| u.arch == arch && u.radius == v.radius && u.flavour == v.flavour && u.kernel == k);
                let u = found.unwrap_or_else(|| panic!("{k} missing for {arch} R={} {}", v.radius, v.flavour));
                assert!(u.vgprs > 0 && u.sgprs > 0, "{k} {arch}: implausible register counts {u:?}");
            }
        }
    }
    let spilling: Vec<String> = usages
        .iter()
        .filter(|u| u.spills())
        .map(|u| {
            format!(
                "{} R={} {} {}: {} VGPR / {} SGPR spills, {} scratch bytes",
                u.kernel, u.radius, u.flavour, u.arch, u.vgpr_spills, u.sgpr_spills, u.scratch_bytes
            )
        })
        .collect();
    println!("{}", aot::markdown_table(&usages, &aot::KERNEL_ORDER));
    assert!(spilling.is_empty(), "register spills for R <= 4:\n{}", spilling.join("\n"));
    // The interior kernels must keep the LDS tile they were designed around.
    let fused = usages.iter().find(|u| u.kernel == "fused_step").expect("fused_step");
    assert!(fused.lds_bytes > 0, "fused_step uses no LDS: {fused:?}");
}

#[test]
fn the_check_sees_scratch_use_in_real_hipcc_output() {
    // A dynamically indexed private array lives in scratch memory: the detector must flag it, so a
    // clean report above means something.
    let source = r#"
extern "C" __global__ __launch_bounds__(256) void uses_scratch(float* p, int k) {
    float a[96];
    for (int i = 0; i < 96; i++) a[i] = p[i * k + threadIdx.x];
    p[threadIdx.x] = a[(k + threadIdx.x) % 96];
}
extern "C" __global__ __launch_bounds__(256) void clean(float* p) { p[threadIdx.x] += 1.0f; }
"#;
    let variant = aot::Variant { radius: 1, flavour: "probe".into(), options: vec![], fused_dynamic_lds: 0 };
    let usages = aot::report(source, &[variant], &["gfx90a"], 1).expect("hipcc compiles the probe");
    let by_name = |n: &str| usages.iter().find(|u| u.kernel == n).unwrap_or_else(|| panic!("{n} missing"));
    assert!(by_name("uses_scratch").spills(), "{:?}", by_name("uses_scratch"));
    assert!(!by_name("clean").spills(), "{:?}", by_name("clean"));
}

#[test]
fn kernels_are_compiled_without_fma_contraction_like_the_cpu_reference() {
    // The backend's flags keep a*b+c as a multiply and an add:
    // the same rounding as the CPU reference and the CUDA path.
    let hipcc = aot::find_hipcc().expect("hipcc");
    let dir = std::env::temp_dir().join(format!("seismic-hip-fma-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("axpy.hip");
    let kernel = "extern \"C\" __global__ void axpy(const float* a, const float* b, float* c) {\n\
                  int i = threadIdx.x; c[i] = a[i] * b[i] + c[i]; }\n";
    std::fs::write(&file, kernel).unwrap();
    let asm = aot::compile_to_assembly(&hipcc, &file, "gfx90a", &[]).expect("hipcc compiles axpy");
    let _ = std::fs::remove_dir_all(&dir);
    let fused = asm.lines().filter(|l| l.contains("v_fma") || l.contains("v_mac") || l.contains("v_mad")).count();
    assert_eq!(fused, 0, "{fused} fused multiply-adds in:\n{asm}");
    assert!(asm.contains("v_mul_f32"), "a separate multiply expected:\n{asm}");
}
