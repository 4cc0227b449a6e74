//! The measurement behind the CPML's default profiles (`CpmlTuning::default`, src/boundary.rs):
//! for each layer width, the profile parameters ranked by their worst reflection over the cases
//! (small domain against large domain, tests/common/reflection.rs). A measurement, printed, not
//! asserted: minutes to hours on two cores, depending on the lists.
//!
//! The lists come from the environment, comma-separated, each with a default: `PPW` (points per
//! minimum wavelength, 5,10,15), `RADII` (4), `INCIDENCE` (normal,grazing), `WIDTHS` (8,10,12),
//! `ORDERS` (2,3,4), `REFLECTIONS` (-log10 of the continuous layer's reflection, 3,4,5,6) and
//! `ALPHAS` (alpha_max in units of pi f0, 0.5,1,1.5,2).

mod common;

use common::reflection::{C, Case, Incidence, db, reflections};
use common::run;
use seismic_run::boundary::{Boundary, BoundaryKind, CpmlTuning};
use seismic_run::problem::Problem;

/// The list `name` from the environment, or `default`.
fn list<T: std::str::FromStr>(name: &str, default: &str) -> Vec<T> {
    let text = std::env::var(name).unwrap_or_else(|_| default.into());
    text.split(',').map(|s| s.trim().parse().unwrap_or_else(|_| panic!("{name}: cannot parse {s:?}"))).collect()
}

/// The problem with its CPML's profiles built from `tuning`.
fn retuned(p: &Problem, width: usize, frequency: f64, tuning: CpmlTuning) -> Problem {
    let mut p = p.clone();
    p.boundary = Boundary::tuned(BoundaryKind::Cpml, width, false, p.shape(), p.spacing, C, frequency, p.dt, tuning);
    p
}

#[test]
#[ignore = "measurement, minutes to hours on two cores"]
fn cpml_profiles_ranked_by_worst_reflection() {
    let incidences: Vec<String> = list("INCIDENCE", "normal,grazing");
    let mut cases = Vec::new();
    for points_per_wavelength in list::<f64>("PPW", "5,10,15") {
        for radius in list::<usize>("RADII", "4") {
            for name in &incidences {
                let incidence = if name == "grazing" { Incidence::Grazing } else { Incidence::Normal };
                cases.push(Case { points_per_wavelength, radius, incidence });
            }
        }
    }
    let widths: Vec<usize> = list("WIDTHS", "8,10,12");
    let mut tunings = Vec::new();
    for order in list::<i32>("ORDERS", "2,3,4") {
        for k in list::<f64>("REFLECTIONS", "3,4,5,6") {
            for alpha_factor in list::<f64>("ALPHAS", "0.5,1,1.5,2") {
                tunings.push(CpmlTuning { order, reflection: 10f64.powf(-k), alpha_factor });
            }
        }
    }
    // Per width and tuning: the worst reflection (dB) of each case.
    let mut worst = vec![vec![Vec::new(); tunings.len()]; widths.len()];
    for case in &cases {
        let reference = run::<f32>(&case.large());
        for (w, &width) in widths.iter().enumerate() {
            let small = case.small(width);
            for (t, &tuning) in tunings.iter().enumerate() {
                let traces = run::<f32>(&retuned(&small, width, case.frequency(), tuning));
                let r = reflections(&traces, &reference).into_iter().fold(0.0, f64::max);
                worst[w][t].push(db(r));
            }
        }
        eprintln!("measured {case:?}");
    }
    println!("cases: {cases:?}");
    for (w, &width) in widths.iter().enumerate() {
        let mut ranked: Vec<(f64, usize)> =
            worst[w].iter().enumerate().map(|(t, d)| (d.iter().cloned().fold(f64::MIN, f64::max), t)).collect();
        ranked.sort_by(|a, b| a.0.total_cmp(&b.0));
        for &(overall, t) in ranked.iter().take(6) {
            let tuning = tunings[t];
            let per_case: Vec<String> = worst[w][t].iter().map(|d| format!("{d:.1}")).collect();
            println!(
                "width {width:2}, order {}, reflection 1e-{:.1}, alpha_max {:.2} pi f0: worst {overall:.1} dB [{}]",
                tuning.order,
                -tuning.reflection.log10(),
                tuning.alpha_factor,
                per_case.join(" ")
            );
        }
    }
}
