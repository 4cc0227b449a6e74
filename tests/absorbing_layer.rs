//! Sources and receivers inside an absorbing layer (`[boundary] placement = "inside"`, where the
//! layers take the grid's outer points): `Problem::build` warns, naming them
//! (`Problem::in_absorbing_layer` tells for any position); none is named when all lie inside the
//! layers, with no boundary, or at a free surface (which does not absorb). With the layers
//! outside the model (the default) no position of the model lies in one.

use seismic_run::config::Config;
use seismic_run::problem::Problem;

/// A 400 m cube (41 points a side, 10 m apart) with a layer of 20 points (200 m); the source at
/// `source`, receivers at `receivers`; `boundary` spliced into `[boundary]`, the layers inside
/// the grid unless it says otherwise.
fn problem(source: [f64; 3], receivers: &[[f64; 3]], boundary: &str) -> Problem {
    let placement = if boundary.contains("placement") { "" } else { "placement = \"inside\"\n" };
    let mut text = format!(
        "[grid]\nshape = [41, 41, 41]\nspacing = [10.0, 10.0, 10.0]\n[model]\nkind = \"constant\"\nvp = 2000.0\n\
         [time]\nsteps = 2\n[source]\nposition = {source:?}\nfrequency = 10.0\n[boundary]\n{placement}{boundary}\n"
    );
    for r in receivers {
        text += &format!("[[receivers]]\nposition = {r:?}\n");
    }
    let cfg = Config::from_toml(&text).unwrap();
    let n: usize = cfg.grid.shape.iter().product();
    Problem::build(&cfg, vec![2000.0; n]).unwrap()
}

fn layer_warnings(p: &Problem) -> Vec<&String> {
    p.warnings.iter().filter(|w| w.contains("absorbing layer")).collect()
}

#[test]
fn a_source_20_m_from_a_face_inside_a_200_m_layer_is_warned_of() {
    let p = problem([20.0, 200.0, 200.0], &[], "width = 20\n");
    let w = layer_warnings(&p);
    assert_eq!(w.len(), 1, "{:?}", p.warnings);
    assert!(w[0].contains("the source at [20.0, 200.0, 200.0] m") && w[0].contains("20 points (200 m"), "{}", w[0]);
    assert!(p.in_absorbing_layer([20.0, 200.0, 200.0]));
    // 20 m from the far face too; the centre is clear of every layer.
    assert!(p.in_absorbing_layer([380.0, 200.0, 200.0]));
    assert!(!p.in_absorbing_layer([200.0, 200.0, 200.0]));
}

#[test]
fn receivers_inside_a_layer_are_named_by_index() {
    let receivers = [[200.0, 200.0, 200.0], [200.0, 10.0, 200.0], [200.0, 200.0, 390.0], [210.0, 200.0, 200.0]];
    let p = problem([200.0, 200.0, 150.0], &receivers, "width = 5\n");
    let w = layer_warnings(&p);
    assert_eq!(w.len(), 1, "{:?}", p.warnings);
    assert!(w[0].starts_with("2 of 4 receivers"), "{}", w[0]);
    assert!(w[0].contains("receiver 1 at [200.0, 10.0, 200.0] m, receiver 2 at [200.0, 200.0, 390.0] m"), "{}", w[0]);
}

#[test]
fn no_warning_clear_of_the_layers_without_a_boundary_or_at_a_free_surface() {
    let centre = [200.0, 200.0, 200.0];
    assert!(layer_warnings(&problem(centre, &[centre], "width = 20\n")).is_empty());
    let edge = [20.0, 200.0, 200.0];
    assert!(layer_warnings(&problem(edge, &[edge], "kind = \"none\"\nwidth = 20\n")).is_empty());
    // Near the top: in the layer when it absorbs, not under a free surface.
    let top = [200.0, 200.0, 20.0];
    assert_eq!(layer_warnings(&problem(top, &[], "width = 5\n")).len(), 1);
    assert!(layer_warnings(&problem(top, &[], "width = 5\nfree_surface = true\n")).is_empty());
    // The sponge's layer damps as well.
    assert_eq!(layer_warnings(&problem(edge, &[], "kind = \"sponge\"\nwidth = 5\n")).len(), 1);
}

#[test]
fn no_position_of_the_model_lies_in_a_layer_outside_it() {
    // The model's faces and corners, by default and when asked for.
    let faces = [[0.0, 200.0, 200.0], [400.0, 400.0, 400.0], [0.0, 0.0, 0.0]];
    for boundary in
        ["width = 20\nplacement = \"outside\"\n", "width = 20\nplacement = \"outside\"\nkind = \"sponge\"\n"]
    {
        let p = problem([20.0, 200.0, 200.0], &faces, boundary);
        assert!(layer_warnings(&p).is_empty(), "{boundary}: {:?}", p.warnings);
        assert!(faces.iter().all(|&f| !p.in_absorbing_layer(f)), "{boundary}");
        assert!(p.in_absorbing_layer([-10.0, 200.0, 200.0]), "the layer lies beyond the model");
    }
}
