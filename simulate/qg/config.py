"""Settings of a QG truth dataset: `QGConfig` and its presets (`rossby`, `turbulence`, `tiny`, `window`)."""

from __future__ import annotations

import dataclasses
import functools
from typing import Literal

REGIMES = ("rossby", "turbulence")
RELEASE_RULES = ("fixed", "random")
BACKGROUNDS = ("full", "anomaly")
DAY = 86400.0  # seconds
MODEL_WINDOW = 0.1  # the window maps onto lagda's model time 0.1 (lagda.io.physical's convention)
TIME_ORIGIN = "2000-01-01T00:00:00Z"  # CF time of the drifters' release (t = 0)


@dataclasses.dataclass(frozen=True)
class QGConfig:
    """Settings of a QG truth dataset (defaults: the `turbulence` preset, pyqg's 64^2 two-layer model)."""

    regime: Literal["rossby",
                    "turbulence"] = "turbulence"  # "rossby" (linear Rossby waves, BTModel) or "turbulence" (QGModel)
    nx: int = 64  # grid points per side
    L: float = 1e6  # domain side, m
    dt: float = 3600.0  # model (and drifter RK4) step, s
    spin_up_days: float = 1825.0  # spin-up before the release, days
    window_days: float = 60.0  # observation window after the release, days
    obs_interval: float = 3600.0  # between recorded positions, s (a multiple of dt)
    truth_interval: float = DAY  # between stored gridded truth fields, s (a multiple of obs_interval)
    n_flows: int = 1  # independent flows
    windows: int = 1  # successive windows of each spun-up flow, fresh drifters in each (one file flow per window)
    n_drifters: int = 64  # drifters per flow
    release: Literal["fixed", "random"] = "random"  # "fixed" (a regular lattice) or "random" (uniform, per flow)
    release_box: tuple[float, float, float, float] = (0.0, 1.0, 0.0, 1.0)  # release in [x0, x1] x [y0, y1], / L
    seed: int = 0  # seed of the initial states and release points
    k_max: int = 8  # projection basis: k1, k2 in [-k_max, k_max]
    beta: float = 1.5e-11  # gradient of the Coriolis parameter, 1/(m s)
    rd: float = 15000.0  # deformation radius, m
    rek: float = 5.787e-7  # linear bottom drag, 1/s
    shear: float = 0.025  # turbulence: imposed U1 - U2, m/s
    background: Literal["full", "anomaly"] = "full"  # turbulence: drifters feel U1 = shear + anomaly, or the anomaly
    delta: float = 0.25  # turbulence: layer thickness ratio H1/H2
    H1: float = 500.0  # turbulence: upper layer thickness, m
    rms_speed: float = 0.002  # rossby: initial RMS speed, m/s
    init_k_max: int = 3  # rossby: initial waves max(|k1|, |k2|) <= init_k_max

    @property
    def steps_per_obs(self) -> int:
        """Model steps between recorded positions."""
        return int(round(self.obs_interval / self.dt))

    @property
    def obs_per_truth(self) -> int:
        """Recorded positions between stored truth fields."""
        return int(round(self.truth_interval / self.obs_interval))

    @property
    def n_obs(self) -> int:
        """Recorded positions per track (t_j = j obs_interval, j = 1..n_obs)."""
        return int(round(self.window_days * DAY / self.obs_interval))

    @property
    def n_truth(self) -> int:
        """Stored truth fields after t = 0."""
        return self.n_obs // self.obs_per_truth

    @property
    def time_scale_s(self) -> float:
        """Seconds per lagda model time unit: the window maps onto model time 0.1."""
        return self.window_days * DAY / MODEL_WINDOW

    def validate(self) -> "QGConfig":
        """Returns self, or raises ValueError with one line naming the bad setting."""
        whole = lambda a, b: b > 0 and abs(a / b - round(a / b)) < 1e-9 and round(a / b) >= 1
        checks = [
            (self.regime in REGIMES, f"regime must be one of {REGIMES}, got {self.regime!r}"),
            (self.regime != "rossby" or self.rd == 0,
             f"the rossby regime has no deformation radius: rd must be 0, got {self.rd}"),
            (self.release in RELEASE_RULES, f"release must be one of {RELEASE_RULES}, got {self.release!r}"),
            (self.background in BACKGROUNDS, f"background must be one of {BACKGROUNDS}, got {self.background!r}"),
            (len(self.release_box) == 4 and 0 <= self.release_box[0] < self.release_box[1] <= 1
             and 0 <= self.release_box[2] < self.release_box[3] <= 1,
             f"release_box must be (x0, x1, y0, y1), 0 <= x0 < x1 <= 1 and 0 <= y0 < y1 <= 1, got {self.release_box}"),
            (self.nx >= 8 and self.nx % 2 == 0, f"nx must be even and >= 8, got {self.nx}"),
            (self.L > 0 and self.dt > 0, f"L and dt must be > 0, got L = {self.L}, dt = {self.dt}"),
            (self.n_flows >= 1 and self.n_drifters >= 1 and self.windows >= 1,
             f"n_flows, n_drifters and windows must be >= 1, got {self.n_flows}, {self.n_drifters}, {self.windows}"),
            (self.spin_up_days >= 0, f"spin_up_days must be >= 0, got {self.spin_up_days}"),
            (whole(self.spin_up_days * DAY, self.dt) or self.spin_up_days == 0,
             f"dt = {self.dt} s does not divide the spin-up of {self.spin_up_days} days"),
            (whole(self.obs_interval, self.dt),
             f"obs_interval = {self.obs_interval} s is not a multiple of dt = {self.dt} s"),
            (whole(self.truth_interval, self.obs_interval),
             f"truth_interval = {self.truth_interval} s is not a multiple of obs_interval = {self.obs_interval} s"),
            (whole(self.window_days * DAY, self.truth_interval),
             f"the window of {self.window_days} days is not a multiple of truth_interval = {self.truth_interval} s"),
            (0 <= self.k_max < self.nx // 2,
             f"k_max must be in [0, {self.nx // 2 - 1}] for nx = {self.nx}, got {self.k_max}"),
            (1 <= self.init_k_max < self.nx // 2,
             f"init_k_max must be in [1, {self.nx // 2 - 1}], got {self.init_k_max}"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)
        return self


def rossby(**overrides) -> QGConfig:
    """The linear Rossby-wave regime: 32^2 barotropic beta plane, no deformation radius (rd = 0), no drag,
    no spin-up."""
    base = dict(regime="rossby", nx=32, spin_up_days=0.0, rek=0.0, rd=0.0, k_max=3)
    return dataclasses.replace(QGConfig(), **{**base, **overrides})


def turbulence(**overrides) -> QGConfig:
    """Nonlinear turbulence: pyqg's default 64^2 two-layer model, five years of spin-up (the `qg` preset)."""
    return dataclasses.replace(QGConfig(), **overrides)


def tiny(regime: str = "turbulence", **overrides) -> QGConfig:
    """For tests: a 16^2 grid, a 4-day window with 3-hourly positions, 30 days of spin-up for turbulence."""
    base = dict(nx=16, window_days=4.0, obs_interval=3 * 3600.0, truth_interval=DAY / 2, n_drifters=8, k_max=3)
    preset = rossby if regime == "rossby" else turbulence
    spin = {} if regime == "rossby" else dict(spin_up_days=30.0)
    return preset(**{**base, **spin, **overrides})


def window(regime: str = "turbulence", **overrides) -> QGConfig:
    """A window into a larger ocean: the regime's preset on a domain twice as wide (2 L, 2 nx, 2 k_max: the same
    resolution and physics), drifters released in its central quarter, the preset's own box (release_box 0.25..0.75)."""
    base = rossby() if regime == "rossby" else turbulence()
    grown = dict(nx=2 * base.nx, L=2 * base.L, k_max=2 * base.k_max, release_box=(0.25, 0.75, 0.25, 0.75))
    return dataclasses.replace(base, **{**grown, **overrides})


PRESETS = {"qg": {"rossby": rossby, "turbulence": turbulence},
           "tiny": {regime: functools.partial(tiny, regime) for regime in REGIMES},
           "window": {regime: functools.partial(window, regime) for regime in REGIMES}}
