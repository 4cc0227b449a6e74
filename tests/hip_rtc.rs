//! hipRTC, the HIP backend's run-time compiler, on the real kernels: every module a run compiles is
//! built for gfx90a (MI200) through the same wrapper the backend uses, with no GPU present. Fails if
//! hipRTC rejects a kernel or returns something that is not an AMDGPU code object holding the
//! kernels. The launch itself needs an AMD GPU and is only in the ignored test at the end.
#![cfg(feature = "hip")]

use seismic_run::backend::gpu::hip::{self, aot, result, safe};
use seismic_run::backend::gpu::{Tuning, sources};

/// ELF, 64-bit, little-endian, e_machine EM_AMDGPU (0xe0).
fn assert_amdgpu_code_object(code: &[u8], kernels: &[&str], what: &str) {
    assert!(code.len() > 1024, "{what}: code object of only {} bytes", code.len());
    assert_eq!(&code[..4], b"\x7fELF", "{what}: not an ELF file");
    assert_eq!(code[4], 2, "{what}: not a 64-bit ELF");
    assert_eq!(u16::from_le_bytes([code[18], code[19]]), 0xe0, "{what}: ELF machine is not AMDGPU");
    for k in kernels {
        let symbol = format!("{k}.kd");
        assert!(
            code.windows(symbol.len()).any(|w| w == symbol.as_bytes()),
            "{what}: no kernel descriptor {symbol} in the code object"
        );
    }
}

#[test]
fn hiprtc_reports_a_version() {
    let (major, minor) = result::rtc_version().expect("hiprtcVersion");
    assert!(major >= 4, "hipRTC {major}.{minor}");
}

#[test]
fn hiprtc_compiles_every_step_module_variant_for_gfx90a() {
    let source = aot::step_source();
    for v in aot::step_variants() {
        let what = format!("step module R={} {} ({})", v.radius, v.flavour, v.options.join(" "));
        let code = hip::compile_for("gfx90a", &source, "seismic_kernels.cu", &v.options)
            .unwrap_or_else(|e| panic!("{what}: hipRTC failed: {e}"));
        assert_amdgpu_code_object(&code, &v.kernels(), &what);
    }
}

/// The f16 step (`run.precision = "f16"`: f16 storage through `_Float16` conversions) builds for
/// gfx90a at every radius, with and without the sponge.
#[test]
fn hiprtc_compiles_the_f16_step_for_gfx90a() {
    let source = aot::half_step_source();
    for v in aot::half_step_variants() {
        let what = format!("f16 step module R={} {} ({})", v.radius, v.flavour, v.options.join(" "));
        let code = hip::compile_for("gfx90a", &source, "seismic_kernels.cu", &v.options)
            .unwrap_or_else(|e| panic!("{what}: hipRTC failed: {e}"));
        assert_amdgpu_code_object(&code, &aot::HALF_KERNELS, &what);
    }
}

/// The 2D grid's module (kernels/plane.cu beside the free surface, taps, sections and the blow-up
/// check) builds for gfx90a at every radius, with and without the sponge, as a run assembles it.
#[test]
fn hiprtc_compiles_the_2d_step_for_gfx90a() {
    use seismic_run::backend::gpu::plane::plane_options;
    use seismic_run::boundary::BoundaryDefines;
    let source = sources::assemble(&sources::PLANE_STEP);
    for radius in 1..=8 {
        for boundary in BoundaryDefines::VARIANTS {
            let options = plane_options(radius, boundary);
            let what = format!("2D step module R={radius} ({})", options.join(" "));
            let code = hip::compile_for("gfx90a", &source, "seismic_kernels.cu", &options)
                .unwrap_or_else(|e| panic!("{what}: hipRTC failed: {e}"));
            assert_amdgpu_code_object(
                &code,
                &[
                    "plane_step",
                    "plane_step_density",
                    "plane_layers",
                    "free_surface",
                    "inject_source",
                    "record_receivers",
                ],
                &what,
            );
        }
    }
}

#[test]
fn hiprtc_compiles_the_benchmark_modules_for_gfx90a() {
    let fused = sources::assemble(&[sources::FUSED]);
    for radius in [1, 4, 8] {
        let code = hip::compile_for("gfx90a", &fused, "laplacian.cu", &aot::laplacian_options(radius))
            .unwrap_or_else(|e| panic!("Laplacian-only R={radius}: {e}"));
        assert_amdgpu_code_object(&code, &["fused_step"], "Laplacian-only fused kernel");
    }
    let stream = sources::assemble(&[sources::STREAM]);
    let code = hip::compile_for("gfx90a", &stream, "stream.cu", &aot::stream_options()).expect("stream module");
    assert_amdgpu_code_object(
        &code,
        &["stream_copy", "stream_3r1w", "stream_fill", "stream_copy_x4", "stream_3r1w_x4"],
        "stream module",
    );
}

#[test]
fn hiprtc_compiles_the_fused_kernel_tuning_knobs() {
    // The ring depth (a shared-memory ring; plain copies on AMD) and the register-cap knob.
    let source = aot::step_source();
    let base = aot::step_variants().into_iter().find(|v| v.radius == 4).expect("R = 4").options;
    for (from, to) in [("-DSTAGES=", "-DSTAGES=2"), ("-DMIN_BLOCKS=", "-DMIN_BLOCKS=1")] {
        let options: Vec<String> =
            base.iter().map(|o| if o.starts_with(from) { to.to_string() } else { o.clone() }).collect();
        assert!(options.iter().any(|o| o == to), "{from} is no longer a kernel option: {options:?}");
        let code =
            hip::compile_for("gfx90a", &source, "seismic_kernels.cu", &options).unwrap_or_else(|e| panic!("{to}: {e}"));
        assert_amdgpu_code_object(&code, &["fused_step"], to);
    }
}

#[test]
fn hiprtc_compiles_the_grid_order_tile_shape_and_tile_ring_variants() {
    // Grid-index orders (zigzag, y tiles first, banded), 16-thread-wide blocks, fused_ring.cu (the whole tile through the ring)
    // for one and two rows per thread, and the halos through fused.cu's ring, in the step module as the run-time path
    // assembles it.
    let base = aot::step_variants().into_iter().find(|v| v.radius == 4).expect("R = 4").options;
    let set = |changes: &[(&str, &str)]| -> Vec<String> {
        base.iter()
            .map(|o| changes.iter().find(|(k, _)| o.starts_with(k)).map(|(_, v)| v.to_string()).unwrap_or(o.clone()))
            .collect()
    };
    let plain = aot::step_source();
    let ring = sources::assemble(&sources::step(&Tuning { tile_ring: 1, ..hip::tuning(4) }));
    let cases: [(&str, &String, Vec<String>); 8] = [
        ("order 1", &plain, set(&[("-DORDER=", "-DORDER=1")])),
        ("order 2", &plain, set(&[("-DORDER=", "-DORDER=2")])),
        ("order 3", &plain, set(&[("-DORDER=", "-DORDER=3")])),
        ("block_x 16", &plain, set(&[("-DBLOCK_X=", "-DBLOCK_X=16"), ("-DBLOCK_Y=", "-DBLOCK_Y=12")])),
        ("tile ring", &ring, set(&[("-DSTAGES=", "-DSTAGES=2")])),
        (
            "tile ring, 2 rows, order 1",
            &ring,
            set(&[("-DSTAGES=", "-DSTAGES=2"), ("-DROWS=", "-DROWS=2"), ("-DORDER=", "-DORDER=1")]),
        ),
        ("tile ring, order 3", &ring, set(&[("-DSTAGES=", "-DSTAGES=2"), ("-DORDER=", "-DORDER=3")])),
        (
            "halos through the ring, 2 rows",
            &plain,
            set(&[("-DSTAGES=", "-DSTAGES=2"), ("-DHALO_RING=", "-DHALO_RING=1"), ("-DROWS=", "-DROWS=2")]),
        ),
    ];
    assert!(base.iter().any(|o| o.starts_with("-DHALO_RING=")), "HALO_RING is no longer a kernel option");
    for (what, source, options) in cases {
        let code = hip::compile_for("gfx90a", source, "seismic_kernels.cu", &options)
            .unwrap_or_else(|e| panic!("{what} ({}): {e}", options.join(" ")));
        assert_amdgpu_code_object(&code, &aot::KERNEL_ORDER, what);
    }
}

#[test]
fn hiprtc_compiles_the_step_module_for_gfx940_or_refuses_cleanly() {
    let source = aot::step_source();
    let version = result::runtime_version().expect("hipRuntimeGetVersion");
    if version / 100_000 <= 502 {
        // HIP 5.2's hipRTC aborts the process for gfx940; the wrapper must refuse before that.
        let v = &aot::step_variants()[0];
        let err = hip::compile_for("gfx940", &source, "seismic_kernels.cu", &v.options)
            .expect_err("HIP 5.2's hipRTC cannot compile for gfx940");
        assert!(err.to_string().contains("gfx940"), "{err}");
        return;
    }
    for v in aot::step_variants().into_iter().filter(|v| v.radius == 4 || v.radius == 8) {
        let what = format!("gfx940 R={} {}", v.radius, v.flavour);
        let code = hip::compile_for("gfx940", &source, "seismic_kernels.cu", &v.options)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_amdgpu_code_object(&code, &v.kernels(), &what);
    }
}

#[test]
fn hiprtc_compiles_for_a_full_gcn_arch_name() {
    // Devices report target features too ("gfx90a:sramecc+:xnack-"); the backend passes them on.
    let v = &aot::step_variants()[0];
    let code = hip::compile_for("gfx90a:sramecc+:xnack-", &aot::step_source(), "seismic_kernels.cu", &v.options)
        .expect("hipRTC with target features");
    assert_amdgpu_code_object(&code, &["fused_step"], "gfx90a:sramecc+:xnack-");
}

#[test]
fn hiprtc_compile_errors_carry_the_compiler_log() {
    let bad = "extern \"C\" __global__ void broken(float* p) { p[0] = undeclared_name; }";
    let err = safe::compile(bad, "broken.cu", &hip::compiler_flags("gfx90a"))
        .expect_err("an undeclared name must not compile");
    assert!(err.log.contains("undeclared_name"), "log does not name the error: {err}");
    assert!(err.to_string().contains("hiprtcCompileProgram"), "{err}");
}

#[test]
fn opening_the_backend_without_an_amd_gpu_is_a_clear_error() {
    if matches!(result::device_count(), Ok(n) if n > 0) {
        // With a device the same call opens it.
        seismic_run::backend::gpu::hip::HipRuntime::new(0).expect("open the AMD GPU that is present");
        return;
    }
    let err = match seismic_run::backend::gpu::hip::HipRuntime::new(0) {
        Ok(_) => panic!("opened a HIP device although none is present"),
        Err(e) => format!("{e:#}"),
    };
    assert!(err.contains("HIP device") && err.contains("hipGetDeviceCount"), "unclear error: {err}");
}

#[test]
#[ignore = "needs an AMD GPU"]
fn module_loads_and_every_kernel_resolves_on_the_device() {
    use seismic_run::backend::gpu::GpuRuntime;
    let rt = seismic_run::backend::gpu::hip::HipRuntime::new(0).expect("a HIP device");
    let v = aot::step_variants().into_iter().find(|v| v.radius == 4 && v.flavour == "none").expect("R = 4");
    let code = rt.compile(&aot::step_source(), "seismic_kernels.cu", &v.options).expect("compile for the device");
    let module = rt.load_module(&code).expect("hipModuleLoadData");
    for k in v.kernels() {
        rt.function(&module, k).unwrap_or_else(|e| panic!("{k}: {e}"));
    }
}

/// llvm-objdump with the AMDGPU target (Debian's hipcc depends on llvm-15; ROCm ships its own).
fn llvm_objdump() -> Option<std::path::PathBuf> {
    let mut candidates = Vec::new();
    if let Some(r) = std::env::var_os("ROCM_PATH") {
        candidates.push(std::path::PathBuf::from(r).join("llvm/bin/llvm-objdump"));
    }
    candidates.push("/opt/rocm/llvm/bin/llvm-objdump".into());
    candidates.push("/usr/lib/llvm-15/bin/llvm-objdump".into());
    candidates.into_iter().find(|p| p.is_file())
}

#[test]
fn hiprtc_keeps_multiply_and_add_separate_like_the_cpu_reference() {
    let kernel = "extern \"C\" __global__ void axpy(const float* a, const float* b, float* c) {\n\
                  int i = threadIdx.x; c[i] = a[i] * b[i] + c[i]; }\n";
    let code = hip::compile_for("gfx90a", kernel, "axpy.cu", &[]).expect("hipRTC compiles axpy");
    let objdump = llvm_objdump().expect("llvm-objdump with AMDGPU support (Debian's hipcc depends on llvm-15)");
    let path = std::env::temp_dir().join(format!("seismic-axpy-{}.co", std::process::id()));
    std::fs::write(&path, &code).unwrap();
    let out = std::process::Command::new(&objdump).args(["-d", "--mcpu=gfx90a"]).arg(&path).output().unwrap();
    let _ = std::fs::remove_file(&path);
    let asm = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "llvm-objdump failed: {}", String::from_utf8_lossy(&out.stderr));
    let fused = asm.lines().filter(|l| l.contains("v_fma") || l.contains("v_mac") || l.contains("v_mad")).count();
    assert_eq!(fused, 0, "{fused} fused multiply-adds in:\n{asm}");
    assert!(asm.contains("v_mul_f32"), "a separate multiply expected:\n{asm}");
}
