"""Cusick drape test of the cloth presets (protocol/cloth_presets.py) with the Accurate solver: the scene,
the drape to rest and the drape coefficient. Used by test_cusick_drape.py and scripts/cusick_drape.py.

A circular specimen 30 cm in diameter is clamped between two 18 cm discs (the pinned centre of the sheet)
and drapes under gravity until at rest. Drape coefficient DC = (projected area - disc area) /
(specimen area - disc area) (Cusick 1968; BS 5058 / ISO 9073-9 geometry). The projected (shadow) area is
rasterised at 0.5 mm."""
from __future__ import annotations

import time

import numpy as np

from protocol.cloth_presets import CLOTH_PRESETS
from protocol.scene import Body, Material, Scene, Settings
from solver_server.backends.mesh_backend import MeshBackend
from solver_server.model.primitives import disc_sheet

R_SHEET = 0.15   # m
R_DISC = 0.09    # m
HEIGHT = 0.5     # m, table height of the disc


def clamp_rings(spacing: float) -> np.ndarray:
    """Ring radii ~``spacing`` apart with rings at R_DISC -/+ spacing/2, both pinned: a clamp made of pinned
    vertices acts midway between its last two pinned rows (the Peirce strip equals the elastica clamped
    h/2 behind its last pinned column to 0.05 degrees, docs/solver.md), so the effective clamp edge is at
    R_DISC whatever the spacing."""
    a = R_DISC - spacing / 2
    b = R_DISC + spacing / 2
    n_in = max(1, int(round(a / spacing)))
    n_out = max(1, int(round((R_SHEET - b) / spacing)))
    return np.concatenate([a * np.arange(1, n_in + 1) / n_in, b + (R_SHEET - b) * np.arange(0, n_out + 1) / n_out])


def cusick_scene(fields: dict, spacing: float = 0.01, frames: int = 72, seed: int = 0) -> Scene:
    """The Cusick specimen of material ``fields`` (protocol.scene.Material keyword arguments)."""
    V, T, _ = disc_sheet(R_SHEET, spacing, center=(0.0, 0.0, HEIGHT), jitter=0.15, seed=seed,
                         ring_radii=clamp_rings(spacing))
    pins = np.nonzero(np.linalg.norm(V[:, :2], axis=1) <= R_DISC + spacing / 2 + 1e-9)[0].astype(np.int32)
    cloth = Body("specimen", "cloth", V, T, material=Material(**fields), pin_indices=pins)
    return Scene(Settings(frame_end=frames + 1, substeps=1, solver_quality="accurate"), (cloth,))


def drape_coefficient(x: np.ndarray, T: np.ndarray, pixel: float = 5e-4) -> float:
    """DC from the positions x (n, 3) of the specimen's triangles T: shadow area on the XY plane."""
    n = int(np.ceil(2 * R_SHEET / pixel)) + 2
    c = (np.arange(n) + 0.5) * pixel - R_SHEET - pixel
    mask = np.zeros((n, n), bool)
    P = x[:, :2]
    for a, b, cc in P[T]:
        lo = np.floor((np.minimum(np.minimum(a, b), cc) + R_SHEET + pixel) / pixel).astype(int)
        hi = np.ceil((np.maximum(np.maximum(a, b), cc) + R_SHEET + pixel) / pixel).astype(int)
        lo = np.clip(lo, 0, n - 1)
        hi = np.clip(hi, 0, n)
        X, Y = np.meshgrid(c[lo[0]:hi[0]], c[lo[1]:hi[1]], indexing="ij")
        d = (b[0] - a[0]) * (cc[1] - a[1]) - (b[1] - a[1]) * (cc[0] - a[0])
        if abs(d) < 1e-18:
            continue
        l1 = ((X - a[0]) * (cc[1] - a[1]) - (Y - a[1]) * (cc[0] - a[0])) / d
        l2 = ((b[0] - a[0]) * (Y - a[1]) - (b[1] - a[1]) * (X - a[0])) / d
        mask[lo[0]:hi[0], lo[1]:hi[1]] |= (l1 >= 0) & (l2 >= 0) & (l1 + l2 <= 1)
    shadow = mask.sum() * pixel * pixel
    disc = np.pi * R_DISC ** 2
    return float((shadow - disc) / (np.pi * R_SHEET ** 2 - disc))


def run(name: str, spacing: float = 0.01, frames: int = 72, fields: dict | None = None) -> dict:
    """Drape one preset to rest; returns DC, node count, timings and the final positions."""
    fields = fields or CLOTH_PRESETS[name][1]
    sc = cusick_scene(fields, spacing, frames)
    body = sc.bodies[0]
    t0 = time.perf_counter()
    b = MeshBackend(sc)
    dcs = []
    for f in range(frames):
        b.advance()
        if f % 12 == 11:
            dcs.append(drape_coefficient(b.stepper.x[:len(body.vertices)], body.triangles))
    x = b.stepper.x[:len(body.vertices)].copy()
    dc = drape_coefficient(x, body.triangles)
    rim = np.linalg.norm(body.vertices[:, :2], axis=1) > R_SHEET - 1e-6
    ang = np.arctan2(x[rim, 1], x[rim, 0])
    r = np.linalg.norm(x[rim, :2], axis=1)[np.argsort(ang)]
    nodes = int(((r > np.roll(r, 1)) & (r > np.roll(r, -1)) & (r > np.median(r))).sum())
    return dict(name=name, dc=dc, history=dcs, nodes=nodes, seconds=time.perf_counter() - t0, x=x,
                T=body.triangles, vmax=float(np.abs(b.stepper.v).max()), n_verts=len(body.vertices))
