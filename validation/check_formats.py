#!/usr/bin/env python3
"""Reads the files seismic-run derives from a result file with independent readers and compares
them with h5py's reading of the result file itself.

Usage: check_formats.py RESULT.h5

- <stem>.sgy with segyio: the binary header (format 5, revision 2.0, sample count and interval,
  fixed-length traces), every trace's samples equal to /receivers/pressure, and the trace headers'
  numbers, coordinates (with their scalar), elevations, offsets, counts and intervals;
- <stem>.xdmf with VTK's XDMF reader: the grids' dimensions, origins and spacings (x, y, z), the
  time steps equal to /snapshots/time, and every point value at every time equal to the dataset;
- <stem>.snapshots.gif with Pillow: one frame per snapshot, the size of <stem>.snapshot.png; the
  PNGs decode, and their title rows hold text.

Exits non-zero, listing every failure, when anything is wrong.
"""

import struct
import sys
import tomllib
from pathlib import Path

import h5py
import numpy as np

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
    return cond


def scaled(value, scalar):
    """A SEG-Y integer with its scalar applied: negative scalars divide, positive multiply."""
    if scalar < 0:
        return value / -scalar
    return value * (scalar if scalar > 0 else 1)


def check_segy(path, f, source):
    import segyio

    traces = f["receivers/pressure"][...]
    positions = f["receivers/position"][...]
    dt = float(f["receivers/pressure"].attrs["dt"])
    nrec, ns = traces.shape
    with segyio.open(str(path), ignore_geometry=True) as s:
        b = s.bin
        check(b[segyio.BinField.Format] == 5, f"{path}: format code {b[segyio.BinField.Format]}, expected 5")
        rev = (b[segyio.BinField.SEGYRevision], b[segyio.BinField.SEGYRevisionMinor])
        check(rev == (2, 0), f"{path}: revision {rev}, expected (2, 0)")
        check(b[segyio.BinField.TraceFlag] == 1, f"{path}: fixed-length flag not set")
        check(b[segyio.BinField.ExtendedHeaders] == 0, f"{path}: extended textual headers present")
        check(b[segyio.BinField.Samples] == ns, f"{path}: {b[segyio.BinField.Samples]} samples, expected {ns}")
        check(b[segyio.BinField.ExtSamples] == ns, f"{path}: extended sample count differs")
        check(b[segyio.BinField.Interval] == round(dt * 1e6), f"{path}: interval {b[segyio.BinField.Interval]} us")
        check(s.tracecount == nrec, f"{path}: {s.tracecount} traces, expected {nrec}")
        check(len(s.samples) == ns, f"{path}: segyio sees {len(s.samples)} samples")
        text = s.text[0]
        text = text.decode("ascii", "replace") if isinstance(text, bytes) else str(text)
        check("SEG-Y_REV2.0" in text[38 * 80 : 39 * 80], f"{path}: textual line 39 is not SEG-Y_REV2.0")
        check("END TEXTUAL HEADER" in text[39 * 80 :], f"{path}: textual line 40 is not END TEXTUAL HEADER")
        for i in range(nrec):
            check(np.array_equal(s.trace[i], traces[i]), f"{path}: trace {i} samples differ from /receivers/pressure")
            h = s.header[i]
            T = segyio.TraceField
            for field, want in ((T.TRACE_SEQUENCE_LINE, i + 1), (T.TRACE_SEQUENCE_FILE, i + 1),
                                (T.FieldRecord, 1), (T.TraceNumber, i + 1), (T.CoordinateUnits, 1),
                                (T.TRACE_SAMPLE_COUNT, ns), (T.TRACE_SAMPLE_INTERVAL, round(dt * 1e6))):
                check(h[field] == want, f"{path}: trace {i} header {field} = {h[field]}, expected {want}")
            cs, es = h[T.SourceGroupScalar], h[T.ElevationScalar]
            got = [scaled(h[k], cs) for k in (T.SourceX, T.SourceY, T.GroupX, T.GroupY)]
            want = [source[0], source[1], positions[i, 0], positions[i, 1]]
            # Exact where a power-of-ten scalar (at most 1/10000) makes them integers, else rounded
            # to the scalar's unit.
            unit = 1.0 / max(-cs, 1)
            check(np.allclose(got, want, rtol=0, atol=0.5 * unit + 1e-9),
                  f"{path}: trace {i} coordinates {got}, expected {want} within {unit / 2}")
            eunit = 1.0 / max(-es, 1)
            check(np.isclose(scaled(h[T.ReceiverGroupElevation], es), -positions[i, 2], rtol=0, atol=0.5 * eunit + 1e-9),
                  f"{path}: trace {i} receiver elevation differs from -z")
            check(np.isclose(scaled(h[T.SourceDepth], es), source[2], rtol=0, atol=0.5 * eunit + 1e-9),
                  f"{path}: trace {i} source depth")
            dx, dy = positions[i, 0] - source[0], positions[i, 1] - source[1]
            # Whole metres, halves away from zero.
            off = int(np.floor(np.hypot(dx, dy) + 0.5)) * (-1 if dx < 0 else 1)
            check(h[T.offset] == off, f"{path}: trace {i} offset {h[T.offset]}, expected {off}")
    # The exact interval (rev 2 extended field, bytes 3273-3280, microseconds, big-endian double).
    raw = path.read_bytes()
    ext = struct.unpack(">d", raw[3272:3280])[0]
    check(abs(ext - dt * 1e6) <= 1e-9 * dt * 1e6, f"{path}: extended interval {ext} us, expected {dt * 1e6}")


def check_xdmf(path, f):
    from vtkmodules.util.numpy_support import vtk_to_numpy
    from vtkmodules.vtkCommonExecutionModel import vtkStreamingDemandDrivenPipeline as Pipeline
    from vtkmodules.vtkIOXdmf2 import vtkXdmfReader

    vp = f["model/vp"]
    spacing = tuple(float(v) for v in vp.attrs["spacing"])
    origin = np.array(vp.attrs["origin"], dtype=float)
    nz, ny, nx = vp.shape
    times = f["snapshots/time"][...] if "snapshots" in f else np.array([])
    r = vtkXdmfReader()
    r.SetFileName(str(path))
    r.UpdateInformation()
    info = r.GetOutputInformation(0)
    steps = np.array(info.Get(Pipeline.TIME_STEPS()) if info.Has(Pipeline.TIME_STEPS()) else [])
    check(np.array_equal(steps, times), f"{path}: time steps {steps}, expected /snapshots/time {times}")
    series = {n: f["snapshots"][n] for n in f["snapshots"] if n.startswith("pressure")} if len(times) else {}
    for k, t in enumerate(times if len(times) else [0.0]):
        r.UpdateTimeStep(t)
        out = r.GetOutputDataObject(0)
        blocks = {out.GetMetaData(b).Get(out.NAME()): out.GetBlock(b) for b in range(out.GetNumberOfBlocks())}
        check(set(blocks) == {"model", *series}, f"{path}: grids {sorted(blocks)}, expected model and {sorted(series)}")
        for name, blk in blocks.items():
            dims, o = [nx, ny, nz], origin.copy()
            vp_ref = vp[...]
            if name != "model":
                ds = series[name]
                normal = {"zx": 1, "yx": 2, "zy": 0}.get(ds.attrs["axes"])
                ref = ds[k]
                if normal is not None:
                    dims[normal] = 1
                    o[normal] = float(ds.attrs["at"])
                    i = int(ds.attrs["index"])
                    vp_ref = np.take(vp_ref, [i], axis=2 - normal)
                    check(np.isclose(o[normal], origin[normal] + i * spacing[normal]),
                          f"{path}: {name} at {o[normal]} is not grid index {i}")
                got = vtk_to_numpy(blk.GetPointData().GetArray("pressure"))
                check(np.array_equal(got, ref.ravel()), f"{path}: {name} at t = {t}: pressure differs from h5py")
            got_vp = vtk_to_numpy(blk.GetPointData().GetArray("vp"))
            check(np.array_equal(got_vp, vp_ref.ravel()), f"{path}: {name}: vp differs from h5py")
            check(list(blk.GetDimensions()) == dims, f"{path}: {name} dimensions {blk.GetDimensions()}, expected {dims}")
            check(np.allclose(blk.GetOrigin(), o), f"{path}: {name} origin {blk.GetOrigin()}, expected {o}")
            check(np.allclose(blk.GetSpacing(), spacing), f"{path}: {name} spacing {blk.GetSpacing()}, expected {spacing}")


def has_text(img, box):
    """Whether the box (left, top, right, bottom) of an RGB image holds dark pixels (text)."""
    a = np.asarray(img.convert("L").crop(box))
    return (a < 100).sum() > 50


def check_pictures(stem, f):
    from PIL import Image

    nsnap = len(f["snapshots/time"]) if "snapshots" in f else 0
    png = Path(f"{stem}.snapshot.png")
    gif = Path(f"{stem}.snapshots.gif")
    gather = Path(f"{stem}.gather.png")
    if check(png.exists() and gif.exists(), f"{stem}: snapshot picture or animation missing"):
        with Image.open(png) as p:
            size = p.size
            check(has_text(p, (0, 0, p.size[0], 60)), f"{png}: no title text")
            check(has_text(p, (0, p.size[1] - 40, p.size[0], p.size[1])), f"{png}: no x axis label")
        with Image.open(gif) as g:
            check(g.format == "GIF", f"{gif}: format {g.format}")
            check(g.n_frames == nsnap, f"{gif}: {g.n_frames} frames, expected {nsnap}")
            check(g.size == size, f"{gif}: size {g.size}, expected {size} (the snapshot picture's)")
            g.seek(g.n_frames - 1)
            check(has_text(g.convert("RGB"), (0, 0, g.size[0], 60)), f"{gif}: last frame has no title text")
    if "receivers" in f and check(gather.exists(), f"{gather}: missing"):
        with Image.open(gather) as p:
            check(has_text(p, (0, 0, p.size[0], 60)), f"{gather}: no title text")


def main():
    result = Path(sys.argv[1])
    stem = result.with_suffix("")
    with h5py.File(result, "r") as f:
        source = tomllib.loads(f.attrs["input"])["source"]["position"]
        check_segy(stem.with_suffix(".sgy"), f, source)
        check_xdmf(stem.with_suffix(".xdmf"), f)
        check_pictures(stem, f)
    if failures:
        print(f"{result}: {len(failures)} failures")
        for x in failures:
            print("  " + x)
        sys.exit(1)
    print(f"{result}: SEG-Y (segyio), XDMF (VTK) and pictures (Pillow) agree with the HDF5")


if __name__ == "__main__":
    main()
