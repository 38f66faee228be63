"""Solid material presets with real moduli (SI units), shared by the add-on (Solid / Stiff role >
Apply Material Preset) and the tests.

Each preset gives the protocol.scene.Material fields of a volumetric body: density (kg/m³), Young's
modulus E (Pa, the small-strain modulus), Poisson ratio nu and friction. The solver's isotropic
hyperelastic models (neo-Hookean by default) take E and nu as their small-strain limits. Sources,
tabulated in docs/solver.md "Solid presets":

- rubber: soft natural-rubber vulcanisate. Treloar, *The Physics of Rubber Elasticity* (3rd ed., 1975):
  shear modulus G of about 0.4 MPa for lightly cross-linked natural rubber; rubber's bulk modulus is
  thousands of times G, so E = 3G (Hertz, "Elastomers - an engineering material", Rubber Chem. Technol.
  80 (2007)). E = 1.5 MPa (G = 0.5 MPa). The bulk modulus (~2 GPa) makes nu = 0.4999; 0.49 is the
  preset (the panel's limit is 0.499). At 0.49 linear tetrahedra lock in bending: use Element
  Quadratic for rubber that bends (docs/solver.md, "Solid presets").
  Density 1100 kg/m³ (unfilled natural rubber 930, filled compounds 1100-1200).
- jelly: a dessert gelatin gel. Czerner et al., "Determination of elastic modulus of gelatin gels by
  indentation experiments", Procedia Materials Science 8 (2015) 287-296: gelatin gels lie in the
  1-100 kPa range; Bonavia (2025), arXiv:2512.20502: 4.3 kPa at 20:1 water to gelatin powder (soft,
  wobbly) up to 277 kPa at 2:1. E = 5 kPa; nu = 0.49 (a water-swollen gel deforms at constant
  volume on the time scale of a wobble); density 1020 kg/m³ (water plus a few % gelatin and sugar).
- flesh: soft tissue (skin, fat and relaxed muscle together). Isogai et al., "Young's moduli of
  subcutaneous tissues and muscles under different loads at the gluteal region calculated using
  ultrasonography", J. Phys. Ther. Sci. 34(12) (2022) 777-783: subcutaneous tissue 26 kPa, muscle
  62 kPa at light loads; McKee et al., Tissue Eng. Part B 17(3) (2011) 155-164 review soft-tissue
  moduli of 1-100 kPa by indentation. E = 40 kPa, nu = 0.45 (nearly incompressible); density
  1000 kg/m³ (ICRU Report 44 (1989): adipose tissue 950, skeletal muscle 1050).
- foam: flexible polyurethane foam (cushions, sponges). Gibson & Ashby, *Cellular Solids* (2nd ed.,
  1997): E*/E_s = (rho*/rho_s)^2 for open cells and nu* = 1/3; with E_s = 50 MPa and rho_s = 1200 kg/m³
  for flexible polyurethane, a 30 kg/m³ foam has E* = 50 MPa x (30/1200)^2 = 31 kPa. E = 30 kPa,
  nu = 0.3, density 30 kg/m³.
- wood: softwood loaded along the grain, for the Stiff role (props, planks, furniture). USDA Forest
  Products Laboratory, *Wood Handbook*, FPL-GTR-190 (2010), Table 5-3a: modulus of elasticity along
  the grain 8.5 GPa (eastern white pine) to 13.4 GPa (coast Douglas-fir) at 12% moisture, specific
  gravity 0.35-0.48; Table 5-2: Poisson ratios nu_LR, nu_LT of about 0.3-0.4. E = 10 GPa, nu = 0.35,
  density 500 kg/m³. The solver is isotropic: across the grain real wood is 10-20x softer.

Friction coefficients are typical dry values for the material against itself or a hard floor (rubber
grips, jelly slides); they are not calibrated, and stay editable like every field.
"""
from __future__ import annotations

SOLID_PRESETS = {
    # name: (description, Material fields)
    "rubber": ("Rubber (soft natural rubber, E = 1.5 MPa)",
               dict(density=1100.0, youngs_modulus=1.5e6, poisson_ratio=0.49, friction=0.8)),
    "jelly": ("Jelly (dessert gelatin, E = 5 kPa): wobbles",
              dict(density=1020.0, youngs_modulus=5.0e3, poisson_ratio=0.49, friction=0.2)),
    "flesh": ("Flesh (soft tissue: skin, fat, relaxed muscle, E = 40 kPa)",
              dict(density=1000.0, youngs_modulus=4.0e4, poisson_ratio=0.45, friction=0.5)),
    "foam": ("Foam (flexible polyurethane, 30 kg/m³, E = 30 kPa)",
             dict(density=30.0, youngs_modulus=3.0e4, poisson_ratio=0.3, friction=0.6)),
    "wood": ("Wood (softwood along the grain, E = 10 GPa): use the Stiff role",
             dict(density=500.0, youngs_modulus=1.0e10, poisson_ratio=0.35, friction=0.4)),
}
"""Preset name -> (one-line description, Material fields)."""
