//! The XDMF 3 sidecar (`<stem>.xdmf`) beside a result file, so that ParaView and VisIt open the
//! HDF5 datasets directly: the model as one grid, and each snapshot series as a temporal
//! collection of grids whose times are /snapshots/time.
//!
//! Every grid is a 3DCoRectMesh in the HDF5 arrays' own axis order, slowest first: Dimensions
//! "nz ny nx", Origin and spacing (GeometryType ORIGIN_DXDYDZ) as (z, y, x). A plane is a mesh one
//! point thick, placed at its plane's coordinate, so planes and volumes line up in the viewer.
//! Snapshot k of a series is a HyperSlab DataItem (start k, count 1 along the time axis) of the
//! series' dataset; each series' grids also carry the model (or its plane) as "vp". Datasets are
//! referenced by the result file's name, relative to the sidecar, which sits beside it.

use crate::output::result::{ResultFile, SnapshotSeries};
use std::fmt::Write;

/// Three numbers slowest axis first (z, y, x) from an (x, y, z) triple.
fn zyx(v: [f64; 3]) -> String {
    format!("{:?} {:?} {:?}", v[2], v[1], v[0])
}

fn dims(d: &[usize]) -> String {
    d.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(" ")
}

/// Topology and geometry of a grid with `shape` points ((x, y, z) order) from `origin`.
fn mesh(out: &mut String, ind: &str, shape: [usize; 3], origin: [f64; 3], spacing: [f64; 3]) {
    let [nx, ny, nz] = shape;
    let _ = writeln!(out, "{ind}<Topology TopologyType=\"3DCoRectMesh\" Dimensions=\"{nz} {ny} {nx}\"/>");
    let _ = writeln!(out, "{ind}<Geometry GeometryType=\"ORIGIN_DXDYDZ\">");
    for (name, v) in [("Origin", origin), ("Spacing", spacing)] {
        let _ = writeln!(
            out,
            "{ind}  <DataItem Name=\"{name}\" Dimensions=\"3\" NumberType=\"Float\" Precision=\"8\" Format=\"XML\">{}</DataItem>",
            zyx(v)
        );
    }
    let _ = writeln!(out, "{ind}</Geometry>");
}

/// A node-centred scalar on a grid of `points` (slowest first): the hyperslab `start`/`count` of
/// the f32 dataset `path` of `full` shape. The hyperslab's own Dimensions are the grid's, so that
/// readers take the selected values as the grid's points (VTK's reader takes a dimension beyond
/// the third as components).
#[allow(clippy::too_many_arguments)]
fn slab(
    out: &mut String,
    ind: &str,
    name: &str,
    h5: &str,
    path: &str,
    points: &[usize],
    full: &[usize],
    start: &[usize],
    count: &[usize],
) {
    let ones = vec![1; full.len()];
    let _ = writeln!(out, "{ind}<Attribute Name=\"{name}\" AttributeType=\"Scalar\" Center=\"Node\">");
    let _ =
        writeln!(out, "{ind}  <DataItem ItemType=\"HyperSlab\" Dimensions=\"{}\" Type=\"HyperSlab\">", dims(points));
    let _ = writeln!(
        out,
        "{ind}    <DataItem Dimensions=\"3 {}\" NumberType=\"Int\" Format=\"XML\">{} {} {}</DataItem>",
        full.len(),
        dims(start),
        dims(&ones),
        dims(count)
    );
    let _ = writeln!(
        out,
        "{ind}    <DataItem Dimensions=\"{}\" NumberType=\"Float\" Precision=\"4\" Format=\"HDF\">{h5}:{path}</DataItem>",
        dims(full)
    );
    let _ = writeln!(out, "{ind}  </DataItem>");
    let _ = writeln!(out, "{ind}</Attribute>");
}

/// Shape ((x, y, z) order), origin and the /model/vp hyperslab of a snapshot series' grid.
fn series_geometry(r: &ResultFile, s: &SnapshotSeries) -> ([usize; 3], [f64; 3], Vec<usize>, Vec<usize>) {
    let [nx, ny, nz] = r.shape;
    let mut shape = r.shape;
    let mut origin = r.origin;
    let mut start = vec![0, 0, 0];
    if let (Some(axis), Some(at), Some(index)) = (s.normal(), s.at, s.index) {
        shape[axis] = 1;
        origin[axis] = at;
        // /model/vp is (z, y, x): the normal axis a sits at position 2 - a.
        start[2 - axis] = index;
    }
    let count = vec![shape[2], shape[1], shape[0]];
    debug_assert!(count.iter().zip([nz, ny, nx]).all(|(c, n)| *c <= n));
    (shape, origin, start, count)
}

/// The sidecar's XML for result file `r`.
pub fn document(r: &ResultFile) -> String {
    let h5 = r.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let [nx, ny, nz] = r.shape;
    let mut out = String::new();
    out.push_str("<?xml version=\"1.0\" encoding=\"utf-8\"?>\n");
    out.push_str("<Xdmf xmlns:xi=\"http://www.w3.org/2001/XInclude\" Version=\"3.0\">\n  <Domain>\n");
    out.push_str("    <Grid Name=\"model\" GridType=\"Uniform\">\n");
    mesh(&mut out, "      ", r.shape, r.origin, r.spacing);
    let model = [nz, ny, nx];
    let has_model = r.has_model();
    if has_model {
        slab(&mut out, "      ", "vp", &h5, "/model/vp", &model, &model, &[0, 0, 0], &model);
    }
    out.push_str("    </Grid>\n");
    let nsnap = r.snapshot_times.len();
    for s in &r.snapshots {
        let (shape, origin, vp_start, count) = series_geometry(r, s);
        let full: Vec<usize> = std::iter::once(nsnap).chain(s.shape.iter().copied()).collect();
        let mut snap_count = vec![1];
        snap_count.extend(&s.shape);
        let _ = writeln!(out, "    <Grid Name=\"{}\" GridType=\"Collection\" CollectionType=\"Temporal\">", s.name);
        for (k, t) in r.snapshot_times.iter().enumerate() {
            let _ = writeln!(out, "      <Grid Name=\"{}_{k}\" GridType=\"Uniform\">", s.name);
            let _ = writeln!(out, "        <Time Value=\"{t:?}\"/>");
            mesh(&mut out, "        ", shape, origin, r.spacing);
            let mut start = vec![k];
            start.extend(std::iter::repeat_n(0, s.shape.len()));
            let series = format!("/snapshots/{}", s.name);
            slab(&mut out, "        ", "pressure", &h5, &series, &count, &full, &start, &snap_count);
            if has_model {
                slab(&mut out, "        ", "vp", &h5, "/model/vp", &count, &model, &vp_start, &count);
            }
            out.push_str("      </Grid>\n");
        }
        out.push_str("    </Grid>\n");
    }
    out.push_str("  </Domain>\n</Xdmf>\n");
    out
}

/// Writes the sidecar to `path` (through [`crate::output::safe::write_file`]).
pub fn write(r: &ResultFile, path: &std::path::Path) -> anyhow::Result<()> {
    crate::output::safe::write_file(path, document(r).as_bytes()).map(|_| ())
}
