"""A segment's sub-list in one kernel (contact/pairs.py swept_near_pairs, issue 19): the pairs, their order and their
flattened PairSet equal those of swept_near_mask + sub_pairs byte for byte, on random piles of turned cubes with
moves that keep, drop and split the candidates, on a cut that keeps some pairs and drops others (so the two paths
are not compared on a trivial set), on 1 and 2 threads."""
import numba
import numpy as np

from solver_server.contact import find_candidates_ccd
from solver_server.contact.pairs import pair_set, sub_pairs, swept_near_mask, swept_near_pairs
from tests.ipc.test_broad_phase_cull import _pile


def _ref(cands, mesh, x0, x1, limit):
    ps = pair_set(cands, mesh, x0)
    return sub_pairs(cands, mesh, x0, swept_near_mask(x0, x1, ps.ids, ps.is_ee, ps.off, limit))


def _same(a, b):
    for f in ("pt", "ee"):
        u, v = np.asarray(getattr(a, f)), np.asarray(getattr(b, f))
        assert u.dtype == v.dtype and u.shape == v.shape and u.tobytes() == v.tobytes()
    for f in ("ids", "is_ee", "off", "epsx"):
        u, v = getattr(a._pairs, f), getattr(b._pairs, f)
        assert u.dtype == v.dtype and u.shape == v.shape and u.tobytes() == v.tobytes()


def test_swept_near_pairs_equal_mask_and_cut():
    dhat = 0.01
    kept_some = dropped_some = 0
    for seed in range(4):
        x0, mesh = _pile(seed, nbodies=10, div=3)
        rng = np.random.default_rng(seed)
        x1 = x0 + rng.normal(scale=0.01, size=x0.shape)
        cands = find_candidates_ccd(x0, x1, mesh, 4 * dhat)
        assert len(cands) > 50
        for limit in (0.0, 0.3 * dhat, dhat, 3 * dhat):
            for threads in (1, 2):
                numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
                try:
                    got = swept_near_pairs(cands, mesh, x0, x1, limit)
                    ref = _ref(cands, mesh, x0, x1, limit)
                finally:
                    numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
                _same(got, ref)
                kept_some += len(ref) > 0
                dropped_some += len(ref) < len(cands)
    assert kept_some and dropped_some
