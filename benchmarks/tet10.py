"""Quadratic (10-node) vs linear (4-node) tetrahedra: accuracy and cost, measured in one run.

1. Cantilever (1 m x 0.1 m x 0.1 m, clamped, own weight, tip sag L/1000, stable neo-Hookean): tip
   deflection / Euler-Bernoulli for nu = 0.3, 0.45, 0.49 at several cell counts (6 tets per cube
   cell), with the nodes and the elastic gradient + Hessian time of one Newton iteration.
2. A soft cube (0.2 m, 2x2 quads per face) dropped on a floor with the Accurate solver: seconds per
   implicit-Euler step and Newton iterations, linear vs quadratic on the same tets.
``python -m benchmarks [--quick] tet10`` (--quick: without the 80x8x8 linear cantilever, 8 frames).
"""
from __future__ import annotations

import time

import numpy as np

from tests.ipc.beam import box_mesh, elastic_terms, static_solve

from .report import Table

TITLE = "Quadratic vs linear tetrahedra: cantilever against Euler-Bernoulli, cost per step"


def cantilever(cells, quadratic, nu, mixed=True, E=1.0e6, L=1.0, H=0.1):
    w = 1e-3 * E * H ** 2 / 1.5
    d_eb = 1.5 * w * L ** 4 / (E * H ** 2)
    X, tets = box_mesh((L, H, H), cells)
    nodes, el, m = elastic_terms(X, tets, E, nu, "stable_neo_hookean", quadratic, mixed)
    f = np.zeros_like(nodes)
    f[:, 2] = -w * m
    x = static_solve(el, nodes, f, nodes[:, 0] < 1e-9)
    tip = np.abs(X[:, 0] - L) < 1e-9
    ratio = -(x[:len(X)][tip, 2] - X[tip, 2]).mean() / d_eb
    el.gradient(x), el.hessian(x)  # warm
    reps = 5
    t0 = time.perf_counter()
    for _ in range(reps):
        el.gradient(x)
        el.hessian(x)
    return ratio, len(nodes), (time.perf_counter() - t0) / reps


def drop(element, frames):
    from protocol.scene import Body, Material, Scene, Settings
    from solver_server.backends.mesh_backend import MeshBackend
    from solver_server.model.primitives import box, grid_sheet
    V, T = box((0.2, 0.2, 0.2), center=(0, 0, 0.13), divisions=2)
    G, GT, _ = grid_sheet((1.0, 1.0), (2, 2))
    mat = Material(youngs_modulus=1e5, poisson_ratio=0.3, density=1000.0, friction=0.0, element=element)
    b = MeshBackend(Scene(Settings(frame_end=frames + 1, solver_quality="accurate"),
                         (Body("cube", "solid", V, T, material=mat), Body("floor", "collider", G, GT))))
    b.advance()  # compile
    sec = its = steps = 0
    for _ in range(frames - 1):
        r = b.advance()
        sec += r.stats["seconds"]
        its += r.stats["newton_iterations"]
        steps += r.stats["steps"]
        assert b.contact.count_intersections(b.stepper.x) == 0
    return b.system.n, sec / steps, its / steps


def section(quick: bool = False) -> list:
    runs = [("linear", (20, 2, 2)), ("linear", (40, 4, 4)), ("quadratic, plain 4-point", (10, 2, 2)),
            ("quadratic, plain 4-point", (20, 2, 2)), ("quadratic", (5, 1, 1)), ("quadratic", (10, 2, 2)),
            ("quadratic", (20, 2, 2))]
    if not quick:
        runs.insert(2, ("linear", (80, 8, 8)))
    beam = Table(["element", "cells", "nodes", "nu = 0.3", "nu = 0.45", "nu = 0.49", "el. ms (nu = 0.3)"])
    for kind, cells in runs:
        r = [cantilever(cells, kind != "linear", nu, "plain" not in kind) for nu in (0.3, 0.45, 0.49)]
        beam.add(kind, "x".join(map(str, cells)), r[0][1], f"{r[0][0]:.3f}", f"{r[1][0]:.3f}", f"{r[2][0]:.3f}",
                 f"{1e3 * r[0][2]:.2f}")
    frames = 8 if quick else 16
    step = Table(["element", "nodes", "s / step", "Newton its / step"])
    res = {}
    for el in ("linear", "quadratic"):
        n, sec, its = drop(el, frames)
        res[el] = sec
        step.add(el, n, f"{sec:.4f}", f"{its:.1f}")
    return ["Cantilever 1 m x 0.1 m x 0.1 m, tip deflection / Euler-Bernoulli (Timoshenko shear adds ~1% at nu = 0.3; "
            "exact ~1.01), stable neo-Hookean, lumped loads. `quadratic` is the product's element (mean-dilatation "
            "volumetric term), `plain 4-point` the same element without it. `el. ms` = elastic gradient + Hessian "
            "of one Newton iteration (the machine is shared: compare rows of one run only).", beam,
            f"Soft cube (0.2 m, E = 100 kPa) dropped on a floor, Accurate solver, frames 2-{frames}, same tets:", step,
            f"Quadratic / linear cost per step: {res['quadratic'] / res['linear']:.1f}x"]
