#!/usr/bin/env python3
"""A migrated image beside the model it images: the true velocity (/model/vp of a run's result
file on the same grid) above, the image (/image of `seismic-run migrate`'s file) below, both in m.

    validation/plot_migration.py IMAGE.h5 MODEL.h5 OUT.png [--title TEXT] [--clip-below DEPTH]

The image is drawn grey, clipped at the 98th percentile of |value| (of the points below DEPTH m,
0 by default: the shallowest part, around the shots, is often far stronger); the model in km/s.
"""
import argparse

import h5py
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def section(path, name):
    with h5py.File(path, "r") as f:
        d = f[name]
        values = np.asarray(d[...], dtype=np.float64)
        spacing = np.asarray(d.attrs["spacing"], dtype=np.float64)
        origin = np.asarray(d.attrs["origin"], dtype=np.float64)
    # (nz, ny, nx): the middle y.
    return values[:, values.shape[1] // 2, :], spacing, origin


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("image")
    p.add_argument("model")
    p.add_argument("out")
    p.add_argument("--title", default="")
    p.add_argument("--clip-below", type=float, default=0.0)
    a = p.parse_args()
    image, spacing, origin = section(a.image, "image")
    vp, _, _ = section(a.model, "model/vp")
    if vp.shape != image.shape:
        raise SystemExit(f"the model's grid {vp.shape} is not the image's {image.shape}")
    nz, nx = image.shape
    extent = [origin[0], origin[0] + (nx - 1) * spacing[0], origin[2] + (nz - 1) * spacing[2], origin[2]]
    depths = origin[2] + np.arange(nz) * spacing[2]
    clip = np.percentile(np.abs(image[depths >= a.clip_below]), 98)
    fig, axes = plt.subplots(2, 1, figsize=(10, 5.6), sharex=True, constrained_layout=True)
    m = axes[0].imshow(vp / 1000.0, extent=extent, cmap="viridis", aspect="equal")
    axes[0].set_title("velocity (km/s)")
    fig.colorbar(m, ax=axes[0], shrink=0.8)
    i = axes[1].imshow(image, extent=extent, cmap="gray", vmin=-clip, vmax=clip, aspect="equal")
    axes[1].set_title(a.title or "migrated image")
    fig.colorbar(i, ax=axes[1], shrink=0.8)
    for ax in axes:
        ax.set_ylabel("depth (m)")
    axes[1].set_xlabel("x (m)")
    fig.savefig(a.out, dpi=110)


if __name__ == "__main__":
    main()
