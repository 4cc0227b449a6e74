//! PNG plots of a bench [`Report`]: effective GB/s and percent of the same-run ceiling against grid
//! size (`vs-size.png`) and against the stencil radius (`vs-radius.png`). Labels need a font; none
//! is shipped: [`system_font`] looks for DejaVu Sans (or $SEISMIC_FONT) at run time, and without one
//! the plots are drawn with no text (the colours are fixed: fused step blue, three-pass step orange,
//! Laplacian-only green; cubes are circles joined by lines, other shapes triangles).

use super::{CeilingKind, OperatorKind, Report, Row};
use anyhow::{Result, anyhow};
use plotters::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

const FONT_PATHS: [&str; 5] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu-sans-fonts/DejaVuSans.ttf",
    "/usr/local/share/fonts/DejaVuSans.ttf",
];

/// Registers a system font as plotters' "sans-serif" once; false when none could be read.
pub fn system_font() -> bool {
    static FOUND: OnceLock<bool> = OnceLock::new();
    *FOUND.get_or_init(|| {
        let env = std::env::var("SEISMIC_FONT").ok();
        for p in env.iter().map(String::as_str).chain(FONT_PATHS) {
            if let Ok(bytes) = std::fs::read(p) {
                // Registered fonts live as long as the process.
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                if plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok() {
                    return true;
                }
            }
        }
        false
    })
}

fn colour(op: OperatorKind) -> RGBColor {
    match op {
        OperatorKind::FusedStep => RGBColor(31, 119, 180),
        OperatorKind::ThreePassStep => RGBColor(255, 127, 14),
        OperatorKind::LaplacianOnly => RGBColor(44, 160, 44),
        OperatorKind::RealStep => RGBColor(214, 39, 40),
        OperatorKind::FusedStepF16 => RGBColor(148, 103, 189),
        OperatorKind::RealStepF16 => RGBColor(140, 86, 75),
        OperatorKind::RealStepDensity => RGBColor(227, 119, 194),
        OperatorKind::RealStepDefaultBoundary => RGBColor(127, 127, 127),
    }
}

fn is_cube(s: [usize; 3]) -> bool {
    s[0] == s[1] && s[1] == s[2]
}

/// One panel's data: per operator, (x, y, cube?) points.
struct Series {
    op: OperatorKind,
    points: Vec<(f64, f64, bool)>,
}

fn series(rows: &[&Row], x: impl Fn(&Row) -> f64, y: impl Fn(&Row) -> f64) -> Vec<Series> {
    OperatorKind::ALL
        .into_iter()
        .map(|op| {
            let mut points: Vec<(f64, f64, bool)> =
                rows.iter().filter(|r| r.operator == op).map(|r| (x(r), y(r), is_cube(r.shape))).collect();
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            Series { op, points }
        })
        .filter(|s| !s.points.is_empty())
        .collect()
}

struct Panel<'a> {
    title: String,
    x_desc: &'a str,
    y_desc: &'a str,
    log_x: bool,
    series: Vec<Series>,
    /// Horizontal reference lines (value, colour).
    refs: Vec<(f64, RGBColor)>,
}

fn draw_panel<DB: DrawingBackend>(area: &DrawingArea<DB, plotters::coord::Shift>, p: &Panel, text: bool) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| anyhow!("plot: {e}");
    let xs = p.series.iter().flat_map(|s| s.points.iter().map(|q| q.0));
    let (xmin, xmax) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| (a.min(x), b.max(x)));
    let ymax = p
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|q| q.1))
        .chain(p.refs.iter().map(|r| r.0))
        .fold(0.0f64, f64::max)
        * 1.1;
    if !xmin.is_finite() || ymax <= 0.0 {
        return Ok(());
    }
    let (x0, x1) = if p.log_x { (xmin / 1.5, xmax * 1.5) } else { (xmin - 0.5, xmax + 0.5) };
    let whole = |v: &f64| format!("{v:.0}");
    let mut b = ChartBuilder::on(area);
    b.margin(12);
    if text {
        b.caption(&p.title, ("sans-serif", 18)).x_label_area_size(40).y_label_area_size(60);
    }
    macro_rules! body {
        ($chart:expr) => {{
            let mut chart = $chart;
            {
                let mut mesh = chart.configure_mesh();
                if text {
                    mesh.x_desc(p.x_desc)
                        .y_desc(p.y_desc)
                        .label_style(("sans-serif", 13))
                        .x_labels(12)
                        .y_labels(10)
                        .x_label_formatter(&whole)
                        .y_label_formatter(&whole);
                } else {
                    mesh.x_labels(0).y_labels(0);
                }
                mesh.draw().map_err(err)?;
            }
            for &(v, c) in &p.refs {
                chart.draw_series(LineSeries::new([(x0, v), (x1, v)], c.stroke_width(1))).map_err(err)?;
            }
            for s in &p.series {
                let c = colour(s.op);
                let line: Vec<(f64, f64)> = s.points.iter().filter(|q| q.2).map(|q| (q.0, q.1)).collect();
                let drawn = chart.draw_series(LineSeries::new(line, c.stroke_width(2))).map_err(err)?;
                if text {
                    drawn
                        .label(s.op.label())
                        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2)));
                }
                chart
                    .draw_series(s.points.iter().filter(|q| q.2).map(|q| Circle::new((q.0, q.1), 4, c.filled())))
                    .map_err(err)?;
                chart
                    .draw_series(
                        s.points.iter().filter(|q| !q.2).map(|q| TriangleMarker::new((q.0, q.1), 6, c.filled())),
                    )
                    .map_err(err)?;
            }
            if text {
                chart
                    .configure_series_labels()
                    .position(SeriesLabelPosition::LowerRight)
                    .background_style(WHITE.mix(0.85))
                    .border_style(BLACK)
                    .label_font(("sans-serif", 13))
                    .draw()
                    .map_err(err)?;
            }
        }};
    }
    if p.log_x {
        body!(b.build_cartesian_2d((x0..x1).log_scale(), 0.0..ymax).map_err(err)?);
    } else {
        body!(b.build_cartesian_2d(x0..x1, 0.0..ymax).map_err(err)?);
    }
    Ok(())
}

fn draw_pair(path: &Path, panels: [Panel; 2], text: bool) -> Result<PathBuf> {
    // Drawn under a temporary name first, so that a failure leaves no half-written PNG.
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("plot.png");
    let tmp = dir.join(format!(".tmp-{}-{name}", std::process::id()));
    let result = (|| -> Result<()> {
        let root = BitMapBackend::new(&tmp, (1400, 520)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| anyhow!("plot: {e}"))?;
        let areas = root.split_evenly((1, 2));
        for (a, p) in areas.iter().zip(&panels) {
            draw_panel(a, p, text)?;
        }
        root.present().map_err(|e| anyhow!("plot {}: {e}", path.display()))
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    std::fs::rename(&tmp, path).map_err(|e| anyhow!("cannot write {}: {e}", path.display()))?;
    Ok(path.to_path_buf())
}

fn ceiling_refs(rep: &Report, ops: &[OperatorKind]) -> Vec<(f64, RGBColor)> {
    let mut v = Vec::new();
    if ops.iter().any(|o| o.ceiling() == CeilingKind::ThreeReadOneWrite) {
        v.push((rep.ceilings.three_read_one_write_gbs, RGBColor(90, 90, 90)));
    }
    if ops.iter().any(|o| o.ceiling() == CeilingKind::Copy) {
        v.push((rep.ceilings.copy_gbs, RGBColor(160, 200, 160)));
    }
    v
}

fn percent_refs() -> Vec<(f64, RGBColor)> {
    vec![(100.0, RGBColor(90, 90, 90)), (90.0, RGBColor(200, 80, 80)), (80.0, RGBColor(230, 170, 170))]
}

/// Draws `vs-size.png` and `vs-radius.png` into `dir` (each only when the report has rows for it);
/// `text` draws titles, axis labels and legends (needs [`system_font`]).
pub fn draw(rep: &Report, dir: &Path, text: bool) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let by_size: Vec<&Row> =
        rep.rows.iter().filter(|r| r.radius == rep.spec.size_radius && rep.spec.sizes.contains(&r.shape)).collect();
    let by_radius: Vec<&Row> =
        rep.rows.iter().filter(|r| r.shape == rep.spec.radius_shape && rep.spec.radii.contains(&r.radius)).collect();
    let ops: Vec<OperatorKind> = rep.rows.iter().map(|r| r.operator).collect();
    let mpts = |r: &Row| r.shape.iter().product::<usize>() as f64 / 1e6;
    if !by_size.is_empty() {
        let what = format!("{}, R = {}", rep.device, rep.spec.size_radius);
        out.push(draw_pair(
            &dir.join("vs-size.png"),
            [
                Panel {
                    title: format!("Effective bandwidth ({what})"),
                    x_desc: "grid points (millions; triangles: large xy-planes)",
                    y_desc: "GB/s",
                    log_x: true,
                    series: series(&by_size, mpts, |r| r.gbs),
                    refs: ceiling_refs(rep, &ops),
                },
                Panel {
                    title: "Percent of the same-run ceiling".into(),
                    x_desc: "grid points (millions)",
                    y_desc: "% of ceiling (3R1W steps, copy Laplacian)",
                    log_x: true,
                    series: series(&by_size, mpts, |r| r.percent),
                    refs: percent_refs(),
                },
            ],
            text,
        )?);
    }
    if !by_radius.is_empty() {
        let s = rep.spec.radius_shape;
        let what = format!("{}, {}x{}x{}", rep.device, s[0], s[1], s[2]);
        out.push(draw_pair(
            &dir.join("vs-radius.png"),
            [
                Panel {
                    title: format!("Effective bandwidth ({what})"),
                    x_desc: "stencil radius R",
                    y_desc: "GB/s",
                    log_x: false,
                    series: series(&by_radius, |r| r.radius as f64, |r| r.gbs),
                    refs: ceiling_refs(rep, &ops),
                },
                Panel {
                    title: "Percent of the same-run ceiling".into(),
                    x_desc: "stencil radius R",
                    y_desc: "% of ceiling (3R1W steps, copy Laplacian)",
                    log_x: false,
                    series: series(&by_radius, |r| r.radius as f64, |r| r.percent),
                    refs: percent_refs(),
                },
            ],
            text,
        )?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::tests::sample_report;
    use super::*;

    fn check_png(path: &Path) {
        let bytes = std::fs::read(path).unwrap();
        assert_eq!(&bytes[1..4], b"PNG");
        // IHDR: width and height, big-endian, after the signature and the chunk header.
        assert_eq!(u32::from_be_bytes(bytes[16..20].try_into().unwrap()), 1400);
        assert_eq!(u32::from_be_bytes(bytes[20..24].try_into().unwrap()), 520);
        // More than a blank page.
        assert!(bytes.len() > 4000, "{} bytes", bytes.len());
    }

    #[test]
    fn plots_without_text_draw_both_files() {
        let rep = sample_report();
        let dir = std::env::temp_dir().join(format!("seismic-plot-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let files = draw(&rep, &dir, false).unwrap();
        assert_eq!(files, vec![dir.join("vs-size.png"), dir.join("vs-radius.png")]);
        for f in &files {
            check_png(f);
        }
        if system_font() {
            let files = draw(&rep, &dir, true).unwrap();
            for f in &files {
                check_png(f);
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
