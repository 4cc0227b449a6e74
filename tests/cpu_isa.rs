//! The CPU step computes the same bits whatever instruction set runs it and however its z-planes
//! are split among threads: every available build (AVX-512, AVX2+FMA, portable) and 1, 2 and 5
//! threads (the 5-thread split puts range ends inside the CPML z layers, where neighbouring
//! ranges exchange phi_z) and y tiles of 1, 7 and all rows (never thinner than the CPML
//! layer, a speed floor) give bit-identical wavefields and traces, with CPML (free surface on and off) and with
//! the sponge.

mod common;

use common::Setup;
use seismic_run::backend::cpu::{CpuSolver, Isa};

fn setup(boundary: &'static str, radius: usize, free_surface: bool) -> Setup {
    Setup {
        shape: [37, 29, 26],
        spacing: 10.0,
        vp: 2000.0,
        radius,
        frequency: 15.0,
        delay: 0.06,
        cfl_safety: 0.8,
        duration: 0.06,
        source: [15, 12, 9],
        receivers: vec![[30, 20, 3], [5, 6, 22]],
        boundary,
        width: 6,
        free_surface,
    }
}

/// Field bits and trace bits after every step of `p`, built and run in a pool of `threads`, in y
/// tiles of about `tile_rows` rows.
fn run(p: &seismic_run::problem::Problem, isa: Isa, threads: usize, tile_rows: usize) -> (Vec<u32>, Vec<u32>) {
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("pool");
    pool.install(|| {
        let mut s = CpuSolver::<f32>::with_isa(p, isa).expect("solver").with_tile_rows(tile_rows);
        for n in 0..p.steps {
            s.advance(n);
        }
        let field = s.field().iter().map(|v| v.to_bits()).collect();
        let traces = s.traces_native().iter().flatten().map(|v| v.to_bits()).collect();
        (field, traces)
    })
}

#[test]
fn every_isa_thread_split_and_tiling_gives_the_same_bits() {
    let isas: Vec<Isa> = [Isa::Avx512, Isa::Avx2Fma, Isa::Portable].into_iter().filter(|i| i.available()).collect();
    for (boundary, radius, free_surface) in [("cpml", 4, true), ("cpml", 3, false), ("sponge", 4, false)] {
        let p = setup(boundary, radius, free_surface).problem();
        assert!(p.steps >= 20, "too few steps: {}", p.steps);
        let (field, traces) = run(&p, Isa::detect(), 2, usize::MAX);
        assert!(field.iter().any(|&b| f32::from_bits(b) != 0.0), "the wave never started");
        for &isa in &isas {
            for (threads, rows) in [(1, usize::MAX), (2, 7), (5, 1)] {
                let (f, t) = run(&p, isa, threads, rows);
                let what = format!(
                    "{boundary} R = {radius}, free surface {free_surface}, {}, {threads} threads, {rows}-row tiles",
                    isa.name()
                );
                assert!(f == field, "{what}: wavefield differs from the {} build", Isa::detect().name());
                assert!(t == traces, "{what}: traces differ");
            }
        }
    }
}

/// The wavefield starts on a page, so the layout's rows (whole multiples of 128 bytes) start on
/// cache lines and the sweep's vectors load whole lines: a plain Vec of this size starts 16 bytes
/// into one (glibc), which cost the AVX-512 interior step 1.2x its time.
#[test]
fn the_wavefield_starts_on_a_page() {
    let p = setup("cpml", 4, false).problem();
    let s = CpuSolver::<f32>::new(&p).expect("solver");
    assert_eq!(s.field().as_ptr() as usize % 4096, 0, "field at {:p}", s.field().as_ptr());
    assert_eq!(s.layout().row(0, 0) % 16, 0, "row 0 of plane 0 is not on a 64-byte line");
}
