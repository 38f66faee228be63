"""Air drag, force fields and pressure in one implicit step (model/force_fields.py, energies/air.py,
energies/pressure.py): the terms the incremental potential adds, already scaled by the step.

With h the potential's step (h_e under BDF-2), x_hat the velocity reference (v = (x - x_hat)/h) and the
normals, areas, air velocities and field accelerations lagged at the step start x^n (fields at the step's
end time), the step adds

  air drag      sum_t h c_t / 2 (n_t . (xbar_t - xhatbar_t - h u_t))^2         c_t = k_t A_t (energies/air.py)
  rod air drag  sum_s h c_s / 2 |P_s (xbar_s - xhatbar_s - h u_s)|^2           c_s = k_s d_s l_s, P_s = I - tau tau^T
  Force fields  -h^2 sum_i m_i a_i . x_i  +  h / 2 sum_i m_i r_i |x_i - x_hat_i|^2   (a_i m/s^2, r_i flow 1/s)
  pressure      h^2 (-sum_t p_t V_t(x))
  sewing        h^2 sum_s k_s / 2 |x_a - x_b|^2                       (energies/seam.py)
  attachments   sum_a c_a / 2 |x_v - sum_j b_j x_tj - gamma_a n_a(x)|^2,   c_a = ATTACH_KAPPA (m_v + h^2 K_v)
                (energies/attachment.py; n_a the anchor triangle's current unit normal, m_v the attached
                vertex's mass, K_v the largest diagonal entry of its elastic Hessian at rest; Gauss-Newton
                Hessian)

all convex quadratics except pressure (its element Hessians are PSD-projected). Units: J, N, N/m. The terms
are written in the vertex positions x = W z (model/dof_map.py): an attachment to a stiff body reaches its
affine DOFs through the map, so the potential pulls their gradients and Hessians back (W^T g, W^T H W).
"""
from __future__ import annotations

import numpy as np

from solver_server.energies import air, attachment, pressure, seam
from solver_server.energies.fem_common import hessian_pattern
from solver_server.model.attachments import ATTACH_KAPPA
from solver_server.model.force_fields import ExternalSpec


def vertex_stiffness(system) -> np.ndarray:
    """(N,) N/m: the largest diagonal entry of each vertex's elastic Hessian at the rest positions."""
    n = system.n
    rows, cols, vals = system.elastic.hessian(np.ascontiguousarray(system.x0[:n]))
    d = rows == cols
    diag = np.bincount(np.asarray(rows)[d], weights=np.asarray(vals)[d], minlength=3 * n)
    return diag[:3 * n].reshape(n, 3).max(axis=1)


class ExternalForces:
    """Builds the per-step terms of a System's ExternalSpec (None when the scene has none)."""

    def __init__(self, system):
        self.spec = system.external if system.external is not None else ExternalSpec()
        self.mass = system.mass
        self.n = system.n
        self.frame_start = system.frame_start
        sp = self.spec
        self._air_rc = hessian_pattern(sp.air_tris) if len(sp.air_tris) else None
        self._p_rc = hessian_pattern(sp.pressure_tris) if len(sp.pressure_tris) else None
        self._s_rc = hessian_pattern(sp.seams) if len(sp.seams) else None
        self._g_rc = hessian_pattern(sp.air_segs) if len(sp.air_segs) else None
        self.att = getattr(system, "attachments", None)
        if self.att is not None:
            at = self.att
            self.att_elems = attachment.elements(at.verts, at.tris)
            self._a_rc = hessian_pattern(self.att_elems)
            self.att_mass = np.ascontiguousarray(system.mass[at.verts], np.float64)
            self.att_stiff = np.ascontiguousarray(vertex_stiffness(system)[at.verts])

    def for_step(self, x_n: np.ndarray, x_hat: np.ndarray, h: float, frame_end: float) -> "StepExternal":
        """The terms of the step from x^n (vertex rows (N, 3)) ending at fractional frame ``frame_end``."""
        return StepExternal(self, np.ascontiguousarray(x_n[:self.n]), np.ascontiguousarray(x_hat[:self.n]), h,
                            frame_end - self.frame_start)


class StepExternal:
    """energy / gradient / hessian of one step's external terms on the vertex rows (N, 3)."""

    def __init__(self, ef: ExternalForces, x_n: np.ndarray, x_hat: np.ndarray, h: float, frame_index: float):
        sp = ef.spec
        self.ef, self.h, self.x_hat, self.n = ef, h, x_hat, ef.n
        self.has_air = len(sp.air_tris) > 0
        if self.has_air:
            self.normal, area = air.lagged_frame(x_n, sp.air_tris)
            self.air_disp = np.ascontiguousarray(h * sp.air_velocity(x_n, frame_index))
            self.hc = np.ascontiguousarray(h * sp.air_k * area)
            self.air_vals = air.drag_hessian_elems(sp.air_tris, self.normal, self.hc).reshape(-1)
        self.has_segs = len(sp.air_segs) > 0
        if self.has_segs:
            self.tau, length = air.lagged_tangents(x_n, sp.air_segs)
            self.seg_disp = np.ascontiguousarray(h * sp.segment_air_velocity(x_n, frame_index))
            self.seg_hc = np.ascontiguousarray(h * sp.seg_kd * length)
            self.seg_vals = air.segment_hessian_elems(self.tau, self.seg_hc).reshape(-1)
        acc, rate = sp.acceleration(x_n, frame_index) if len(sp.vertex_weight) else (None, None)
        self.has_field = acc is not None and (np.any(acc) or np.any(rate))
        if self.has_field:
            self.force = (h * h) * ef.mass[:, None] * acc      # N * s^2: the linear term's coefficient
            self.flow_c = h * ef.mass * rate                    # kg: h m_i r_i
        self.has_pressure = len(sp.pressure_tris) > 0
        self.has_seams = len(sp.seams) > 0
        self.p = sp.pressure_at(frame_index) if self.has_pressure else None   # Pa per triangle (keyed: this step's)
        self.has_att = ef.att is not None
        if self.has_att:
            self.att_coef = np.ascontiguousarray(ATTACH_KAPPA * (ef.att_mass + h * h * ef.att_stiff))
        # True when the Hessian changes within the step (pressure; attachments held above their triangle)
        self.varies = self.has_pressure or (self.has_att and bool(np.any(ef.att.height != 0.0)))

    def energy(self, x: np.ndarray) -> float:
        sp = self.ef.spec
        e = 0.0
        if self.has_air:
            e += air.drag_energy(x, self.x_hat, sp.air_tris, self.normal, self.air_disp, self.hc)
        if self.has_segs:
            e += air.segment_energy(x, self.x_hat, sp.air_segs, self.tau, self.seg_disp, self.seg_hc)
        if self.has_field:
            d = x - self.x_hat
            e += -float((self.force * x).sum()) + 0.5 * float((self.flow_c[:, None] * d * d).sum())
        if self.has_pressure:
            e += self.h * self.h * pressure.pressure_energy(x, sp.pressure_tris, self.p)
        if self.has_seams:
            e += self.h * self.h * seam.seam_energy(x, sp.seams, sp.seam_k)
        if self.has_att:
            e += attachment.attach_energy(x, self.ef.att_elems, self.ef.att.bary, self.ef.att.height, self.att_coef)
        return e

    def gradient(self, x: np.ndarray) -> np.ndarray:
        """(3N,) N."""
        sp = self.ef.spec
        g = np.zeros(3 * self.n)
        if self.has_air:
            g += air.drag_gradient(x, self.x_hat, sp.air_tris, self.normal, self.air_disp, self.hc, self.n)
        if self.has_segs:
            g += air.segment_gradient(x, self.x_hat, sp.air_segs, self.tau, self.seg_disp, self.seg_hc, self.n)
        if self.has_field:
            g += (-self.force + self.flow_c[:, None] * (x - self.x_hat)).ravel()
        if self.has_pressure:
            g += self.h * self.h * pressure.pressure_gradient(x, sp.pressure_tris, self.p, self.n)
        if self.has_seams:
            g += self.h * self.h * seam.seam_gradient(x, sp.seams, sp.seam_k, self.n)
        if self.has_att:
            g += attachment.attach_gradient(x, self.ef.att_elems, self.ef.att.bary, self.ef.att.height,
                                            self.att_coef, self.n)
        return g

    def hessian(self, x: np.ndarray, project: bool = True) -> tuple:
        """COO (rows, cols, vals) over the 3N vertex DOFs, N/m."""
        sp = self.ef.spec
        rows, cols, vals = [], [], []
        if self.has_air:
            rows.append(self.ef._air_rc[0])
            cols.append(self.ef._air_rc[1])
            vals.append(self.air_vals)
        if self.has_segs:
            rows.append(self.ef._g_rc[0])
            cols.append(self.ef._g_rc[1])
            vals.append(self.seg_vals)
        if self.has_field and np.any(self.flow_c):
            d = np.repeat(np.arange(self.n, dtype=np.int64), 3) * 3 + np.tile(np.arange(3), self.n)
            rows.append(d)
            cols.append(d)
            vals.append(np.repeat(self.flow_c, 3))
        if self.has_pressure:
            rows.append(self.ef._p_rc[0])
            cols.append(self.ef._p_rc[1])
            vals.append(self.h * self.h * pressure.pressure_hessian_elems(x, sp.pressure_tris, self.p,
                                                                         project).reshape(-1))
        if self.has_seams:
            rows.append(self.ef._s_rc[0])
            cols.append(self.ef._s_rc[1])
            vals.append(self.h * self.h * seam.seam_hessian_elems(sp.seam_k).reshape(-1))
        if self.has_att:
            rows.append(self.ef._a_rc[0])
            cols.append(self.ef._a_rc[1])
            vals.append(attachment.attach_hessian_elems(x, self.ef.att_elems, self.ef.att.bary, self.ef.att.height,
                                                        self.att_coef).reshape(-1))
        if not rows:
            return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
        return np.concatenate(rows), np.concatenate(cols), np.concatenate(vals)
