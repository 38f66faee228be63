"""The ``ipc`` backend: penetration-free FEM solids, cloth and rods (Incremental Potential Contact).

Builds the global system (solver_server/ipc/system.py), the contact terms (barrier, CCD, friction)
and an implicit-Euler time stepper; each advance() runs Settings.substeps steps and returns the
artist-ordered positions of every simulated body. The state is (x, v) of all vertices + the frame.
"""
from __future__ import annotations

import time
from typing import Optional

import numpy as np

from protocol.scene import Scene, SceneError
from solver_server.ipc.integrator import TimeStepper
from solver_server.ipc.system import build_system
from .base import Backend, FrameResult, ProgressFn


class IPCBackend(Backend):
    name = "ipc"

    def __init__(self, scene: Scene, progress: Optional[ProgressFn] = None, contact: bool = True,
                 linear_solver: str = "direct", tet_spacing: Optional[dict] = None):
        super().__init__(scene, progress)
        scene.validate()
        st = scene.settings
        self.system = build_system(scene, self.progress, tet_spacing)
        _choose_threads(self.system)
        self.progress("compiling", 0.0)
        ct = None
        if contact and len(self.system.coll_faces) + len(self.system.coll_edges) > 0:
            from solver_server.ipc.contact_bridge import ContactTerms
            ct = ContactTerms(self.system, st.contact_gap)
            self._check_initial(ct)
            ct.kappa = self._initial_kappa(ct)
        self.contact = ct
        self.stepper = TimeStepper(self.system, st.dt, st.gravity, st.newton_tol, st.max_newton_iterations, ct,
                                   linear_solver)
        self.progress("compiling", 1.0)

    def _check_initial(self, ct) -> None:
        """A scene that starts intersecting (or closer than zero contact distance) cannot be made
        penetration free: report both objects."""
        x = self.system.x0
        C = ct.C
        if hasattr(C, "find_intersections"):
            hits = C.find_intersections(x, ct.mesh.faces, ct.mesh.edges)
            pairs = _hit_pairs(hits, ct.mesh)
            if pairs:
                names = [b.name for b in self.system.blocks]
                a, b = pairs[0]
                raise SceneError(f"{names[a]} and {names[b]} intersect at the start frame; move them apart "
                                 f"(at least the contact gap {ct.dhat} m) before baking", names[a], "vertices")

    def _initial_kappa(self, ct) -> float:
        """Barrier stiffness kappa (J/m^2) in this integrator's convention, where the barrier enters the
        incremental potential as h^2 kappa B(x): the contact library's IPC rule (kappa_min from the
        mass scale, Li et al. 2020 Sec. 4.3) evaluated with the mass scale m_avg / h^2, which is
        the same stiffness as the paper's unscaled kappa B divided by h^2."""
        s = self.system
        h = self.scene.settings.dt
        m = s.mass[s.dynamic]
        m_avg = float(m.mean()) if m.size else 1.0
        C = ct.C
        if hasattr(C, "adaptive_kappa"):
            return float(C.adaptive_kappa(s.x0, ct.candidates(s.x0), ct.mesh, ct.dhat, m_avg / h ** 2))
        return m_avg / h ** 2

    def initial_positions(self) -> dict:
        return self.system.body_positions(self.system.x0)

    def advance(self) -> FrameResult:
        t0 = time.perf_counter()
        st = self.scene.settings
        its, contacts, dmin, ok = 0, 0, float("inf"), True
        for k in range(st.substeps):
            s = self.stepper.step(self.frame + (k + 1) / st.substeps)
            its += s.newton_iterations
            contacts = max(contacts, s.contacts)
            dmin = min(dmin, s.min_distance)
            ok = ok and s.converged
        self.frame += 1
        stats = {"newton_iterations": its, "contacts": contacts, "seconds": time.perf_counter() - t0,
                 "min_distance": dmin if np.isfinite(dmin) else None, "converged": ok}
        return FrameResult(self.frame, self.system.body_positions(self.stepper.x), stats)

    def get_state(self) -> dict:
        return {"x": self.stepper.x.copy(), "v": self.stepper.v.copy(), "frame": np.array(self.frame)}

    def set_state(self, state: dict, frame: int) -> None:
        x = np.asarray(state["x"], np.float64)
        if x.shape != self.stepper.x.shape:
            raise ValueError(f"state has {x.shape[0]} vertices, the scene has {self.stepper.x.shape[0]}")
        self.stepper.x = x.copy()
        self.stepper.v = np.asarray(state["v"], np.float64).copy()
        self.frame = int(frame)


SMALL_PROBLEM = 20000  # elements; below this numba's thread start-up costs more than it saves


def _choose_threads(system) -> None:
    """Run small scenes single-threaded: per-kernel parallel launch overhead (ms on a loaded 2-core
    machine) dominates kernels over a few thousand elements."""
    import numba
    el = system.elastic
    n = len(el.tets) + len(el.tris) + len(el.hinges) + len(el.rod_edges) + len(el.rod_bends)
    numba.set_num_threads(1 if n < SMALL_PROBLEM else numba.config.NUMBA_NUM_THREADS)


def _hit_pairs(hits, mesh) -> list:
    """Body pairs (a, b) from find_intersections output: any array-like of rows whose first two
    entries are (edge index, face index)."""
    if hits is None:
        return []
    arr = np.asarray(hits)
    if arr.size == 0:
        return []
    arr = arr.reshape(len(arr), -1)
    out = []
    for e, f in arr[:, :2].astype(np.int64):
        a = int(mesh.vertex_body[mesh.edges[e, 0]])
        b = int(mesh.vertex_body[mesh.faces[f, 0]])
        out.append((min(a, b), max(a, b)))
    return out
