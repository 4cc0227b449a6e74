//! The kernel ABI, checked without a GPU: every `__global__` of kernels/ takes exactly the
//! parameters its Rust description (`kernel_params!`) lists, in order, with the same names and
//! C++ types, and every described kernel exists.

use super::*;
use crate::backend::gpu::sources;
use std::collections::BTreeMap;

/// (kernel, its parameters as the Rust descriptions give them, element type substituted).
fn described() -> BTreeMap<String, Params> {
    let mut all = BTreeMap::new();
    let mut add = |kernels: &[(&str, &str)], params: &[(&str, &str)], rust: &[&str]| {
        for (&(name, cpp), &ty) in params.iter().zip(rust) {
            assert!(passes_as(ty, cpp), "{kernels:?}: parameter {name}, a Rust {ty}, is no C++ {cpp}");
        }
        for &(kernel, elem) in kernels {
            let list =
                params.iter().map(|&(name, cpp)| (name.to_string(), cpp.replace("T*", &format!("{elem}*")))).collect();
            assert!(all.insert(kernel.to_string(), list).is_none(), "{kernel} described twice");
        }
    };
    macro_rules! add_all {
        ($($t:ty),* $(,)?) => { $(add(<$t>::KERNELS, <$t>::PARAMS, <$t>::RUST_TYPES);)* };
    }
    add_all!(
        FusedStep,
        DensityStep,
        PlaneStep,
        PlaneLayers,
        PassX,
        PassWindowed,
        Update,
        CpmlAxis,
        FreeSurface,
        InjectSource,
        RecordReceivers,
        ExtractSection,
        InsertSection,
        FiniteCheck,
        KeepSource,
        CorrelateImage,
        CorrelateGradient,
        IlluminationMax,
        StackNormalised,
        CpmlTransposedAxis,
        StreamCopy,
        StreamThreeReadOneWrite,
        StreamFill,
        FusedStepHalf,
        CpmlAxisHalf,
        FreeSurfaceHalf,
        InjectSourceHalf,
    );
    all
}

/// Whether a field of Rust type `rust` is passed as a C++ parameter of type `cpp` (same size and
/// meaning: device pointers as 64-bit addresses, a typed one to its own element type, `int` as
/// `i32`, by-value structs as themselves).
fn passes_as(rust: &str, cpp: &str) -> bool {
    if let Some(elem) = rust.strip_prefix("TypedPtr<").and_then(|r| r.strip_suffix('>')) {
        let cpp_elem = match elem.trim() {
            "f32" => "float",
            "f16" => "h16",
            "u64" => "u64",
            _ => return false,
        };
        return cpp.trim_start_matches("const ") == format!("{cpp_elem}*");
    }
    match rust {
        "DevicePtr" => cpp.ends_with('*'),
        "i32" => cpp == "int",
        "f32" => cpp == "float",
        "f64" => cpp == "double",
        "i64" | "u64" | "StencilWeights" | "AxisWeights" | "Layers" => cpp == rust,
        _ => false,
    }
}

/// Every kernel source file as the modules assemble them.
fn kernel_sources() -> Vec<(&'static str, &'static str)> {
    use sources::*;
    vec![
        ("prelude.h", PRELUDE),
        ("layers.h", LAYERS),
        ("fused.cu", FUSED),
        ("fused_ring.cu", FUSED_RING),
        ("fused_half.cu", FUSED_HALF),
        ("density.cu", DENSITY),
        ("plane.cu", PLANE),
        ("pass_x.cu", PASS_X),
        ("pass_y.cu", PASS_Y),
        ("pass_z.cu", PASS_Z),
        ("update.cu", UPDATE),
        ("cpml.cu", CPML),
        ("free_surface.cu", FREE_SURFACE),
        ("sources.cu", SOURCES),
        ("section.cu", SECTION),
        ("stream.cu", STREAM),
        ("finite_check.cu", FINITE_CHECK),
        ("imaging.cu", IMAGING),
        ("cpml_transposed.cu", CPML_TRANSPOSED),
    ]
}

/// The object-like `#define NAME text` macros of the sources, continuation lines joined.
fn defines(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let Some(rest) = line.trim_start().strip_prefix("#define ") else { continue };
        let mut body = rest.to_string();
        while body.trim_end().ends_with('\\') {
            body = body.trim_end().trim_end_matches('\\').to_string();
            body.push(' ');
            body.push_str(lines.next().unwrap_or(""));
        }
        let (name, value) = body.trim().split_once(char::is_whitespace).unwrap_or((body.trim(), ""));
        if !name.contains('(') {
            out.insert(name.to_string(), value.trim().to_string());
        }
    }
    out
}

/// One C++ parameter as (name, type): `RESTRICT` dropped, the `*` on the type.
fn parameter(text: &str) -> (String, String) {
    let spaced = text.replace("RESTRICT", " ").replace('*', " * ");
    let tokens: Vec<&str> = spaced.split_whitespace().collect();
    let (name, ty) = tokens.split_last().expect("a named parameter");
    (name.to_string(), ty.join(" ").replace(" *", "*"))
}

/// A kernel's parameters: (name, C++ type) each.
type Params = Vec<(String, String)>;

/// Every `__global__` function of the sources: its name, file and parameters, `*_PARAMS` expanded.
fn globals() -> Vec<(String, &'static str, Params)> {
    let all: String = kernel_sources().iter().map(|(_, s)| *s).collect::<Vec<_>>().join("\n");
    let defs = defines(&all);
    let mut out = Vec::new();
    for (file, text) in kernel_sources() {
        for (at, _) in text.match_indices("__global__") {
            let rest = &text[at..];
            let void = rest.find(" void ").expect("a kernel returns void") + " void ".len();
            let open = void + rest[void..].find('(').expect("a parameter list");
            let close = open + rest[open..].find(')').expect("the list ends");
            let name = rest[void..open].trim().to_string();
            let mut list = rest[open + 1..close].trim().to_string();
            if let Some(expanded) = defs.get(&list) {
                list = expanded.clone();
            }
            out.push((name, file, list.split(',').map(parameter).collect()));
        }
    }
    out
}

#[test]
fn every_kernel_takes_its_described_parameters() {
    let described = described();
    let found = globals();
    for (name, file, params) in &found {
        let want = described.get(name).unwrap_or_else(|| panic!("{file}: {name} has no kernel_params! description"));
        assert_eq!(params, want, "{file}: {name}'s parameters against its description");
    }
    for name in described.keys() {
        assert!(found.iter().any(|(n, _, _)| n == name), "{name} is described but no kernel of kernels/ defines it");
    }
}

#[test]
fn rust_fields_pass_as_their_cpp_parameters_only() {
    assert!(passes_as("DevicePtr", "const h16*") && passes_as("i32", "int") && passes_as("Layers", "Layers"));
    assert!(!passes_as("i64", "int") && !passes_as("i32", "i64") && !passes_as("DevicePtr", "u64"));
    assert!(passes_as("TypedPtr<f16>", "const h16*") && passes_as("TypedPtr<f32>", "float*"));
    assert!(!passes_as("TypedPtr<f32>", "const h16*") && !passes_as("TypedPtr<f16>", "float*"));
    assert!(!passes_as("TypedPtr<u64>", "u64") && !passes_as("TypedPtr<i32>", "int*"));
}

#[test]
fn the_parameter_parser_reads_types_names_and_pointers() {
    assert_eq!(parameter(" const float *RESTRICT cur"), ("cur".into(), "const float*".into()));
    assert_eq!(parameter("h16* RESTRICT inc"), ("inc".into(), "h16*".into()));
    assert_eq!(parameter("i64 pitch"), ("pitch".into(), "i64".into()));
    assert_eq!(parameter("Layers L"), ("L".into(), "Layers".into()));
    let d = defines("#define A_PARAMS int a, \\\n    float b\n#define F(x) x\n");
    assert_eq!(d.get("A_PARAMS").map(String::as_str), Some("int a,      float b"));
    assert!(!d.contains_key("F(x)"));
}
