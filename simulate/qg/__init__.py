"""Truth flows from an independent ocean model: pyqg-jax QG flows with drifters advected in them.

The flow is a pyqg-jax model (quasi-geostrophic, doubly periodic square of side L metres, SI units,
AB3 time stepping with step `dt` seconds) in one of two regimes (`REGIMES`):

- **rossby**: the barotropic beta-plane model (`BTModel`, no drag) started from small random
  waves with max(|k1|, |k2|) <= `init_k_max`, weak enough (RMS speed `rms_speed`) that the
  nonlinear term is a few per cent of the beta term. Each Fourier mode is then a linear Rossby
  wave: its phase rotates as exp(-i w t), w = -beta k_x / (|k|^2 + kd^2) (k in rad/m, kd = 1/rd),
  i.e. lagda's exp(+i omega t) convention with omega_k = beta k_x / (|k|^2 + kd^2).
- **turbulence**: pyqg's default two-layer model (`QGModel`), forced by baroclinic instability of
  the imposed shear U1 - U2 = `shear` and spun up to statistical equilibrium; drifters sample the
  upper layer. The frame moves with the upper layer's imposed flow (U1 = 0, U2 = -shear): a
  Galilean change of frame, exact on the doubly periodic domain, after which the upper layer's
  velocity is its perturbation velocity and has zero domain mean.

Each flow s starts from its own random state (key fold_in(key(seed), s)), is spun up for
`spin_up_days`, then drifters are released (`release`: "fixed" a regular lattice, the same in
every flow; "random" uniform, per flow) and followed over the window of `window_days`.

**Drifters.** The velocity at a drifter is the model's spectral velocity summed at its position
(trigonometric interpolation, `spectral_value`: exact for a band-limited field and equal to the
gridded field at grid points). Drifters move by classical RK4 with the model's step dt; between
model steps n and n + 1 the spectral streamfunction is the cubic Hermite interpolant of the two
stored states and their time derivatives (the model's tendency dq/dt inverted to d psi/dt), an
O(dt^4) interpolant, so the drifter scheme is fourth order in dt (tests/test_qg.py measures it).
The model's own AB3 error and its grid-scale filter (1 on all resolved scales but the smallest)
belong to the flow, not to the drifters.

`simulate_qg` runs the flows and `write_qg_dataset` writes one CF trajectory file (docs/design.md,
"QG truth datasets"): the tracks (x, y in metres, CF time) readable by `lagda.io.tracks.read_tracks`,
plus the gridded truth psi, u, v and its projection onto the Fourier modes
max(|k1|, |k2|) <= `k_max` (lagda's model units) at t = 0 and every `truth_interval` seconds.

Modules: `config` (settings and presets), `spectral` (interpolation and the drifter step), `model`
(the pyqg-jax model and one flow), `dataset` (projection and the file), `projection` (the truth's
least-squares fit in lagda's flow basis with a time basis, its projection limit, a climatology prior).
"""

from simulate.qg.config import DAY, PRESETS, REGIMES, RELEASE_RULES, QGConfig, rossby, tiny, turbulence
from simulate.qg.dataset import mapping_attrs, project, to_xarray, write_qg_dataset
from simulate.qg.projection import (basis_fields, climatology_prior, projection_limit, truth_in_basis, unresolved_variance,
                                   window_projection)
from simulate.qg.model import QGFlows, build_model, make_flow_runner, release_points, rossby_frequencies, simulate_qg
from simulate.qg.spectral import (DRIFTER_STEP, SpectralGrid, drifter_field, hermite, spectral_grid, spectral_value,
                                  spectral_velocity, step_drifters)

__all__ = [
    "DAY", "PRESETS", "REGIMES", "RELEASE_RULES", "QGConfig", "rossby", "tiny", "turbulence",
    "mapping_attrs", "project", "to_xarray", "write_qg_dataset",
    "basis_fields", "climatology_prior", "projection_limit", "truth_in_basis", "unresolved_variance", "window_projection",
    "QGFlows", "build_model", "make_flow_runner", "release_points", "rossby_frequencies", "simulate_qg",
    "DRIFTER_STEP", "SpectralGrid", "drifter_field", "hermite", "spectral_grid", "spectral_value",
    "spectral_velocity", "step_drifters",
]
