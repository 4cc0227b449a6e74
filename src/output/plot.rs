//! Quick-look pictures beside the result file (`--plot`): the last snapshot's xz-plane over the
//! velocity model, and the shot gather. PNG through plotters' bitmap backend, no text (so no
//! font is needed): red is positive pressure, blue negative, grey the model (darker is faster);
//! the gather has a linear time gain.

use anyhow::{Result, anyhow};
use plotters::backend::{BitMapBackend, DrawingBackend};
use std::path::{Path, PathBuf};

/// Longest side of a picture, pixels.
const MAX_SIDE: usize = 1600;

/// An RGB image being drawn.
struct Canvas {
    width: usize,
    height: usize,
    rgb: Vec<u8>,
}

impl Canvas {
    /// Writes the PNG to a temporary file beside `path` and renames it into place (see
    /// [`super::safe`]: only a regular file or nothing is replaced).
    fn save(&self, path: &Path) -> Result<()> {
        let size = (self.width as u32, self.height as u32);
        let tmp = super::safe::TempFile::create(path, ".png")?;
        {
            // plotters picks the encoder from the name's extension, so it gets the temporary name.
            let mut backend = BitMapBackend::new(tmp.path(), size);
            backend.blit_bitmap((0, 0), size, &self.rgb).map_err(|e| anyhow!("{}: {e}", path.display()))?;
            backend.present().map_err(|e| anyhow!("{}: {e}", path.display()))?;
        }
        tmp.commit()?;
        Ok(())
    }
}

/// Pixel size of a (rows, cols) array drawn at an integer or fractional scale that keeps its
/// aspect ratio, at least 200 and at most MAX_SIDE pixels on the longer side.
fn picture_size(rows: usize, cols: usize) -> (usize, usize, f64) {
    let long = rows.max(cols).max(1) as f64;
    let scale = (MAX_SIDE as f64 / long).min((800.0 / long).max(1.0).ceil());
    let w = ((cols as f64 * scale).round() as usize).max(1);
    let h = ((rows as f64 * scale).round() as usize).max(1);
    (w, h, scale)
}

/// |value| below which `fraction` of the values lie (the colour scale's clip).
fn clip_level(values: &[f32], fraction: f64) -> f32 {
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

/// The wavefield plane (rows = z, cols = x) over the model plane of the same shape.
pub fn wavefield_over_model(path: &Path, field: &[f32], model: &[f32], rows: usize, cols: usize) -> Result<()> {
    let (width, height, scale) = picture_size(rows, cols);
    let clip = clip_level(field, 0.995);
    let (vmin, vmax) = model.iter().fold((f32::INFINITY, 0.0f32), |(lo, hi), &v| (lo.min(v), hi.max(v)));
    let span = (vmax - vmin).max(f32::MIN_POSITIVE);
    let mut rgb = vec![0u8; width * height * 3];
    for py in 0..height {
        let r = ((py as f64 / scale) as usize).min(rows - 1);
        for px in 0..width {
            let c = ((px as f64 / scale) as usize).min(cols - 1);
            let i = r * cols + c;
            // Grey from 0.85 (slowest) to 0.35 (fastest) so the wavefield shows on top.
            let grey = 0.85 - 0.5 * (model[i] - vmin) / span;
            let u = field[i] / clip;
            let alpha = u.abs().min(1.0);
            let col = diverging(u.signum());
            let px_rgb = &mut rgb[(py * width + px) * 3..][..3];
            for k in 0..3 {
                px_rgb[k] = (255.0 * ((1.0 - alpha) * grey + alpha * col[k])) as u8;
            }
        }
    }
    Canvas { width, height, rgb }.save(path)
}

/// The shot gather: receivers across, time downwards; traces are (nreceivers, nt) row-major.
pub fn shot_gather(path: &Path, traces: &[f32], receivers: usize, samples: usize) -> Result<()> {
    // Stretched or squeezed to 400..1000 pixels of time and 400..MAX_SIDE of receivers.
    let height = samples.clamp(400, 1000);
    let width = receivers.clamp(400, MAX_SIDE);
    // A gain growing linearly with time makes up for geometrical spreading, so that late
    // reflections show beside the direct wave.
    let gained: Vec<f32> = traces.iter().enumerate().map(|(i, &v)| v * ((i % samples) + 1) as f32).collect();
    let clip = clip_level(&gained, 0.98);
    let mut rgb = vec![0u8; width * height * 3];
    for py in 0..height {
        let t = (py * samples / height).min(samples - 1);
        for px in 0..width {
            let r = (px * receivers / width).min(receivers - 1);
            let col = diverging(gained[r * samples + t] / clip);
            let px_rgb = &mut rgb[(py * width + px) * 3..][..3];
            for k in 0..3 {
                px_rgb[k] = (255.0 * col[k]) as u8;
            }
        }
    }
    Canvas { width, height, rgb }.save(path)
}

/// `<stem>.<what>.png` beside the result file.
pub fn picture_path(h5: &Path, what: &str) -> PathBuf {
    let stem = h5.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "output".into());
    h5.with_file_name(format!("{stem}.{what}.png"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_and_clip() {
        assert_eq!(diverging(0.0), [1.0, 1.0, 1.0]);
        assert_eq!(diverging(2.0), [1.0, 0.0, 0.0]);
        assert_eq!(diverging(-1.0), [0.0, 0.0, 1.0]);
        let v: Vec<f32> = (0..=100).map(|i| i as f32 - 50.0).collect();
        assert_eq!(clip_level(&v, 1.0), 50.0);
        assert_eq!(clip_level(&[0.0; 4], 0.5), f32::MIN_POSITIVE);
    }

    #[test]
    fn pictures_are_written() {
        let dir = std::env::temp_dir().join(format!("seismic-run-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let field: Vec<f32> = (0..30 * 50).map(|i| ((i % 50) as f32 - 25.0) / 25.0).collect();
        let model: Vec<f32> = (0..30 * 50).map(|i| 1500.0 + (i / 50) as f32 * 10.0).collect();
        let a = dir.join("a.png");
        wavefield_over_model(&a, &field, &model, 30, 50).unwrap();
        let b = dir.join("b.png");
        shot_gather(&b, &field, 30, 50).unwrap();
        for p in [a, b] {
            let bytes = std::fs::read(&p).unwrap();
            assert_eq!(&bytes[1..4], b"PNG");
        }
        std::fs::remove_dir_all(&dir).ok();
    }
}
