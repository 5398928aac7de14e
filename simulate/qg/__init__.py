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
  upper layer. `background` "full" (the default) runs it in pyqg's own frame (U1 = shear, U2 = 0)
  and the drifters feel the upper layer's full velocity, its periodic anomaly plus the uniform
  imposed flow U1 (`background_velocity`); "anomaly" runs it in the frame moving with the upper
  layer (U1 = 0, U2 = -shear, a Galilean change of frame, exact on the doubly periodic domain), where
  the drifters feel the anomaly only, which has zero domain mean (format 1's files, bit for bit).

Each flow s starts from its own random state (key fold_in(key(seed), s)), is spun up for
`spin_up_days`, then drifters are released in `release_box` (fractions of the domain; `release`:
"fixed" a regular lattice, the same in every flow; "random" uniform, per flow) and followed over the
window of `window_days`. With `windows` W > 1 each spun-up flow goes on for W successive windows, each with
drifters released afresh (file flows s W .. s W + W - 1; a cheap training set of QG turbulence windows:
one spin-up for W windows). The `window` preset is a window into a larger ocean: the domain twice as
wide at the same resolution, drifters released in its central quarter.

**Drifters.** The velocity at a drifter is the model's spectral velocity summed at its position
(trigonometric interpolation, `spectral_value`: exact for a band-limited field and equal to the
gridded field at grid points), the background added as the coefficient at k = 0. Drifters move by
classical RK4 with the model's step dt; between model steps n and n + 1 the spectral velocity is the
cubic Hermite interpolant of the two stored states and their time derivatives (the model's tendency
dq/dt inverted to d psi/dt), an O(dt^4) interpolant, so the drifter scheme is fourth order in dt
(tests/test_qg.py measures it).
The model's own AB3 error and its grid-scale filter (1 on all resolved scales but the smallest)
belong to the flow, not to the drifters.

`simulate_qg` runs the flows and `write_qg_dataset` writes one CF trajectory file (docs/design/qg.md,
"The QG truth file"): the tracks (x, y in metres, CF time) readable by `lagda.io.tracks.read_tracks`,
plus the gridded truth psi (the periodic anomaly), u, v (the velocity the drifters feel), the
background and psi's projection onto the Fourier modes max(|k1|, |k2|) <= `k_max` (lagda's model
units) at t = 0 and every `truth_interval` seconds.

Modules: `config` (settings and presets), `spectral` (interpolation and the drifter step), `model`
(the pyqg-jax model and one flow), `dataset` (projection and the file), `projection` (the truth's
least-squares fit in lagda's flow basis with a time basis, its projection limit, a climatology prior).
"""

from simulate.qg.config import (
    BACKGROUNDS,
    DAY,
    PRESETS,
    REGIMES,
    RELEASE_RULES,
    QGConfig,
    rossby,
    tiny,
    turbulence,
    window,
)
from simulate.qg.dataset import mapping_attrs, project, to_xarray, write_qg_dataset
from simulate.qg.model import (
    QGFlows,
    background_velocity,
    build_model,
    make_flow_runner,
    release_points,
    rossby_frequencies,
    simulate_qg,
)
from simulate.qg.projection import (
    basis_fields,
    climatology_prior,
    projection_limit,
    truth_in_basis,
    unresolved_variance,
    window_projection,
)
from simulate.qg.spectral import (
    DRIFTER_STEP,
    SpectralGrid,
    drifter_field,
    hermite,
    spectral_grid,
    spectral_value,
    spectral_velocity,
    step_drifters,
)

__all__ = [
    "BACKGROUNDS", "DAY", "PRESETS", "REGIMES", "RELEASE_RULES", "QGConfig", "rossby", "tiny", "turbulence", "window",
    "mapping_attrs", "project", "to_xarray", "write_qg_dataset",
    "basis_fields", "climatology_prior", "projection_limit", "truth_in_basis", "unresolved_variance",
    "window_projection",
    "QGFlows", "background_velocity", "build_model", "make_flow_runner", "release_points", "rossby_frequencies",
    "simulate_qg",
    "DRIFTER_STEP", "SpectralGrid", "drifter_field", "hermite", "spectral_grid", "spectral_value",
    "spectral_velocity", "step_drifters",
]
