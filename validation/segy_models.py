#!/usr/bin/env python3
"""Writes small velocity models as SEG-Y with segyio (IBM floats, rev 1) and the same values as
.npy, for tests/segy_models.rs (committed under tests/data/) and CI's SEG-Y model runs.

Usage: segy_models.py DIR [--inputs]

With --inputs also writes, for CI, inputs that run each model from its SEG-Y and from its .npy
(<model>_segy.toml, <model>_npy.toml): the two runs' traces must be equal bit for bit.

- model2d.sgy / model2d.npy: a 2D line of 24 traces 12.5 m apart (inline 1, crosslines 1..24,
  CDP x with scalar -10), 20 samples 10 m apart in depth (sample interval 10000: 10 m); the .npy
  is (x, z), depth fastest;
- model3d.sgy / model3d.npy: 4 inlines (y, 25 m apart, numbered 5, 7, 9, 11) of 6 crosslines (x,
  20 m apart, numbered 101..106), 10 samples 8 m apart; the .npy is (y, x, z).

Every velocity is a whole number of m/s, so IBM and IEEE floats hold it exactly.
"""

import sys
from pathlib import Path

import numpy as np
import segyio


def velocity(iy, ix, iz):
    return 1500.0 + 40.0 * iz + 3.0 * ix + 7.0 * iy + 11.0 * ((ix * 3 + iz) % 4)


def write(path, values, inlines, crosslines, xy, interval_us):
    """values: (traces, samples) in file order; inlines, crosslines, xy per trace (xy in m)."""
    ntr, ns = values.shape
    spec = segyio.spec()
    spec.format = 1
    spec.samples = np.arange(ns) * interval_us / 1000.0
    spec.tracecount = ntr
    with segyio.create(str(path), spec) as f:
        f.bin.update(
            {
                segyio.BinField.Interval: interval_us,
                segyio.BinField.Samples: ns,
                segyio.BinField.Format: 1,
                segyio.BinField.MeasurementSystem: 1,
                segyio.BinField.SEGYRevision: 1,
                segyio.BinField.SEGYRevisionMinor: 0,
                segyio.BinField.TraceFlag: 1,
            }
        )
        for t in range(ntr):
            f.header[t] = {
                segyio.TraceField.TRACE_SEQUENCE_FILE: t + 1,
                segyio.TraceField.INLINE_3D: int(inlines[t]),
                segyio.TraceField.CROSSLINE_3D: int(crosslines[t]),
                segyio.TraceField.SourceGroupScalar: -10,
                segyio.TraceField.CDP_X: int(round(xy[t][0] * 10)),
                segyio.TraceField.CDP_Y: int(round(xy[t][1] * 10)),
                segyio.TraceField.TRACE_SAMPLE_COUNT: ns,
                segyio.TraceField.TRACE_SAMPLE_INTERVAL: interval_us,
            }
            f.trace[t] = values[t].astype(np.float32)


RUN = """[grid]
{grid}

[model]
kind = "file"
{model}

[time]
steps = 80

[source]
position = {source}
frequency = 12.0

[[receivers]]
line = {{ start = {start}, end = {end}, count = 9 }}

[boundary]
kind = "cpml"
width = 4
"""

INPUTS = {
    "model2d": dict(grid="shape = [40, 10, 26]\nspacing = [7.0, 7.0, 7.0]", source="[140.0, 31.5, 70.0]",
                    start="[20.0, 31.5, 14.0]", end="[260.0, 31.5, 14.0]",
                    npy='axis_order = "xz"\nshape = [24, 20]\nspacing = [12.5, 10.0]'),
    "model3d": dict(grid="shape = [21, 16, 15]\nspacing = [5.0, 5.0, 5.0]", source="[50.0, 35.0, 40.0]",
                    start="[25.0, 40.0, 25.0]", end="[75.0, 40.0, 25.0]",
                    npy='axis_order = "yxz"\nshape = [4, 6, 10]\nspacing = [25.0, 20.0, 8.0]'),
}


def write_inputs(out):
    for name, i in INPUTS.items():
        models = {
            "segy": f'path = "{name}.sgy"\nformat = "segy"',
            "npy": f'path = "{name}.npy"\nformat = "npy"\n{i["npy"]}',
        }
        for kind, model in models.items():
            text = RUN.format(grid=i["grid"], model=model, source=i["source"], start=i["start"], end=i["end"])
            (out / f"{name}_{kind}.toml").write_text(text)


def main():
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    # 2D: x slowest, depth fastest.
    nx, nz = 24, 20
    v2 = np.array([[velocity(0, ix, iz) for iz in range(nz)] for ix in range(nx)], dtype=np.float32)
    write(out / "model2d.sgy", v2, [1] * nx, range(1, nx + 1), [(12.5 * ix, 0.0) for ix in range(nx)], 10000)
    np.save(out / "model2d.npy", v2)
    # 3D: y (inline) slowest, then x (crossline), depth fastest.
    ny, nx, nz = 4, 6, 10
    v3 = np.array(
        [[[velocity(iy, ix, iz) for iz in range(nz)] for ix in range(nx)] for iy in range(ny)], dtype=np.float32
    )
    il = [5 + 2 * iy for iy in range(ny) for ix in range(nx)]
    xl = [101 + ix for iy in range(ny) for ix in range(nx)]
    xy = [(1000.0 + 20.0 * ix, 500.0 + 25.0 * iy) for iy in range(ny) for ix in range(nx)]
    write(out / "model3d.sgy", v3.reshape(ny * nx, nz), il, xl, xy, 8000)
    np.save(out / "model3d.npy", v3)
    if "--inputs" in sys.argv:
        write_inputs(out)


if __name__ == "__main__":
    main()
