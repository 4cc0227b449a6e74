//! Build script: only the `hip` feature needs it. With that feature on, it finds the ROCm headers
//! (ROCM_PATH, then /opt/rocm, then /usr), runs bindgen over hip_runtime_api.h and hiprtc.h into
//! $OUT_DIR/hip_sys.rs, and links amdhip64 (plus hiprtc where ROCm ships it as its own library).
//! Without the feature it does nothing, so a plain build needs nothing of HIP.

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rustc-check-cfg=cfg(hip_props_r0600)");
    if std::env::var_os("CARGO_FEATURE_HIP").is_some() {
        #[cfg(feature = "hip")]
        hip::generate();
    }
}

#[cfg(feature = "hip")]
mod hip {
    use std::env;
    use std::path::{Path, PathBuf};

    /// The ROCm prefix: the first of ROCM_PATH, /opt/rocm, /usr that has include/hip/hip_runtime_api.h.
    fn rocm_prefix() -> PathBuf {
        println!("cargo::rerun-if-env-changed=ROCM_PATH");
        let mut tried = Vec::new();
        let candidates = env::var_os("ROCM_PATH")
            .map(PathBuf::from)
            .into_iter()
            .chain([PathBuf::from("/opt/rocm"), PathBuf::from("/usr")]);
        for prefix in candidates {
            let header = prefix.join("include/hip/hip_runtime_api.h");
            if header.is_file() {
                return prefix;
            }
            tried.push(header.display().to_string());
        }
        panic!(
            "feature `hip`: no HIP headers found (tried {}). Install ROCm or Debian's libamdhip64-dev, \
             or set ROCM_PATH to the ROCm prefix.",
            tried.join(", ")
        );
    }

    /// Directories that may hold libamdhip64.so under a prefix (ROCm uses lib/, Debian a multiarch dir).
    fn library_dirs(prefix: &Path) -> Vec<PathBuf> {
        let mut dirs = vec![prefix.join("lib"), prefix.join("lib64")];
        if let Ok(arch) = env::var("CARGO_CFG_TARGET_ARCH") {
            let os = env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
            let env_abi = env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
            dirs.push(prefix.join(format!("lib/{arch}-{os}-{env_abi}")));
        }
        dirs.into_iter().filter(|d| d.is_dir()).collect()
    }

    fn has_library(dirs: &[PathBuf], name: &str) -> Option<PathBuf> {
        dirs.iter().find(|d| d.join(format!("lib{name}.so")).exists()).cloned()
    }

    pub fn generate() {
        let prefix = rocm_prefix();
        let include = prefix.join("include");
        let runtime_header = include.join("hip/hip_runtime_api.h");
        let rtc_header = include.join("hip/hiprtc.h");
        println!("cargo::rerun-if-changed={}", runtime_header.display());
        println!("cargo::rerun-if-changed={}", rtc_header.display());

        let dirs = library_dirs(&prefix);
        let Some(hip_dir) = has_library(&dirs, "amdhip64") else {
            panic!("feature `hip`: libamdhip64.so not found under {} (looked in {:?})", prefix.display(), dirs);
        };
        println!("cargo::rustc-link-search=native={}", hip_dir.display());
        println!("cargo::rustc-link-lib=dylib=amdhip64");
        // ROCm >= 5.3 moved hipRTC into libhiprtc; older ROCm (Debian 12's 5.2) keeps it in amdhip64.
        if let Some(rtc_dir) = has_library(&dirs, "hiprtc") {
            println!("cargo::rustc-link-search=native={}", rtc_dir.display());
            println!("cargo::rustc-link-lib=dylib=hiprtc");
        }

        // ROCm 6 renamed hipDeviceProp_t / hipGetDeviceProperties to *R0600 behind macros.
        let runtime_text = std::fs::read_to_string(&runtime_header).unwrap_or_default();
        if runtime_text.contains("hipGetDevicePropertiesR0600") {
            println!("cargo::rustc-cfg=hip_props_r0600");
        }

        let bindings = bindgen::Builder::default()
            .header_contents("seismic_hip_wrapper.h", "#include <hip/hip_runtime_api.h>\n#include <hip/hiprtc.h>\n")
            .clang_arg(format!("-I{}", include.display()))
            .clang_arg("-D__HIP_PLATFORM_AMD__")
            .clang_arg("-D__HIP_PLATFORM_HCC__")
            .allowlist_function("hip.*")
            .allowlist_type("hip.*")
            .allowlist_var("hip.*")
            .allowlist_var("HIP.*")
            .default_enum_style(bindgen::EnumVariation::NewType { is_bitfield: false, is_global: false })
            .derive_default(true)
            .layout_tests(false)
            .rust_target(bindgen::RustTarget::stable(85, 0).expect("a known Rust target"))
            .rust_edition(bindgen::RustEdition::Edition2024)
            .generate()
            .unwrap_or_else(|e| panic!("feature `hip`: bindgen failed on {}: {e}", runtime_header.display()));
        let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("hip_sys.rs");
        bindings.write_to_file(&out).unwrap_or_else(|e| panic!("feature `hip`: cannot write {}: {e}", out.display()));
    }
}
