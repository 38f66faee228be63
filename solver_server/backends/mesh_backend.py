"""The ``ipc`` backend: penetration-free FEM solids, cloth and rods (Incremental Potential Contact).

Builds the global system (solver_server/model/system.py), the contact terms (barrier, CCD, friction)
and an implicit-Euler time stepper; each advance() runs Settings.substeps steps and returns the
artist-ordered positions of every simulated body. The state is (x, v) of all vertices + the frame.
"""
from __future__ import annotations

import sys
import time
from typing import Optional

import numpy as np

from protocol.scene import PREVIEW_ERROR, Scene, SceneError
from solver_server.integrators.damping import vertex_damping
from solver_server.integrators.energy_guard import EnergyGuard
from solver_server.integrators.external import ExternalForces
from solver_server.solvers.newton.integrator import TimeStepper
from solver_server.model.system import build_system
from .base import Backend, FrameResult, ProgressFn


KAPPA_FACTOR = 10.0  # barrier stiffness = KAPPA_FACTOR * kappa_min (geometric middle of [kmin, 100 kmin])


class MeshBackend(Backend):
    name = "ipc"

    def __init__(self, scene: Scene, progress: Optional[ProgressFn] = None, contact: bool = True,
                 linear_solver: str = "direct", tet_spacing: Optional[dict] = None):
        super().__init__(scene, progress)
        scene.validate()
        st = scene.settings
        if getattr(st, "solver_quality", "accurate") == "fast":
            _refuse_quadratic_in_fast(scene)
            _refuse_damping_in_fast(scene)
            _refuse_air_in_fast(scene)
            _refuse_attachments_in_fast(scene)
        # stiff bodies are affine bodies in both solvers (Fast: one 12-DOF block each, blockdescent/affine_block.py)
        self.system = build_system(scene, self.progress, tet_spacing, affine=True)
        # a collision shape that leaves vertices of its object outside (model/collision_shapes.py): said on stderr
        # (headless bakes) and in the first frame's stats (key "shape_warning"); the bake goes on
        self.shape_warning = "\n".join(self.system.stats.get("shape_warnings", []))
        if self.shape_warning:
            print(f"warning: {self.shape_warning}", file=sys.stderr, flush=True)
        _choose_threads(self.system, fast=getattr(st, "solver_quality", "accurate") == "fast")
        self.progress("compiling", 0.0)
        ct = None
        if contact and len(self.system.coll_faces) + len(self.system.coll_edges) > 0:
            from solver_server.contact.terms import ContactTerms
            ct = ContactTerms(self.system, st.contact_gap)
            self._check_initial(ct)
            ct.kappa = self._initial_kappa(ct)
        self.contact = ct
        self.quality = getattr(st, "solver_quality", "accurate")
        if self.quality == "fast":
            from solver_server.solvers.block_descent import stepper as bd
            self.steps_per_substep = bd.STEPS_PER_SUBSTEP
            self.sweep_budget = bd.SWEEP_BUDGET
            h = st.dt / self.steps_per_substep
            if ct is not None:
                ct.kappa = self._initial_kappa(ct, h)
            self.stepper = bd.BlockDescentStepper(self.system, h, st.gravity, st.newton_tol * h, self.sweep_budget, ct,
                                               integrator=getattr(st, "integrator", "implicit_euler"))
        else:
            self.stepper = TimeStepper(self.system, st.dt, st.gravity, st.newton_tol, st.max_newton_iterations, ct,
                                       linear_solver, integrator=getattr(st, "integrator", "implicit_euler"),
                                       damping=vertex_damping(self.system, scene),
                                       external=ExternalForces(self.system) if (self.system.external is not None or
                                                                                self.system.attachments is not None)
                                       else None)
        self.guard = EnergyGuard(self.system, st.gravity, ct)
        # force fields, pressure and seams put energy in that the guard's total does not count (air drag alone
        # only takes it out): their steps are steps with external work
        self.external_work = (self.system.external is not None and self.system.external.does_work) or \
            self.system.attachments is not None or self.system.rest_schedule is not None
        # (attachment springs hold energy the guard's total leaves out; a keyed Shrink changes the rest shape)
        self.progress("compiling", 1.0)

    def _check_initial(self, ct) -> None:
        """A scene that starts intersecting cannot be made penetration free: name every pair of
        intersecting objects and where they meet. Colliders are prescribed and never resolved by the
        solver, so collider/collider contact (a ball resting on the floor) and a collider crossing
        itself are not errors."""
        x = self.system.x0
        hits = ct.find_intersections(x)   # an attachment's own pairs are left out (model/attachments.py)
        roles = np.array([b.role == "collider" for b in self.system.blocks], bool)
        found = intersecting_pairs(x, hits, ct.mesh, roles)
        if found:
            names = [b.name for b in self.system.blocks]
            raise SceneError(intersection_message(found, names, ct.mesh, format_length(ct.dhat)),
                             names[next(iter(found))[0]], "vertices")

    def _initial_kappa(self, ct, h: Optional[float] = None) -> float:
        """Barrier stiffness kappa (J/m^2) in this integrator's convention, where the barrier enters the
        incremental potential as h^2 kappa B(x): the contact library's bounds (kappa_min from the mass
        scale, Li et al. 2020 Sec. 4.3, kappa_max = 100 kappa_min) evaluated with the mass scale
        m_avg / h^2, and kappa = sqrt(kappa_min kappa_max) = KAPPA_FACTOR kappa_min. At kappa_min a cloth
        rests ~3% of dhat above its offset surface, deep in the log barrier's stiff end, and the
        drape needed 1.75x the Newton iterations (docs/solver.md); 10x keeps resting gaps at ~1/3 dhat."""
        s = self.system
        h = self.scene.settings.dt if h is None else h
        m = s.mass[s.dynamic]
        m_avg = float(m.mean()) if m.size else 1.0
        kmin, kmax = ct.C.kappa_bounds(s.x0, ct.dhat, m_avg / h ** 2)
        return float(min(KAPPA_FACTOR * kmin, kmax))

    def initial_positions(self) -> dict:
        return self.system.body_positions(self.system.z0)

    def advance(self) -> FrameResult:
        """One frame: Settings.substeps converged Newton steps (Accurate, the default), or the preview's
        block-descent steps (Fast), which stop at their sweep budget and are reported unconverged."""
        t0 = time.perf_counter()
        st = self.scene.settings
        its, contacts, dmin, missed, residual = 0, 0, float("inf"), 0, 0.0
        preview = self.quality == "fast"
        n_steps = st.substeps * (self.steps_per_substep if preview else 1)
        before = self.system.body_positions(self.stepper.x)
        bc = self.system.bc_index
        if self.guard.last is None:
            self.guard.start(self.stepper.x, self.stepper.v)
        corrections = self.guard.corrections
        for k in range(n_steps):
            bc_start = self.stepper.x[bc].copy()
            if preview:
                s = self.stepper.step(self.frame + (k + 1) / n_steps, stats=k == n_steps - 1)
            else:
                s = self.stepper.step(self.frame + (k + 1) / n_steps)
            moved = bool(len(bc)) and not np.array_equal(self.stepper.x[bc], bc_start)
            if self.guard.after_step(self.stepper.x, self.stepper.v, external_work=moved or self.external_work):
                self.stepper.history.reset()   # BDF-2 restarts from the corrected state
            its += s.newton_iterations
            contacts = max(contacts, s.contacts)
            dmin = min(dmin, s.min_distance)
            missed += 0 if s.converged else 1
            residual = max(residual, s.residual)
        self.frame += 1
        after = self.system.body_positions(self.stepper.x)
        stats = {"newton_iterations": its, "contacts": contacts, "seconds": time.perf_counter() - t0,
                 "min_distance": dmin if np.isfinite(dmin) else None, "steps": n_steps}
        if self.shape_warning and self.frame == self.scene.settings.frame_start + 1:
            stats["shape_warning"] = self.shape_warning
        if preview:
            # block descent never evaluates the stop test (integrators/stop_test.py): no step is called converged;
            # lagged_steps: steps after which a keyframed object or pin had not reached its keyframe
            stats.update(converged=False, unconverged_steps=n_steps, preview=True, lagged_steps=missed,
                         energy_corrections=self.guard.corrections - corrections,
                         unconverged_objects="\n".join(b.name for b in self.scene.bodies if b.role != "collider"),
                         warning=preview_warning(self.sweep_budget, missed))
            return FrameResult(self.frame, after, stats)
        stats.update(converged=missed == 0, unconverged_steps=missed, energy_corrections=self.guard.corrections - corrections)
        if missed:
            names, why = self.diagnose(before, after, n_steps, st.dt * st.substeps / n_steps)
            stats["unconverged_objects"] = "\n".join(names)
            stats["residual"] = residual
            stats["warning"] = (f"{missed} of {n_steps} solver steps did not meet the tolerance (Newton IPC stopped at "
                                f"Max Newton Iterations ({st.max_newton_iterations}) with a residual of "
                                f"{residual:.3g} m/s against Newton Tolerance {st.newton_tol:g} m/s): {why}")
        return FrameResult(self.frame, after, stats)

    def diagnose(self, before: dict, after: dict, n_steps: int, h: float) -> tuple:
        """(object names, sentence) for a frame that did not converge: the simulated objects that
        moved too far per step (too fast: more than a tenth of their size) or whose elastic waves
        cross them many times per step (too stiff for the time step), else the objects that moved
        most. A heuristic that names the likely cause, not a proof."""
        bodies = {b.name: b for b in self.scene.bodies}
        fast, stiff, moved = [], [], []
        for name, p1 in after.items():
            b = bodies.get(name)
            if b is None:
                continue
            size = float(np.linalg.norm(np.ptp(b.vertices, axis=0))) or 1.0
            step = float(np.linalg.norm(np.asarray(p1, np.float64) - before[name], axis=1).max()) / max(n_steps, 1)
            moved.append((step, name))
            if step > 0.1 * size:
                fast.append((name, f"{name} moves {step:.3g} m per step ({step / h:.3g} m/s), too fast for the time step"))
                continue
            m = b.material
            rigid_body = b.role == "stiff"    # an affine body: no elastic waves
            if b.role in ("solid", "cloth", "rod", "stiff") and not rigid_body:
                crossings = (m.youngs_modulus / m.density) ** 0.5 * h / size
                if crossings > 20.0:
                    stiff.append((name, f"{name} is too stiff for the time step (Young's modulus {m.youngs_modulus:g} Pa: "
                                 f"a wave crosses it {crossings:.0f} times per step)"))
        if fast or stiff:
            names = [n for n, _ in fast + stiff]
            fix = "raise Substeps" + (", or lower Young's Modulus" if stiff else "") + \
                  ("" if self.quality != "fast" else ", or use Solver Quality Converged")
            return names, "; ".join(t for _, t in fast + stiff) + f". Fix: {fix}."
        moved.sort(reverse=True)
        names = [n for d, n in moved[:3] if d > 0] or [n for d, n in moved[:1]]
        fix = ("raise Max Newton Iterations or Substeps" if self.quality != "fast"
               else "raise Substeps or use Solver Quality Converged")
        return names, (f"no object is too fast or too stiff; most likely hard contact or tight folds of "
                       f"{', '.join(names)}. Fix: {fix}.")

    def get_state(self) -> dict:
        # with (x, v): whatever else shapes the next step (BDF-2's previous state; Fast's adaptive start
        # and contact list), so a resumed bake equals an uninterrupted one bit for bit
        more = self.stepper.checkpoint() if self.quality == "fast" else self.stepper.history.checkpoint()
        return {"x": self.stepper.x.copy(), "v": self.stepper.v.copy(), "frame": np.array(self.frame), **more}

    def set_state(self, state: dict, frame: int) -> None:
        x = np.asarray(state["x"], np.float64)
        if x.shape != self.stepper.x.shape:
            raise ValueError(f"state has {x.shape[0]} vertices, the scene has {self.stepper.x.shape[0]}")
        self.stepper.x = x.copy()
        self.stepper.v = np.asarray(state["v"], np.float64).copy()
        self.guard.last = None         # the energy guard restarts from the resumed state (next advance)
        if self.quality == "fast":
            self.stepper.restore(state)
        else:
            self.stepper.history.restore(state)   # an older state without it: BDF-2 restarts (integrators/bdf2.py)
        self.frame = int(frame)


SMALL_PROBLEM = 5000  # elements; below this numba's thread start-up costs more than it saves (threads.PARALLEL_MIN_ITEMS)


def _choose_threads(system, fast: bool = False) -> None:
    """Run small scenes single-threaded: per-kernel parallel launch overhead (ms on a loaded 2-core
    machine) dominates kernels over a few thousand elements. The Fast solver decides per step from
    its vertex count and the machine's load instead (blockdescent/stepper.py): its sweep batches
    are long enough to pay for the threads from a few thousand vertices."""
    import numba
    el = system.elastic
    n = len(el.tets) + len(el.tets10) + len(el.tris) + len(el.shells) + len(el.rod_edges) + len(el.rod_bends)
    numba.set_num_threads(1 if n < SMALL_PROBLEM and not fast else numba.config.NUMBA_NUM_THREADS)


def format_length(metres: float) -> str:
    """A length for people: '2 mm', '0.35 m', '12 um' (3 significant digits)."""
    a = abs(float(metres))
    if a >= 0.1 or a == 0.0:
        return f"{metres:.3g} m"
    if a >= 1e-4:
        return f"{metres * 1e3:.3g} mm"
    return f"{metres * 1e6:.3g} um"


def format_point(p) -> str:
    """World position (m) as '(x, y, z) m' with millimetre resolution."""
    return "(" + ", ".join(f"{float(c):.3f}" for c in p) + ") m"


def _edge_triangle_point(x: np.ndarray, e: np.ndarray, f: np.ndarray) -> np.ndarray:
    """Where the segment e (2 vertex ids) meets the plane of triangle f (3 ids); the segment's
    midpoint when they are coplanar."""
    p0, p1 = x[e[0]], x[e[1]]
    a, b, c = x[f[0]], x[f[1]], x[f[2]]
    n = np.cross(b - a, c - a)
    den = float(n @ (p1 - p0))
    if den == 0.0:
        return 0.5 * (p0 + p1)
    t = min(max(float(n @ (a - p0)) / den, 0.0), 1.0)
    return p0 + t * (p1 - p0)


def preview_warning(sweep_budget: int, lagged_steps: int) -> str:
    """The one sentence every Preview (block descent) frame carries: what it is, what it is not."""
    lag = (f"; in {lagged_steps} steps a keyframed object or pin also lagged behind its keyframe"
           if lagged_steps else "")
    return (f"Preview solver: block-descent steps stop at their budget ({sweep_budget} sweeps), not at the Newton "
            f"Tolerance, so no frame is converged (measured: {PREVIEW_ERROR} from the converged answer){lag}. "
            "Bake with Solver Quality Converged for the final result")


def _refuse_quadratic_in_fast(scene: Scene) -> None:
    """The Fast (block-descent) solver has linear tets only: name the first quadratic solid."""
    for b in scene.bodies:
        if b.role == "solid" and getattr(b.material, "element", "linear") == "quadratic":
            raise SceneError(f"{b.name}: quadratic tetrahedra (Element: Quadratic) need the Converged solver; set "
                             "Solver Quality to Converged, or the object's Element to Linear for the Preview solver",
                             b.name, "element")


def _refuse_damping_in_fast(scene: Scene) -> None:
    """The Fast (block-descent) solver has no material damping (ipc/damping.py): name the first
    simulated body that asks for it."""
    for b in scene.bodies:
        if b.role in ("solid", "cloth", "rod") and getattr(b.material, "damping", 0.0) > 0.0:
            raise SceneError(f"{b.name}: material Damping ({b.material.damping:g} s) needs the Converged solver; set "
                             "Solver Quality to Converged, or the object's Damping to 0 for the Preview solver",
                             b.name, "damping")


def _refuse_air_in_fast(scene: Scene) -> None:
    """The Preview (block-descent, "fast") solver has no air drag, force fields, pressure or sewing
    (integrators/external.py) and does not take cloth vertex-group maps (a global shrink measured 0.83 for 0.8
    after 48 frames): name the first object that asks for one."""
    fields = tuple(getattr(scene, "force_fields", ()))
    for b in scene.bodies:
        m = b.material
        if b.role in ("cloth", "solid", "stiff", "rod") and getattr(m, "air_drag", 0.0) > 0.0:
            raise SceneError(f"{b.name}: Air Drag ({m.air_drag:g} Pa·s/m) needs the Converged solver; set Solver "
                             "Quality to Converged, or the object's Air Drag to 0 for the Preview solver", b.name,
                             "air_drag")
        keyed = getattr(b, "pressure_samples", None)
        if b.role == "cloth" and (getattr(m, "pressure", 0.0) != 0.0 or (keyed is not None and np.any(keyed))):
            raise SceneError(f"{b.name}: Pressure ({m.pressure:g} Pa) needs the Converged solver; set Solver "
                             "Quality to Converged, or the object's Pressure to 0 for the Preview solver", b.name,
                             "pressure")
        if b.role == "cloth" and getattr(m, "sewing", 0.0) > 0.0:
            raise SceneError(f"{b.name}: Sewing needs the Converged solver; set Solver Quality to Converged, or the "
                             "object's Sewing to 0 for the Preview solver", b.name, "sewing")
        if b.role == "cloth" and (getattr(b, "vertex_scales", None) is not None or
                                  getattr(b, "shrink_samples", None) is not None):
            raise SceneError(f"{b.name}: vertex-group maps (stiffness, bending, mass, shrink) need the Converged "
                             "solver; set Solver Quality to Converged, or clear the object's map groups and Shrink for "
                             "the Preview solver", b.name, "vertex_scales")
    if fields:
        f = fields[0]
        raise SceneError(f"{f.name}: force fields need the Converged solver; set Solver Quality to Converged, or "
                         "turn off Force Fields in the Clearance bake settings for the Preview solver", f.name,
                         "force_fields")


def surface_parts(mesh, body: int) -> int:
    """Number of separate pieces (connected by shared vertices) of one body's collision surface."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components
    faces = mesh.faces[mesh.vertex_body[mesh.faces[:, 0]] == body]
    if not len(faces):
        return 1
    ids, local = np.unique(faces, return_inverse=True)
    local = local.reshape(faces.shape)
    rows = np.concatenate([local[:, 0], local[:, 1]])
    cols = np.concatenate([local[:, 1], local[:, 2]])
    graph = coo_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(ids), len(ids)))
    return int(connected_components(graph, directed=False)[0])


def intersection_message(found: dict, names: list, mesh, gap: str) -> str:
    """One line for a scene that starts intersecting: each object that crosses itself (said once, as
    itself: a joined object of two overlapping parts is not two objects) and each pair of objects
    that cross, where, and what to do. ``found`` is :func:`intersecting_pairs`' result."""
    own, pairs = [], []
    for (a, b), pt in found.items():
        if a == b:
            if surface_parts(mesh, a) > 1:
                own.append(f"{names[a]} intersects itself (at {format_point(pt)}): two of its parts overlap; "
                           "separate them (Edit Mode, P > By Loose Parts) and move them apart")
            else:
                own.append(f"{names[a]} intersects itself (at {format_point(pt)}): its surface passes through "
                           "itself; fix the mesh so that it does not cross itself")
        else:
            pairs.append(f"{names[a]} and {names[b]} (at {format_point(pt)})")
    if pairs:
        own.append(f"{'; '.join(pairs)} intersect at the start frame; move them apart (at least the "
                   f"contact gap {gap}) before baking")
    return "; ".join(own)


def _refuse_attachments_in_fast(scene: Scene) -> None:
    """The Preview (block-descent) solver has no attachment coupling: name the first attached object."""
    for b in scene.bodies:
        if getattr(b, "attach_to", ""):
            raise SceneError(f"{b.name}: Attach To ({b.attach_to}) needs the Converged solver; set Solver Quality to "
                             "Converged, or clear the object's Attach To for the Preview solver", b.name, "attach_to")


def intersecting_pairs(x: np.ndarray, hits, mesh, is_collider: np.ndarray) -> dict:
    """{(body a, body b) with a <= b: world point (3,) of one edge-triangle intersection} from
    find_intersections rows (edge index, face index), ignoring every pair whose two bodies are
    colliders (colliders are prescribed; the solver never separates them)."""
    out = {}
    arr = np.asarray(hits, np.int64).reshape(-1, 2) if hits is not None else np.zeros((0, 2), np.int64)
    if not len(arr):
        return out
    ba = mesh.vertex_body[mesh.edges[arr[:, 0], 0]]
    bb = mesh.vertex_body[mesh.faces[arr[:, 1], 0]]
    keep = ~(is_collider[ba] & is_collider[bb])
    lo = np.minimum(ba, bb)[keep]
    hi = np.maximum(ba, bb)[keep]
    rows = arr[keep]
    _, first = np.unique(lo * (len(is_collider) + 1) + hi, return_index=True)
    for k in np.sort(first):
        e, f = rows[k]
        out[(int(lo[k]), int(hi[k]))] = _edge_triangle_point(x, mesh.edges[e], mesh.faces[f])
    return out
