"""All internal elastic energies of the scene in one place: tets (solids; linear 4-node or quadratic 10-node,
elastic_tet10.py), membranes + shell bending (cloth),
stretch + bending (rods). Gives the total energy (J), gradient (3N,) and the PSD-projected Hessian as
COO triplets over the global vertex array. Hessian index patterns are computed once."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import bending, elastic_tet, elastic_tet10, membrane, rod_stretch, shell_bending
from solver_server.threads import threads_for
from .fem_common import hessian_pattern, scatter_gradient


def _empty(k: int) -> np.ndarray:
    return np.zeros((0, k), np.int32)


@dataclass
class ElasticTerms:
    """Flattened element arrays for every elastic term (SI units). Empty arrays switch a term off."""

    n_verts: int
    tets: np.ndarray = field(default_factory=lambda: _empty(4))
    tet_Dm_inv: np.ndarray = field(default_factory=lambda: np.zeros((0, 3, 3)))
    tet_vol: np.ndarray = field(default_factory=lambda: np.zeros(0))
    tet_mu: np.ndarray = field(default_factory=lambda: np.zeros(0))
    tet_lam: np.ndarray = field(default_factory=lambda: np.zeros(0))
    tet_model: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    tets10: np.ndarray = field(default_factory=lambda: _empty(10))  # quadratic tets (elastic_tet10.py)
    tet10_Dm_inv: np.ndarray = field(default_factory=lambda: np.zeros((0, 3, 3)))
    tet10_vol: np.ndarray = field(default_factory=lambda: np.zeros(0))
    tet10_mu: np.ndarray = field(default_factory=lambda: np.zeros(0))
    tet10_lam: np.ndarray = field(default_factory=lambda: np.zeros(0))
    tet10_model: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    tet10_mixed: bool = True  # mean-dilatation volumetric term (elastic_tet10.py); False: plain 4-point rule
    tris: np.ndarray = field(default_factory=lambda: _empty(3))
    tri_Dm_inv: np.ndarray = field(default_factory=lambda: np.zeros((0, 2, 2)))
    tri_area: np.ndarray = field(default_factory=lambda: np.zeros(0))
    tri_mu: np.ndarray = field(default_factory=lambda: np.zeros(0))
    tri_lam: np.ndarray = field(default_factory=lambda: np.zeros(0))
    tri_thick: np.ndarray = field(default_factory=lambda: np.zeros(0))
    shells: np.ndarray = field(default_factory=lambda: _empty(6))  # cloth bending (shell_bending.py)
    shell_K: np.ndarray = field(default_factory=lambda: np.zeros((0, 3, 3)))
    shell_th0: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)))
    rod_edges: np.ndarray = field(default_factory=lambda: _empty(2))
    rod_rest: np.ndarray = field(default_factory=lambda: np.zeros(0))
    rod_k: np.ndarray = field(default_factory=lambda: np.zeros(0))
    rod_bends: np.ndarray = field(default_factory=lambda: _empty(3))
    rod_kw: np.ndarray = field(default_factory=lambda: np.zeros(0))
    rod_d0: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def __post_init__(self):
        self._patterns = None

    def element_groups(self) -> list:
        """(name, element vertex indices) per element group, in the order of ``patterns`` and ``hessian_parts``."""
        return [("tets", self.tets), ("tets10", self.tets10), ("tris", self.tris), ("shells", self.shells),
                ("rod_edges", self.rod_edges), ("rod_bends", self.rod_bends)]

    def patterns(self) -> tuple:
        """Global COO (rows, cols) for the concatenated element Hessians (cached)."""
        if self._patterns is None:
            rows, cols = [], []
            for _, el in self.element_groups():
                if len(el):
                    r, c = hessian_pattern(np.ascontiguousarray(el))
                    rows.append(r)
                    cols.append(c)
            self._patterns = (np.concatenate(rows) if rows else np.zeros(0, np.int64),
                              np.concatenate(cols) if cols else np.zeros(0, np.int64))
        return self._patterns

    _GROUP_FIELDS = {"tets": "tet_", "tets10": "tet10_", "tris": "tri_", "shells": "shell_",
                     "rod_edges": "rod_rest rod_k", "rod_bends": "rod_kw rod_d0"}

    def subset(self, verts: np.ndarray) -> "ElasticTerms":
        """The elements with at least one vertex in the boolean mask ``verts`` (n_verts,), same units and
        vertex numbering: their Hessian's block over those vertices equals the whole Hessian's (an element
        without such a vertex adds nothing there). Used for Newton's local refinement (solvers/newton/newton.py)."""
        from dataclasses import fields, replace
        kw = {}
        names = [f.name for f in fields(self)]
        for group, el in self.element_groups():
            if not len(el):
                continue
            keep = verts[el].any(axis=1)
            kw[group] = np.ascontiguousarray(el[keep])
            pref = self._GROUP_FIELDS[group]
            owned = pref.split() if " " in pref else [n for n in names if n.startswith(pref) and n != group
                                                       and not (pref == "tet_" and n.startswith("tet10_"))]
            for n in owned:
                a = getattr(self, n)
                if isinstance(a, np.ndarray) and a.ndim and len(a) == len(el):
                    kw[n] = np.ascontiguousarray(a[keep])
        return replace(self, **kw)

    def n_elements(self) -> int:
        return sum(len(el) for _, el in self.element_groups())

    def energy(self, x: np.ndarray) -> float:
        """Total elastic energy (J); +inf if a neo-Hookean tet is inverted."""
        with threads_for(self.n_elements()):
            return self._energy(x)

    def gradient(self, x: np.ndarray) -> np.ndarray:
        """dE/dx (3N,) in N."""
        with threads_for(self.n_elements()):
            return self._gradient(x)

    def hessian(self, x: np.ndarray, project: bool = True) -> tuple:
        """(rows, cols, vals) COO of the (PSD-projected) Hessian, N/m. Kernels run multi-threaded only
        for big meshes on a machine with an idle core (threads.py)."""
        with threads_for(self.n_elements()):
            return self._hessian(x, project)

    def _energy(self, x: np.ndarray) -> float:
        e = 0.0
        if len(self.tets):
            e += elastic_tet.tet_energy(x, self.tets, self.tet_Dm_inv, self.tet_vol, self.tet_mu, self.tet_lam,
                                        self.tet_model)
        if len(self.tets10):
            e += elastic_tet10.tet10_energy(x, *self._t10())
        if len(self.tris):
            e += membrane.membrane_energy(x, self.tris, self.tri_Dm_inv, self.tri_area, self.tri_mu, self.tri_lam,
                                          self.tri_thick)
        if len(self.shells):
            e += shell_bending.shell_energy(x, self.shells, self.shell_K, self.shell_th0)
        if len(self.rod_edges):
            e += rod_stretch.stretch_energy(x, self.rod_edges, self.rod_rest, self.rod_k)
        if len(self.rod_bends):
            e += bending.bending_energy(1, x, self.rod_bends, self.rod_kw, self.rod_d0)
        return float(e)

    def _gradient(self, x: np.ndarray) -> np.ndarray:
        g = np.zeros(3 * self.n_verts)
        n = self.n_verts
        if len(self.tets):
            ge = elastic_tet.tet_gradient_elems(x, self.tets, self.tet_Dm_inv, self.tet_vol, self.tet_mu,
                                                self.tet_lam, self.tet_model)
            g += scatter_gradient(ge, self.tets, n)
        if len(self.tets10):
            g += scatter_gradient(elastic_tet10.tet10_gradient_elems(x, *self._t10()), self.tets10, n)
        if len(self.tris):
            ge = membrane.membrane_gradient_elems(x, self.tris, self.tri_Dm_inv, self.tri_area, self.tri_mu,
                                                  self.tri_lam, self.tri_thick)
            g += scatter_gradient(ge, self.tris, n)
        if len(self.shells):
            g += scatter_gradient(shell_bending.shell_gradient_elems(x, self.shells, self.shell_K, self.shell_th0),
                                  self.shells, n)
        if len(self.rod_edges):
            g += scatter_gradient(rod_stretch.stretch_gradient_elems(x, self.rod_edges, self.rod_rest, self.rod_k),
                                  self.rod_edges, n)
        if len(self.rod_bends):
            g += scatter_gradient(bending.bending_gradient_elems(1, x, self.rod_bends, self.rod_kw, self.rod_d0),
                                  self.rod_bends, n)
        return g

    def hessian_parts(self, x: np.ndarray, project: bool = True) -> list:
        """The values of ``hessian`` (N/m) as one flat array per element group, in the order of ``patterns``
        (their concatenation is hessian's vals): the Newton assembly sums them into the matrix without the
        concatenated copy (solvers/newton/assembly.py)."""
        with threads_for(self.n_elements()):
            return self._hessian_parts(x, project)

    def _hessian(self, x: np.ndarray, project: bool) -> tuple:
        vals = self._hessian_parts(x, project)
        rows, cols = self.patterns()
        return rows, cols, (np.concatenate(vals) if vals else np.zeros(0))

    def _hessian_parts(self, x: np.ndarray, project: bool) -> list:
        vals = []
        if len(self.tets):
            vals.append(elastic_tet.tet_hessian_elems(x, self.tets, self.tet_Dm_inv, self.tet_vol, self.tet_mu,
                                                      self.tet_lam, self.tet_model, project).reshape(-1))
        if len(self.tets10):
            vals.append(elastic_tet10.tet10_hessian_elems(x, *self._t10(), project).reshape(-1))
        if len(self.tris):
            vals.append(membrane.membrane_hessian_elems(x, self.tris, self.tri_Dm_inv, self.tri_area, self.tri_mu,
                                                        self.tri_lam, self.tri_thick, project).reshape(-1))
        if len(self.shells):
            vals.append(shell_bending.shell_hessian_elems(x, self.shells, self.shell_K, self.shell_th0).reshape(-1))
        if len(self.rod_edges):
            vals.append(rod_stretch.stretch_hessian_elems(x, self.rod_edges, self.rod_rest, self.rod_k,
                                                          project).reshape(-1))
        if len(self.rod_bends):
            vals.append(bending.bending_hessian_elems(1, x, self.rod_bends, self.rod_kw, self.rod_d0).reshape(-1))
        return vals

    def _t10(self) -> tuple:
        return (self.tets10, self.tet10_Dm_inv, self.tet10_vol, self.tet10_mu, self.tet10_lam, self.tet10_model,
                bool(self.tet10_mixed))

    def min_tet_volume_ratio(self, x: np.ndarray) -> float:
        """min over tets of current / rest volume (1 if no tets); <= 0 means an inverted tet. For
        quadratic tets: min of det F over each element's 14 check points (elastic_tet10.CHECK_L:
        quadrature points, corners, mid-edges)."""
        r = 1.0
        if len(self.tets):
            r = min(r, float((elastic_tet.tet_volumes(x, self.tets) / self.tet_vol).min()))
        if len(self.tets10):
            r = min(r, float(elastic_tet10.tet10_min_det(x, self.tets10, self.tet10_Dm_inv,
                                                         elastic_tet10.CHECK_L).min()))
        return r
