//! The migration's output: the image (and the misfit's gradient) in HDF5, over the model's grid
//! (absorbing layers outside it cut off), and a picture of the image's xz section through the
//! middle of y.

use crate::config::ModelRegion;
use crate::output::plot::clip_level;
use crate::output::safe::TempFile;
use crate::problem::Problem;
use anyhow::{Context, Result, anyhow};
use rust_hdf5::{H5Dataset, H5File, VarLenUnicode};
use std::path::{Path, PathBuf};

/// What [`write_image`] writes.
pub struct ImageFile<'a> {
    pub path: &'a Path,
    /// The migration's problem (its run grid, spacing).
    pub problem: &'a Problem,
    /// Where the model lies in the run grid: what is written.
    pub region: ModelRegion,
    /// The stacked image, dense (nz, ny, nx) over the run grid.
    pub image: &'a [f64],
    /// dJ/dv summed over the shots, dense (nz, ny, nx), where asked for.
    pub gradient: Option<&'a [f64]>,
    /// J, summed over the shots (with the gradient).
    pub misfit: f64,
    pub shots: usize,
}

fn h5(e: rust_hdf5::Hdf5Error) -> anyhow::Error {
    anyhow!("HDF5: {e}")
}

/// The model region's points of a dense (nz, ny, nx) field of the run grid, as f32.
fn crop(values: &[f64], r: &ModelRegion) -> Vec<f32> {
    let ([fx, fy, fz], [nx, ny, nz], [rx, ry, _]) = (r.first, r.shape, r.run_shape);
    let mut out = Vec::with_capacity(nx * ny * nz);
    for z in fz..fz + nz {
        for y in fy..fy + ny {
            let row = (z * ry + y) * rx + fx;
            out.extend(values[row..row + nx].iter().map(|&v| v as f32));
        }
    }
    out
}

/// `/image` (f32, (nz, ny, nx) of the model's grid, attributes spacing, origin, axes, shots) and, with a gradient,
/// `/gradient` (attribute misfit); then `<stem>.png` beside it. Returns the paths written.
pub fn write_image(f: &ImageFile) -> Result<Vec<PathBuf>> {
    let p = f.problem;
    let [nx, ny, nz] = f.region.shape;
    let tmp = TempFile::create(f.path, "")?;
    {
        let file = H5File::create(tmp.open_path()).map_err(h5)?;
        let dataset = |name: &str, values: &[f64]| -> Result<H5Dataset> {
            let data = crop(values, &f.region);
            let ds = file.new_dataset::<f32>().shape([nz, ny, nx]).create(name).map_err(h5)?;
            ds.write_raw(&data).map_err(h5)?;
            ds.new_attr::<f64>().shape([3]).create("spacing").map_err(h5)?.write_array(&p.spacing).map_err(h5)?;
            ds.new_attr::<f64>().shape([3]).create("origin").map_err(h5)?.write_array(&f.region.origin).map_err(h5)?;
            ds.new_attr::<VarLenUnicode>().shape(()).create("axes").map_err(h5)?.write_string("zyx").map_err(h5)?;
            Ok(ds)
        };
        let image = dataset("image", f.image)?;
        image.new_attr::<u64>().shape(()).create("shots").map_err(h5)?.write_numeric(&(f.shots as u64)).map_err(h5)?;
        if let Some(g) = f.gradient {
            let ds = dataset("gradient", g)?;
            ds.new_attr::<f64>().shape(()).create("misfit").map_err(h5)?.write_numeric(&f.misfit).map_err(h5)?;
        }
    }
    let h5_path = tmp.commit()?;
    let png = h5_path.with_extension("png");
    write_section_png(&png, &crop(f.image, &f.region), f.region.shape)
        .with_context(|| format!("writing {}", png.display()))?;
    Ok(vec![h5_path, png])
}

/// Blue-white-red of `u` in [-1, 1].
fn colour(u: f32) -> [u8; 3] {
    let u = u.clamp(-1.0, 1.0);
    let [r, g, b] = if u >= 0.0 { [1.0, 1.0 - u, 1.0 - u] } else { [1.0 + u, 1.0 + u, 1.0] };
    [r, g, b].map(|c| (c * 255.0).round() as u8)
}

/// Pixels the longer side of the picture reaches at least (each point a square of pixels).
const PICTURE_SIDE: usize = 800;

/// The xz section at the middle y of a dense (nz, ny, nx) field as a PNG, each point a square of
/// pixels, clipped at the 99th percentile of |value|.
fn write_section_png(path: &Path, field: &[f32], [nx, ny, nz]: [usize; 3]) -> Result<()> {
    let iy = ny / 2;
    let section: Vec<f32> = (0..nz)
        .flat_map(|iz| (0..nx).map(move |ix| (iz, ix)))
        .map(|(iz, ix)| field[(iz * ny + iy) * nx + ix])
        .collect();
    let clip = clip_level(&section, 0.99);
    let scale = (PICTURE_SIDE / nx.max(nz).max(1)).max(1);
    let (w, h) = (nx * scale, nz * scale);
    let rgb: Vec<u8> = (0..h)
        .flat_map(|py| (0..w).map(move |px| (py / scale) * nx + px / scale))
        .flat_map(|i| colour(section[i] / clip))
        .collect();
    let mut tmp = TempFile::create(path, ".png")?;
    let mut encoder = png::Encoder::new(std::io::BufWriter::new(tmp.file()), w as u32, h as u32);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder.write_header()?;
    writer.write_image_data(&rgb)?;
    writer.finish()?;
    tmp.commit()?;
    Ok(())
}
