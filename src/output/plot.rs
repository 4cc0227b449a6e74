//! Pictures of a result file (`--plot`, `seismic-run export --plot`), drawn from the file itself:
//! - `<stem>.snapshot.png`: the last snapshot's xz-plane over the velocity model, at the grid's
//!   true aspect, axes x and z in metres;
//! - `<stem>.gather.png`: the shot gather, receiver position across (x, offset or distance along
//!   the receivers, in metres: [`gather_axis`]) and time (s) down, with a linear time gain;
//! - `<stem>.snapshots.gif`: every xz snapshot in turn (an animated GIF, looping).
//!
//! Each has a title (the result file, the section, the time) and a colour bar with its clip (red
//! positive pressure, blue negative; the model is grey, darker is faster). Text is set in DejaVu
//! Sans, which the `dejavu` crate embeds, so no system font is needed.

use crate::output::result::{ResultFile, SnapshotSeries, sibling};
use crate::output::safe;
use anyhow::{Context, Result, anyhow, ensure};
use plotters::backend::BitMapBackend;
use plotters::prelude::*;
use plotters::style::FontStyle;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Longest side of a snapshot's image area, pixels.
const SNAPSHOT_SIDE: f64 = 900.0;
/// Shot gather image area, pixels.
const GATHER_SIZE: (usize, usize) = (800, 600);
/// Margins around the image area: left (z or time axis), right (colour bar), top (title),
/// bottom (x axis).
const MARGIN: (usize, usize, usize, usize) = (90, 150, 70, 60);
/// Time between animation frames, hundredths of a second.
const FRAME_DELAY: u16 = 25;
/// Fraction of |values| under the colour clip.
const SNAPSHOT_CLIP: f64 = 0.995;
const GATHER_CLIP: f64 = 0.98;

/// Registers the embedded DejaVu Sans as plotters' "sans-serif" (once per process).
pub fn register_font() -> Result<()> {
    static DONE: OnceLock<bool> = OnceLock::new();
    let ok = *DONE.get_or_init(|| {
        plotters::style::register_font("sans-serif", FontStyle::Normal, dejavu::sans::regular()).is_ok()
    });
    if ok { Ok(()) } else { Err(anyhow!("the embedded DejaVu Sans font could not be read")) }
}

/// |value| below which `fraction` of the finite values lie (the colour scale's clip); the
/// largest |value| when that is 0, and f32::MIN_POSITIVE for an all-zero field.
pub fn clip_level(values: &[f32], fraction: f64) -> f32 {
    let mut a: Vec<f32> = values.iter().map(|v| v.abs()).filter(|v| v.is_finite()).collect();
    if a.is_empty() {
        return 1.0;
    }
    let k = ((a.len() - 1) as f64 * fraction).round() as usize;
    let (_, v, _) = a.select_nth_unstable_by(k, |x, y| x.total_cmp(y));
    if *v > 0.0 { *v } else { a.iter().cloned().fold(0.0, f32::max).max(f32::MIN_POSITIVE) }
}

/// Diverging colour of `v / clip` in [-1, 1]: blue, white, red.
fn diverging(u: f32) -> [f32; 3] {
    let u = u.clamp(-1.0, 1.0);
    if u >= 0.0 { [1.0, 1.0 - u, 1.0 - u] } else { [1.0 + u, 1.0 + u, 1.0] }
}

fn to_rgb(c: [f32; 3]) -> [u8; 3] {
    c.map(|v| (255.0 * v.clamp(0.0, 1.0)).round() as u8)
}

/// A picture: an image area of `pw` x `ph` pixels inside fixed margins.
struct Figure {
    pw: usize,
    ph: usize,
    rgb: Vec<u8>,
}

impl Figure {
    fn new(pw: usize, ph: usize) -> Figure {
        let (w, h) = (pw + MARGIN.0 + MARGIN.1, ph + MARGIN.2 + MARGIN.3);
        Figure { pw, ph, rgb: vec![255; w * h * 3] }
    }

    fn size(&self) -> (u32, u32) {
        ((self.pw + MARGIN.0 + MARGIN.1) as u32, (self.ph + MARGIN.2 + MARGIN.3) as u32)
    }

    fn set(&mut self, x: usize, y: usize, c: [u8; 3]) {
        let w = self.size().0 as usize;
        self.rgb[(y * w + x) * 3..][..3].copy_from_slice(&c);
    }

    /// Fills the image area: `colour(u, v)` with u, v the pixel centre's fraction across and down.
    fn paint(&mut self, colour: impl Fn(f64, f64) -> [u8; 3]) {
        for py in 0..self.ph {
            let v = (py as f64 + 0.5) / self.ph as f64;
            for px in 0..self.pw {
                let u = (px as f64 + 0.5) / self.pw as f64;
                self.set(MARGIN.0 + px, MARGIN.2 + py, colour(u, v));
            }
        }
    }

    /// Axes with ticks over the image area (x across from `xs.0` to `xs.1`, y down from `ys.0`
    /// to `ys.1`), the title lines, and a colour bar from -clip to +clip labelled `bar`.
    #[allow(clippy::too_many_arguments)]
    fn decorate(
        &mut self,
        xs: (f64, f64),
        ys: (f64, f64),
        desc: (&str, &str),
        decimals: (usize, usize),
        title: &[String],
        clip: f32,
        bar: &str,
    ) -> Result<()> {
        // plotters needs ranges of some width: a file's extreme time or grid axes are refused.
        for (what, (lo, hi)) in [(desc.0, xs), (desc.1, ys)] {
            ensure!(
                lo.is_finite() && hi.is_finite() && hi > lo,
                "the {what} axis runs from {lo} to {hi}: nothing to draw"
            );
        }
        register_font()?;
        let size = self.size();
        // The colour bar: a strip beside the image area, +clip at the top.
        let (bx, bw) = (MARGIN.0 + self.pw + 25, 18);
        for py in 0..self.ph {
            let u = 1.0 - 2.0 * (py as f32 + 0.5) / self.ph as f32;
            for px in bx..bx + bw {
                self.set(px, MARGIN.2 + py, to_rgb(diverging(u)));
            }
        }
        let ph = self.ph;
        let root = BitMapBackend::with_buffer(&mut self.rgb, size).into_drawing_area();
        let e = |e: DrawingAreaErrorKind<_>| anyhow!("drawing: {e:?}");
        let mut chart = ChartBuilder::on(&root)
            .margin_top(MARGIN.2 as u32)
            .margin_right(MARGIN.1 as u32)
            .x_label_area_size(MARGIN.3 as u32)
            .y_label_area_size(MARGIN.0 as u32)
            .build_cartesian_2d(xs.0..xs.1, ys.1..ys.0)
            .map_err(e)?;
        chart
            .configure_mesh()
            .disable_mesh()
            .x_desc(desc.0)
            .y_desc(desc.1)
            .x_labels(8)
            .y_labels(8)
            .x_label_formatter(&|v| format!("{v:.*}", decimals.0))
            .y_label_formatter(&|v| format!("{v:.*}", decimals.1))
            .label_style(("sans-serif", 14))
            .axis_desc_style(("sans-serif", 15))
            .draw()
            .map_err(e)?;
        for (i, line) in title.iter().enumerate() {
            let size = if i == 0 { 18 } else { 14 };
            root.draw(&Text::new(
                line.as_str(),
                (MARGIN.0 as i32, 8 + 24 * i as i32),
                ("sans-serif", size).into_font(),
            ))
            .map_err(e)?;
        }
        let black = ShapeStyle::from(&BLACK);
        let (bx, top) = (bx as i32, MARGIN.2 as i32);
        root.draw(&Rectangle::new([(bx, top), (bx + bw as i32, top + ph as i32)], black)).map_err(e)?;
        let label = ("sans-serif", 13).into_font();
        for (frac, text) in [(0.0, format!("+{clip:.3e}")), (0.5, "0".to_string()), (1.0, format!("-{clip:.3e}"))] {
            let y = top + (frac * ph as f64) as i32;
            root.draw(&PathElement::new(vec![(bx + bw as i32, y), (bx + bw as i32 + 4, y)], black)).map_err(e)?;
            root.draw(&Text::new(text, (bx + bw as i32 + 7, y - 7), label.clone())).map_err(e)?;
        }
        root.draw(&Text::new(bar, (bx - 10, top + ph as i32 + 25), label.clone())).map_err(e)?;
        root.present().map_err(e)?;
        Ok(())
    }

    /// Writes the picture as PNG through [`safe::TempFile`] (written through the open file,
    /// synced, renamed over a regular file or nothing).
    fn save_png(&self, path: &Path) -> Result<()> {
        let (w, h) = self.size();
        let mut tmp = safe::TempFile::create(path, ".png")?;
        let mut encoder = png::Encoder::new(std::io::BufWriter::new(tmp.file()), w, h);
        encoder.set_color(png::ColorType::Rgb);
        encoder.set_depth(png::BitDepth::Eight);
        let mut png = encoder.write_header().with_context(|| format!("writing {}", path.display()))?;
        png.write_image_data(&self.rgb).with_context(|| format!("writing {}", path.display()))?;
        png.finish().with_context(|| format!("writing {}", path.display()))?;
        tmp.commit()?;
        Ok(())
    }
}

/// Image area of a snapshot: the grid's true aspect, the longer side SNAPSHOT_SIDE pixels.
fn snapshot_area(nx: usize, nz: usize, dx: f64, dz: f64) -> (usize, usize) {
    let (wx, wz) = (nx as f64 * dx, nz as f64 * dz);
    let s = SNAPSHOT_SIDE / wx.max(wz);
    (((wx * s).round() as usize).max(40), ((wz * s).round() as usize).max(40))
}

/// Everything a snapshot frame needs besides the field.
struct SnapshotView<'a> {
    name: String,
    /// The model's plane; None where the file holds no model (`output.model = false`).
    model: Option<&'a [f32]>,
    nx: usize,
    nz: usize,
    /// x from and to, z from and to, m (cell edges).
    xs: (f64, f64),
    zs: (f64, f64),
    /// Where the plane is, for the title.
    plane: String,
}

/// One snapshot over the model (rows z, columns x).
fn snapshot_figure(v: &SnapshotView, field: &[f32], clip: f32, time: f64) -> Result<Figure> {
    let (pw, ph) = snapshot_area(v.nx, v.nz, (v.xs.1 - v.xs.0) / v.nx as f64, (v.zs.1 - v.zs.0) / v.nz as f64);
    let mut fig = Figure::new(pw, ph);
    let model = v.model.unwrap_or_default();
    let (vmin, vmax) = model.iter().fold((f32::INFINITY, 0.0f32), |(lo, hi), &m| (lo.min(m), hi.max(m)));
    let span = (vmax - vmin).max(f32::MIN_POSITIVE);
    fig.paint(|u, w| {
        let c = ((u * v.nx as f64) as usize).min(v.nx - 1);
        let r = ((w * v.nz as f64) as usize).min(v.nz - 1);
        let i = r * v.nx + c;
        // Grey from 0.85 (slowest) to 0.35 (fastest), so the wavefield shows on top.
        let grey = model.get(i).map_or(0.85, |&m| 0.85 - 0.5 * (m - vmin) / span);
        let p = field[i] / clip;
        let alpha = p.abs().min(1.0);
        let col = diverging(p.signum());
        to_rgb([0, 1, 2].map(|k| (1.0 - alpha) * grey + alpha * col[k]))
    });
    let title = [
        format!("{}: pressure at t = {time:.4} s", v.name),
        match v.model {
            Some(_) => format!("xz plane at {}; model vp {vmin:.0} to {vmax:.0} m/s (grey, darker is faster)", v.plane),
            None => format!("xz plane at {}; no model in the file (output.model = false)", v.plane),
        },
    ];
    fig.decorate(v.xs, v.zs, ("x (m)", "z (m)"), (0, 0), &title, clip, "pressure, clip")?;
    Ok(fig)
}

/// The gather picture's horizontal axis: each receiver's position along it (m) and its label.
/// Receiver x where that runs one way along the receivers (a line across x), else the signed
/// offset (as SEG-Y's bytes 37-40: negative where x < source x) where that does, else the distance
/// walked from the first receiver through each in turn.
pub fn gather_axis(source: [f64; 3], receivers: &[[f64; 3]]) -> (Vec<f64>, &'static str) {
    let monotonic = |h: &[f64]| h.windows(2).all(|w| w[1] > w[0]) || h.windows(2).all(|w| w[1] < w[0]);
    let x: Vec<f64> = receivers.iter().map(|r| r[0]).collect();
    if receivers.len() > 1 && monotonic(&x) {
        return (x, "receiver x (m)");
    }
    let offset: Vec<f64> = receivers
        .iter()
        .map(|r| {
            let (dx, dy) = (r[0] - source[0], r[1] - source[1]);
            dx.hypot(dy).copysign(if dx < 0.0 { -1.0 } else { 1.0 })
        })
        .collect();
    if receivers.len() > 1 && monotonic(&offset) {
        return (offset, "offset (m)");
    }
    let mut walked = vec![0.0];
    for w in receivers.windows(2) {
        let d = ((w[1][0] - w[0][0]).powi(2) + (w[1][1] - w[0][1]).powi(2) + (w[1][2] - w[0][2]).powi(2)).sqrt();
        walked.push(walked[walked.len() - 1] + d);
    }
    (walked, "distance along the receivers (m)")
}

/// The shot gather picture of `traces` ((nreceivers, samples) row-major; sample j at t0 + j dt),
/// receiver `i` at `axis.0[i]` across.
fn gather_figure(name: &str, traces: &[f32], axis: (&[f64], &str), samples: usize, t0: f64, dt: f64) -> Result<Figure> {
    let (pw, ph) = GATHER_SIZE;
    let receivers = axis.0.len();
    let mut fig = Figure::new(pw, ph);
    // A gain growing linearly with time makes up for geometrical spreading, so that late
    // reflections show beside the direct wave.
    let gained: Vec<f32> = traces.iter().enumerate().map(|(i, &v)| v * ((i % samples) + 1) as f32).collect();
    let clip = clip_level(&gained, GATHER_CLIP);
    // Receivers sorted along the axis; each pixel column shows the nearest one. The axis reaches
    // half a receiver spacing (or 1 m for one receiver) beyond the end receivers.
    let mut order: Vec<usize> = (0..receivers).collect();
    order.sort_by(|&a, &b| axis.0[a].total_cmp(&axis.0[b]));
    let h: Vec<f64> = order.iter().map(|&i| axis.0[i]).collect();
    let pad = if receivers > 1 { 0.5 * (h[receivers - 1] - h[0]) / (receivers - 1) as f64 } else { 0.0 };
    let pad = if pad > 0.0 { pad } else { 1.0 };
    let xs = (h[0] - pad, h[receivers - 1] + pad);
    fig.paint(|u, v| {
        let at = xs.0 + u * (xs.1 - xs.0);
        let k = h.partition_point(|&x| x < at);
        let k = if k == 0 || (k < receivers && h[k] - at < at - h[k - 1]) { k.min(receivers - 1) } else { k - 1 };
        let r = order[k];
        let t = ((v * samples as f64) as usize).min(samples - 1);
        to_rgb(diverging(gained[r * samples + t] / clip))
    });
    let title = [
        format!("{name}: shot gather, {receivers} receivers"),
        format!("linear gain: pressure times sample number; dt = {dt:.4e} s"),
    ];
    let half = 0.5 * dt;
    fig.decorate(
        xs,
        (t0 - half, t0 + (samples as f64 - 0.5) * dt),
        (axis.1, "time (s)"),
        (0, 3),
        &title,
        clip,
        "gained pressure",
    )?;
    Ok(fig)
}

/// An xz view of the snapshots: the series, the y index of its plane and the model's plane there
/// (None where the file holds no model).
type XzView = (SnapshotSeries, usize, Option<Vec<f32>>);

/// The xz view of the snapshots, its model plane and where it lies.
fn xz_view(r: &ResultFile) -> Result<Option<XzView>> {
    let Some((series, iy)) = r.xz_view() else { return Ok(None) };
    let series = series.clone();
    let model = r.model_xz(iy)?;
    Ok(Some((series, iy, model)))
}

/// The pictures beside the result file `h5`: the last snapshot, the animation, the shot gather.
pub fn picture_paths(h5: &Path) -> [PathBuf; 3] {
    ["snapshot.png", "snapshots.gif", "gather.png"].map(|ext| sibling(h5, ext))
}

/// Draws every picture the result file allows; returns the paths written. Without an xz or volume
/// snapshot series there is no snapshot picture nor animation (a notice says so); without
/// receivers no gather.
pub fn draw_all(r: &ResultFile) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let name = r.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    match xz_view(r)? {
        Some((series, iy, model)) if !r.snapshot_times.is_empty() => {
            let [nx, _, nz] = r.shape;
            let (x0, z0) = (r.origin[0] - 0.5 * r.spacing[0], r.origin[2] - 0.5 * r.spacing[2]);
            let view = SnapshotView {
                name: name.clone(),
                model: model.as_deref(),
                nx,
                nz,
                xs: (x0, x0 + nx as f64 * r.spacing[0]),
                zs: (z0, z0 + nz as f64 * r.spacing[2]),
                plane: format!("y = {} m", r.origin[1] + iy as f64 * r.spacing[1]),
            };
            let n = r.snapshot_times.len();
            // One clip for every frame, so the animation's colours compare across time.
            let mut clip = f32::MIN_POSITIVE;
            let mut last = Vec::new();
            for k in 0..n {
                check_stop()?;
                last = r.xz_frame(&series, iy, k)?;
                clip = clip.max(clip_level(&last, SNAPSHOT_CLIP));
            }
            let [png, gif_path, _] = picture_paths(&r.path);
            snapshot_figure(&view, &last, clip_level(&last, SNAPSHOT_CLIP), r.snapshot_times[n - 1])?.save_png(&png)?;
            out.push(png);
            let frames = (0..n).map(|k| {
                check_stop()?;
                let field = r.xz_frame(&series, iy, k)?;
                snapshot_figure(&view, &field, clip, r.snapshot_times[k])
            });
            write_gif(&gif_path, frames)?;
            out.push(gif_path);
        }
        _ => eprintln!("notice: no xz or volume snapshot to picture (set [output] snapshot_every)"),
    }
    if !r.receivers.is_empty() {
        check_stop()?;
        let traces = r.traces()?;
        let [_, _, png] = picture_paths(&r.path);
        let (h, label) = gather_axis(r.source_position(), &r.receivers);
        gather_figure(&name, &traces, (&h, label), r.steps, r.trace_t0, r.dt)?.save_png(&png)?;
        out.push(png);
    }
    Ok(out)
}

/// Errors with [`Interrupted`](crate::solver::Interrupted) once a stop is asked (a signal): the
/// pictures and the animation take long enough to be stopped between frames.
fn check_stop() -> Result<()> {
    if crate::solver::stop_requested() {
        return Err(crate::solver::Interrupted { steps_done: 0, steps: 0 }.into());
    }
    Ok(())
}

/// Writes the frames as a looping animated GIF through [`safe::TempFile`].
fn write_gif(path: &Path, frames: impl Iterator<Item = Result<Figure>>) -> Result<()> {
    let mut tmp = safe::TempFile::create(path, ".gif")?;
    (|| -> Result<()> {
        let mut frames = frames;
        let first = frames.next().context("no frames to animate")??;
        let (w, h) = first.size();
        let (w, h) = (u16::try_from(w)?, u16::try_from(h)?);
        let mut encoder = gif::Encoder::new(std::io::BufWriter::new(tmp.file()), w, h, &[])?;
        encoder.set_repeat(gif::Repeat::Infinite)?;
        for fig in std::iter::once(Ok(first)).chain(frames) {
            let fig = fig?;
            // Speed 10 of 1..30: NeuQuant samples every 10th pixel to choose each palette.
            let mut frame = gif::Frame::from_rgb_speed(w, h, &fig.rgb, 10);
            frame.delay = FRAME_DELAY;
            encoder.write_frame(&frame)?;
        }
        use std::io::Write as _;
        encoder.into_inner()?.flush()?;
        Ok(())
    })()
    .with_context(|| format!("writing {}", path.display()))?;
    tmp.commit()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::gather_axis;

    #[test]
    fn gather_axis_is_in_metres() {
        let source = [500.0, 0.0, 10.0];
        let line: Vec<[f64; 3]> = (0..4).map(|i| [100.0 + 200.0 * i as f64, 0.0, 5.0]).collect();
        assert_eq!(gather_axis(source, &line), (vec![100.0, 300.0, 500.0, 700.0], "receiver x (m)"));
        // A line across y: x is constant, the offset grows.
        let across: Vec<[f64; 3]> = (0..3).map(|i| [500.0, 30.0 + 40.0 * i as f64, 5.0]).collect();
        assert_eq!(gather_axis(source, &across), (vec![30.0, 70.0, 110.0], "offset (m)"));
        // A vertical line: neither, so the distance along it.
        let down: Vec<[f64; 3]> = (0..3).map(|i| [200.0, 0.0, 10.0 * i as f64]).collect();
        assert_eq!(gather_axis(source, &down), (vec![0.0, 10.0, 20.0], "distance along the receivers (m)"));
    }
}
