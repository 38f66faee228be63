"""Granular column collapse runout against resolution, and the mu(I) rheology (issue 10; the study
and its table: tests/mpm/collapse.py, docs/mpm.md "Runout and resolution")."""
import functools

import numpy as np
import pytest

from .collapse import collapse, profile


@functools.lru_cache(maxsize=None)
def _deposit(spacing: float, grain_size: float = 1e-3) -> dict:
    return collapse(spacing, grain_size)


def test_rate_dependent_friction_shortens_the_slide():
    """mu(I) only adds friction where the sand flows: an (exaggerated) 1 cm grain size slows the
    collapsing column's front against rate-independent friction, same column, same grid."""
    fronts = {d: collapse(0.02, d, frames=8)["front"] for d in (0.0, 1e-2)}
    assert fronts[1e-2] < fronts[0.0] - 0.004      # measured 0.358 against 0.366 m at frame 8
    assert fronts[1e-2] > 0.3                      # ... and it still collapses (from 0.25 m)


@pytest.mark.slow
def test_collapse_deposit_bulk_converges():
    """The deposit's surface at spacing 1 cm and 0.5 cm agrees within 1.5 cm (7.5 % of the column
    height) wherever it is thicker than 5 cm; measured within 1.1 cm."""
    a, b = _deposit(0.01)["positions"], _deposit(0.005)["positions"]
    xa, ha = profile(a)
    xb, hb = profile(b)
    n = min(len(ha), len(hb))
    bulk = (ha[:n] > 0.05) & (hb[:n] > 0.05)
    assert bulk.sum() >= 15
    assert np.abs(ha[:n][bulk] - hb[:n][bulk]).max() < 0.015


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="the toe of the deposit (thin layers) lengthens as the spacing halves: "
                                       "front runout +30 % from 1 to 0.5 cm with d = 1 mm (docs/mpm.md)")
def test_collapse_front_runout_converges():
    """Front runout L_f - L_0 (furthest particle) changes by under 10 % from spacing 1 cm to 0.5 cm."""
    r1 = _deposit(0.01)["front"] - 0.25
    r2 = _deposit(0.005)["front"] - 0.25
    assert abs(r2 - r1) < 0.1 * r1
