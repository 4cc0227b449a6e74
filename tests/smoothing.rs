//! `[model] smoothing`: the sampled model smoothed by a Gaussian on the slowness, its width as
//! stated, a constant model unchanged, a rank's slab as the whole grid's, bad values refused.

use seismic_run::config::Config;
use seismic_run::model;
use std::path::Path;

fn config(grid: &str, model: &str) -> Config {
    let text = format!(
        "[grid]\n{grid}\n[model]\n{model}\n[time]\nsteps = 1\n[source]\nposition = [0.0, 0.0, 0.0]\nfrequency = 10.0\n"
    );
    Config::from_toml(&text).unwrap_or_else(|e| panic!("{e}"))
}

/// Where a monotonic profile `s` (spacing `h`, from z = 0) crosses `level`, linearly interpolated.
fn crossing(s: &[f64], h: f64, level: f64) -> f64 {
    let up = s[s.len() - 1] > s[0];
    let k = s.iter().position(|&v| if up { v >= level } else { v <= level }).unwrap();
    let f = (level - s[k - 1]) / (s[k] - s[k - 1]);
    (k as f64 - 1.0 + f) * h
}

#[test]
fn a_step_smoothed_spreads_over_two_standard_deviations() {
    // A step at 500 m (between points 99 and 100 at 5 m): the slowness's 16-84% transition of a
    // Gaussian of sigma spans 2 sigma, centred on the step.
    for sigma in [30.0, 60.0] {
        let cfg = config(
            "shape = [3, 200]\nspacing = [5.0, 5.0]",
            &format!("kind = \"layered\"\ndepths = [497.5]\nvelocities = [1500.0, 3000.0]\nsmoothing = {sigma}"),
        );
        let m = model::sample(&cfg, Path::new(".")).unwrap();
        let slowness: Vec<f64> = (0..200).map(|k| 1.0 / m.vp[k * 3 + 1] as f64).collect();
        let (top, bottom) = (1.0 / 1500.0, 1.0 / 3000.0);
        assert!((slowness[0] - top).abs() < 1e-12 && (slowness[199] - bottom).abs() < 1e-12, "far from the step");
        let at = |p: f64| crossing(&slowness, 5.0, top + p * (bottom - top));
        let (z16, z50, z84) = (at(0.16), at(0.5), at(0.84));
        assert!(((z84 - z16) - 2.0 * sigma).abs() < 0.02 * sigma, "sigma {sigma}: 16-84% over {} m", z84 - z16);
        assert!((z50 - 497.5).abs() < 0.5, "sigma {sigma}: centred at {z50} m");
        // Every column alike: x is smoothed over equal values.
        assert!((0..200).all(|k| m.vp[k * 3] == m.vp[k * 3 + 1] && m.vp[k * 3 + 2] == m.vp[k * 3 + 1]));
    }
}

#[test]
fn a_constant_model_is_unchanged_bit_for_bit() {
    for vp in [1500.0, 2718.28, 4999.9] {
        let plain =
            config("shape = [9, 7, 8]\nspacing = [10.0, 10.0, 10.0]", &format!("kind = \"constant\"\nvp = {vp}"));
        let smoothed = config(
            "shape = [9, 7, 8]\nspacing = [10.0, 10.0, 10.0]",
            &format!("kind = \"constant\"\nvp = {vp}\nsmoothing = 25.0"),
        );
        let (a, b) =
            (model::sample(&plain, Path::new(".")).unwrap(), model::sample(&smoothed, Path::new(".")).unwrap());
        assert!(a.vp.iter().zip(&b.vp).all(|(x, y)| x.to_bits() == y.to_bits()), "vp = {vp}");
    }
}

#[test]
fn a_slab_is_smoothed_as_the_whole_grid_in_3d_with_its_density() {
    let cfg = config(
        "shape = [6, 5, 40]\nspacing = [10.0, 12.0, 8.0]",
        "kind = \"layered\"\ndepths = [80.0, 150.0, 230.0]\nvelocities = [1500.0, 2200.0, 1900.0, 3100.0]\n\
         density = [1000.0, 2000.0, 2100.0, 2400.0]\nsmoothing = 20.0",
    );
    let whole = model::sample(&cfg, Path::new(".")).unwrap();
    let plane = 6 * 5;
    for planes in [0..7, 12..25, 33..40] {
        let part = model::sample_planes(&cfg, Path::new("."), planes.clone()).unwrap();
        assert_eq!(part.vp, whole.vp[planes.start * plane..planes.end * plane], "{planes:?}");
        let (rho, whole_rho) = (part.rho.unwrap(), whole.rho.as_ref().unwrap().clone());
        assert_eq!(rho, whole_rho[planes.start * plane..planes.end * plane], "{planes:?}");
    }
    // The density is smoothed too: between the layers' values near a contrast.
    let rho = whole.rho.unwrap();
    let mid = rho[10 * plane];
    assert!(mid > 1000.0 && mid < 2000.0, "density at z = 80 m: {mid}");
}

#[test]
fn bad_smoothing_is_refused_naming_the_key() {
    for bad in ["0.0", "-10.0", "nan", "inf"] {
        let cfg = config(
            "shape = [4, 4, 4]\nspacing = [10.0, 10.0, 10.0]",
            &format!("kind = \"constant\"\nvp = 2000.0\nsmoothing = {bad}"),
        );
        let e = cfg.check_values().unwrap_err().to_string();
        assert!(e.contains("model.smoothing"), "{bad}: {e}");
        let e = model::sample(&cfg, Path::new(".")).unwrap_err().to_string();
        assert!(e.contains("model.smoothing"), "{bad}: {e}");
    }
}

#[test]
fn an_imaging_true_model_takes_the_key_too() {
    let text = "[grid]\nshape = [4, 4]\nspacing = [10.0, 10.0]\n[model]\nkind = \"constant\"\nvp = 2000.0\n\
                smoothing = 50.0\n[time]\nsteps = 1\n[source]\nposition = [10.0, 10.0]\nfrequency = 10.0\n\
                [imaging]\ntrue_model = { kind = \"layered\", depths = [20.0], velocities = [2000.0, 2500.0], \
                smoothing = 15.0 }\n";
    let cfg = Config::from_toml(text).unwrap();
    assert_eq!(cfg.model.smoothing, Some(50.0));
    let truth = cfg.imaging.as_ref().unwrap().true_model().unwrap().unwrap();
    assert_eq!(truth.smoothing, Some(15.0));
}
