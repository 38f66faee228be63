"""One region of Newton's local refinement as an objective of its own (newton.py, ``local_refine``).

The region is a set R of free DOFs (whole vertices); every other DOF is held. The incremental potential
(integrator.py) then changes only through the terms that reach R: the inertia and gravity of R's vertices,
the elastic elements with a vertex in R, the contact and frozen friction pairs with a vertex in R and the
penalty rows of R. Everything else is a constant, so comparing those terms alone in the line search is
comparing the whole energy, and the gradient over R is theirs. The whole-mesh objective would evaluate every
element, pair and swept box on every local iteration (32^2 drape: 25-30 ms of a local iteration against
~45 ms for a global one; 64^2: 75-90 ms against ~200 ms); here the broad phase and the CCD sweep only see
elements whose boxes meet those of the region's elements (contact/broad_phase.py, ``near``).

Units as in integrator.py: positions m, energies J (h^2-scaled convention), gradient J/m, Hessian N/m.
"""
from __future__ import annotations

import numpy as np


class RegionObjective:
    """The incremental potential ``ip`` restricted to the free-DOF indices R (sorted, whole vertices), with the
    methods Newton's line search needs (prepare, accepted, max_step, line_search_energy, valid) and the region's
    gradient and Hessian. Built by IncrementalPotential.region (only without damping, external terms, affine
    bodies and attachment exclusions)."""

    def __init__(self, ip, R: np.ndarray):
        self.ip = ip
        self.R = R
        self.dofs = ip.free_dofs[R]
        self.sub, _, _, self.vin = ip._region_setup(R)
        self.rows = np.nonzero(self.vin & ip.dyn[:ip.nx])[0]     # region vertices with inertia
        self.pen = np.nonzero(self.vin[ip.pen_idx])[0] if len(ip.pen_idx) else np.zeros(0, np.int64)
        c = ip.contact
        self.fs = c.friction_subset(self.vin) if c is not None else None
        self.has_tets = bool(len(self.sub.tets) or len(self.sub.tets10))
        self.cands = None
        self._ls_cands = None
        # the global line search's candidates hold every pair within dhat at the accepted point: the first
        # local iteration starts from their pairs that touch the region (no broad phase)
        self._next_cands = None
        if c is not None and ip._next_cands is not None:
            from solver_server.contact.broad_phase import touching
            self._next_cands = touching(ip._next_cands, c.mesh, self.vin)

    def prepare(self, x: np.ndarray) -> None:
        """Contact candidates with a vertex in the region at x (the last accepted segment's, or a broad phase
        over the elements near the region)."""
        if self.ip.contact is None:
            return
        if self._next_cands is not None:
            self.cands, self._next_cands = self._next_cands, None
        else:
            self.cands = self.ip.contact.candidates(x, near=self.vin)

    def accepted(self, x: np.ndarray) -> None:
        """x (region DOFs moved) was accepted: the segment's candidates hold at x for the region; the whole
        objective's candidates from before the refinement no longer do (a fresh broad phase next time)."""
        self._next_cands = self._ls_cands
        self.ip._next_cands = None

    def _energy(self, x: np.ndarray, cands) -> float:
        ip = self.ip
        h2 = ip.h * ip.h
        r = self.rows
        d = x[r] - ip.x_tilde[r]
        m = ip.m[r]
        e = 0.5 * float((m[:, None] * d * d).sum()) - h2 * float((m[:, None] * x[r] * ip.g).sum())
        el = self.sub.energy(x[:ip.nx])
        if not np.isfinite(el):
            return np.inf
        e += h2 * el
        if len(self.pen):
            k = self.pen
            dp = x[ip.pen_idx[k]] - ip.pen_target[k]
            e += 0.5 * ip.kappa_m * float((ip.pen_w[k][:, None] * dp * dp).sum())
        if ip.contact is not None:
            e += h2 * ip.contact.energy(x, cands)
            e += h2 * ip.contact.friction_energy(x, ip.h, self.fs)
        return e

    def gradient(self, x: np.ndarray) -> np.ndarray:
        """The gradient over R (J/m): inertia, gravity, the elastic elements, penalty rows, contact and friction
        pairs that reach R."""
        ip = self.ip
        h2 = ip.h * ip.h
        g = ip.M3 * (x - ip.x_tilde).ravel()
        g -= h2 * (np.where(ip.dyn, ip.m, 0.0)[:, None] * ip.g[None, :]).ravel()
        g[:3 * ip.nx] += h2 * self.sub.gradient(x[:ip.nx])
        if len(ip.pen_idx):
            gp = np.zeros_like(x)
            gp[ip.pen_idx] = ip.kappa_m * ip.pen_w[:, None] * (x[ip.pen_idx] - ip.pen_target)
            g += gp.ravel()
        if ip.contact is not None:
            g += h2 * ip.contact.gradient_then_hessian(x, self.cands)
            gf = ip.contact.friction_gradient(x, ip.h, self.fs)
            if gf is not None:
                g += h2 * gf
        return g[self.dofs]

    def hessian(self, x: np.ndarray):
        """The R x R block of the projected Newton matrix (N/m, CSR) from the region's pairs."""
        return self.ip.region_hessian(x, self.R, cands=self.cands, friction=self.fs)

    def max_step(self, x: np.ndarray, p: np.ndarray) -> float:
        """CCD bound in (0, 1] of the step p (zero outside the region) over the pairs near the region."""
        if self.ip.contact is None:
            return 1.0
        return min(1.0, self.ip.contact.max_step(x, p, near=self.vin))

    def line_search_energy(self, x0: np.ndarray, x1: np.ndarray):
        """E restricted to the region's terms, valid on the segment x0 -> x1 (its swept candidates)."""
        cands = (self.ip.contact.candidates_swept(x0, x1, near=self.vin) if self.ip.contact is not None
                 else None)
        self._ls_cands = cands
        return lambda x: self._energy(x, cands)

    def valid(self, x: np.ndarray) -> bool:
        """False when a tet with a vertex in the region is inverted."""
        if not self.has_tets:
            return True
        return self.sub.min_tet_volume_ratio(x[:self.ip.nx]) > 0.0
