"""Calibrated cloth material presets (SI units), shared by the add-on (Cloth role > Preset) and the tests.

Each preset gives the protocol.scene.Material fields of a cloth body. Areal density = density * thickness.
bending_stiffness is the flexural rigidity B per unit width (N m); the solver's bending energy reproduces it
on any mesh (docs/solver.md, "Cloth bending"). The membrane is isotropic, so for woven fabrics Young's
modulus is set from the fabric's in-plane *shear* rigidity G (N/m), E = 2 (1 + nu) G / thickness: woven
cloth shears tens of times more easily than it stretches, and the Cusick drape depends on shear as much as
on bending (a tensile-matched E makes the same silk drape with DC 0.73 instead of 0.38). Values and their sources are tabulated in docs/solver.md,
"Cloth presets"; the Cusick drape coefficients they give are measured by scripts/cusick_drape.py.
"""
from __future__ import annotations

CLOTH_PRESETS = {
    # name: (description, fields)
    "silk": ("Silk (crepe de chine, 68 g/m²): soft, fluid folds",
             dict(density=340.0, thickness=0.0002, youngs_modulus=4.0e5, poisson_ratio=0.3,
                  bending_stiffness=1.2e-6, friction=0.25)),
    "cotton": ("Cotton (plain-weave shirting, 130 g/m²)",
               dict(density=325.0, thickness=0.0004, youngs_modulus=1.5e6, poisson_ratio=0.3,
                    bending_stiffness=1.0e-5, friction=0.4)),
    "denim": ("Denim (12 oz/yd², 400 g/m²): heavy, stiff folds",
              dict(density=550.0, thickness=0.00073, youngs_modulus=1.5e6, poisson_ratio=0.3,
                   bending_stiffness=1.3e-4, friction=0.5)),
    "leather": ("Garment leather (1 mm, 800 g/m²)",
                dict(density=800.0, thickness=0.001, youngs_modulus=1.0e7, poisson_ratio=0.4,
                     bending_stiffness=5.0e-4, friction=0.6)),
    "rubber": ("Rubber sheet (1 mm natural rubber, E = 2 MPa)",
               dict(density=1100.0, thickness=0.001, youngs_modulus=2.0e6, poisson_ratio=0.49,
                    bending_stiffness=2.2e-4, friction=0.8)),
}
"""Preset name -> (one-line description, Material fields)."""
