"""The barrier energy pass that also classifies its pairs (contact/potential.py _energy_classify, issue 19): the
energy has the bits of a pass of pair_energy (the pass before it), the classes are _classify's, and the layout of a point whose energy was evaluated
(the accepted point of a line search) is the one a fresh classification gives; on random piles of turned cubes
with point-triangle and edge-edge pairs within dhat (inactive, point-edge and full stencils among them)."""
import numpy as np
from numba import njit, prange

from solver_server.contact import find_candidates
from solver_server.contact.barrier_pair import pair_energy
from solver_server.threads import ordered_sum
from solver_server.contact import potential as P
from solver_server.contact.pairs import pair_set
from tests.ipc.test_broad_phase_cull import _pile


@njit(cache=True, fastmath=False, parallel=True)
def _energy_reference(x, ids, is_ee, off, epsx, dhat):
    """The barrier energy pass before the classification was folded into it: pair_energy per candidate (far
    candidates skipped), summed per chunk of potential._chunks, chunks summed by ordered_sum."""
    K = ids.shape[0]
    nch = max(1, min(K, 64))
    e = np.zeros(nch)
    for ch in prange(nch):
        X = np.empty(12)
        acc = 0.0
        for k in range(ch * K // nch, (ch + 1) * K // nch):
            for i in range(4):
                for a in range(3):
                    X[3 * i + a] = x[ids[k, i], a]
            if P.far_apart(X, is_ee[k], off[k], dhat):
                continue
            acc += pair_energy(X, is_ee[k], off[k], epsx[k], dhat)
        e[ch] = acc
    return ordered_sum(e)


def test_energy_classify_same_bits_and_classes():
    dhat = 0.004
    seen = set()
    for seed in range(4):
        x, mesh = _pile(seed, nbodies=10, div=3)
        rng = np.random.default_rng(seed)
        for trial in range(3):
            xt = np.ascontiguousarray(x + rng.normal(scale=1e-3, size=x.shape))
            cands = find_candidates(xt, mesh, dhat)
            ps = pair_set(cands, mesh, xt)
            e_ref = _energy_reference(xt, ps.ids, ps.is_ee, ps.off, ps.epsx, dhat)
            ns_ref = P._classify(xt, ps.ids, ps.is_ee, ps.off, ps.epsx, dhat)
            e, ns = P._energy_classify(xt, ps.ids, ps.is_ee, ps.off, ps.epsx, dhat)
            assert np.float64(e).tobytes() == np.float64(e_ref).tobytes()
            assert ns.dtype == ns_ref.dtype and ns.tobytes() == ns_ref.tobytes()
            seen.update(np.unique(ns_ref).tolist())
            # the energy pass leaves the classes for _layout: the same active pairs and block starts as a fresh one
            P._barrier_energy_impl(xt, cands, mesh, dhat, 1.0)
            assert P._recalled_classes(ps, xt, dhat) is not None
            a, b = P._layout(xt, ps, dhat)
            ps2 = pair_set(find_candidates(xt, mesh, dhat), mesh, xt)
            assert P._recalled_classes(ps2, xt, dhat) is None
            a2, b2 = P._layout(xt, ps2, dhat)
            assert a.tobytes() == a2.tobytes() and b.tobytes() == b2.tobytes()
            # another point's classes are not recalled
            assert P._recalled_classes(ps, xt + 1e-9, dhat) is None
    assert {0, 3, 4} <= seen   # inactive, point-edge and full stencils all met
