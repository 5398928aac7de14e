"""SimConfig: every setting of the generator, with the paper's values as defaults.

Presets are functions that override the base: `paper()` and `small()`. Each `lagda simulate`
flag maps to exactly one field; the resolved config is stored in the dataset's attributes.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

RELEASE_RULES = ("fixed", "random")
PRECISIONS = ("float32", "float64")


@dataclasses.dataclass(frozen=True)
class SimConfig:
    n_samples: int = 32_268  # flow fields (dataset `sample` dim)
    n_drifters: int = 1  # tracks per field (`drifter` dim)
    seed: int = 0  # coefficients, release points, noise; sample s uses fold_in(key(seed), s)
    frequency_seed: int = 0  # omega_k; fixed by default so train/test files share them
    dt: float = 1e-5  # RK4 time step (nondimensional time)
    t_final: float = 0.1  # length of the observation window T
    stride: int = 10  # RK4 steps between recorded positions
    k1_min: int = -3  # rectangular mode set k1 in [k1_min, k1_max]
    k1_max: int = 3
    k2_min: int = -3  # k2 in [k2_min, k2_max]
    k2_max: int = 3
    spectrum_exponent: float = 1.5  # a_k proportional to (1 + |k|^2)^(-spectrum_exponent)
    rms_speed: float = 10.0  # expected RMS speed over the domain (domain lengths per unit time)
    omega_max: float = 20.0 * 3.141592653589793  # omega_k ~ U(-omega_max, omega_max); 2 pi / T at T = 0.1
    steady: bool = False  # omega_k = 0: a steady field
    release: Literal["fixed", "random"] = "fixed"  # release points: fixed point or uniform on T^2
    release_x: float = 0.75  # fixed release point (paper: (0.75, 0.75))
    release_y: float = 0.75
    obs_noise: float = 0.0  # std of Gaussian noise added to recorded positions (domain lengths)
    diffusivity: float = 0.0  # Brownian forcing kappa: dz = w dt + sqrt(2 kappa) dW
    precision: Literal["float32", "float64"] = "float32"  # arithmetic of the integrator
    chunk_size: int = 4096  # fields per compiled chunk (results do not depend on it)

    @property
    def n_steps(self) -> int:
        """Total RK4 steps, round(t_final / dt)."""
        return int(round(self.t_final / self.dt))

    @property
    def n_obs(self) -> int:
        """Recorded positions per track, n_steps / stride."""
        return self.n_steps // self.stride

    def validate(self) -> "SimConfig":
        """Returns self, or raises ValueError with one line naming the bad setting."""
        checks = [
            (self.n_samples >= 1, f"n_samples must be >= 1, got {self.n_samples}"),
            (self.n_drifters >= 1, f"n_drifters must be >= 1, got {self.n_drifters}"),
            (self.dt > 0, f"dt must be > 0, got {self.dt}"),
            (self.t_final > 0, f"t_final must be > 0, got {self.t_final}"),
            (self.stride >= 1, f"stride must be >= 1, got {self.stride}"),
            (abs(self.n_steps * self.dt - self.t_final) <= 1e-9 * self.t_final,
             f"dt = {self.dt} does not divide t_final = {self.t_final} into whole steps"),
            (self.n_steps % self.stride == 0,
             f"stride = {self.stride} does not divide the {self.n_steps} steps"),
            (self.k1_min <= self.k1_max and self.k2_min <= self.k2_max,
             f"empty mode set: k1 in [{self.k1_min}, {self.k1_max}], k2 in [{self.k2_min}, {self.k2_max}]"),
            (self.rms_speed >= 0, f"rms_speed must be >= 0, got {self.rms_speed}"),
            (self.omega_max >= 0, f"omega_max must be >= 0, got {self.omega_max}"),
            (self.obs_noise >= 0, f"obs_noise must be >= 0, got {self.obs_noise}"),
            (self.diffusivity >= 0, f"diffusivity must be >= 0, got {self.diffusivity}"),
            (self.release in RELEASE_RULES, f"release must be one of {RELEASE_RULES}, got {self.release!r}"),
            (self.precision in PRECISIONS, f"precision must be one of {PRECISIONS}, got {self.precision!r}"),
            (self.chunk_size >= 1, f"chunk_size must be >= 1, got {self.chunk_size}"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)
        return self


def paper(**overrides) -> SimConfig:
    """The paper's setting (section 6.3): dt 1e-5, T 0.1, stride 10, K = 49, N = 32,268."""
    return dataclasses.replace(SimConfig(), **overrides)


def small(**overrides) -> SimConfig:
    """Fast on a laptop CPU, used by tests and the demo: same physics, 4,096 fields, dt 1e-4.

    RK4 is fourth order (tests/test_integrate.py), so at dt = 1e-4 the tracks are the paper's
    tracks (dt = 1e-5) to far below any observation noise, at 10x fewer steps; stride 1 keeps
    1,000 observations.
    """
    base = dict(n_samples=4096, dt=1e-4, stride=1, chunk_size=1024)
    base.update(overrides)
    return dataclasses.replace(SimConfig(), **base)


PRESETS = {"paper": paper, "small": small}
