"""simulate: the spectral flow model on the torus, its RK4 drifters and dataset generation."""

from simulate.config import PRESETS, SimConfig, paper, small
from simulate.flow import grid_fields, many_points, psi, rectangular_modes, velocity
from simulate.integrate import (
    RK4,
    ButcherTableau,
    explicit_rk_step,
    record,
    stochastic_rk_step,
)
from simulate.kernels import fast_tracks
from simulate.prior import draw_coefficients, draw_frequencies, spectrum
from simulate.tracks import simulate_tracks

__all__ = [
    "PRESETS", "SimConfig", "paper", "small",
    "grid_fields", "many_points", "psi", "rectangular_modes", "velocity",
    "RK4", "ButcherTableau", "explicit_rk_step", "record", "stochastic_rk_step",
    "draw_coefficients", "draw_frequencies", "spectrum", "simulate_tracks", "fast_tracks",
]

from simulate.generate import generate_dataset, wander_statistics  # noqa: E402
from simulate.schema import (  # noqa: E402
    config_from_attrs,
    open_dataset,
    to_dataset,
    validate_dataset,
)

__all__ += ["generate_dataset", "wander_statistics", "config_from_attrs", "open_dataset", "to_dataset",
            "validate_dataset"]
