"""AssimConfig: every setting of the assimilation methods, one frozen dataclass.

Each `lagda assimilate` option maps to one field. Defaults are chosen for the small preset
(dt 1e-4, T 0.1, K = 49) and were measured in experiments/assimilation_benchmark.py.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

METHODS = ("linear", "var", "enkf", "retrieve", "embed", "hybrid")
LEARNED_METHODS = ("retrieve", "embed", "hybrid")  # the methods that need a trained model
OPTIMIZERS = ("gauss_newton", "lbfgs", "adam")
HYBRID_STARTS = ("embed", "retrieve")
HYBRID_REFINES = ("none", "auto", "gauss_newton", "var")
TRACK_DATA = ("auto", "velocities", "displacements")
FD_LAGS = (1, 2, 4, 8, 16, 32)  # finite-difference lags tried by the automatic lag choice


@dataclasses.dataclass(frozen=True)
class AssimConfig:
    members: int = 256  # posterior samples drawn from Gaussian posteriors (linear, var, hybrid)
    noise_std: float | None = None  # position noise std (domain lengths); None: estimate / floor
    # linear: finite-difference velocities
    fd_lag: int | None = None  # observations between the two ends of a finite difference; None: automatic
    fd_order: int | None = None  # 2 (pairs at midpoints), 4 or 6 (central, at observed points); None: 6 if smooth and dense
    # linear / hybrid data: "velocities" (finite differences), "displacements" (path integrals),
    # "auto": displacements for noisy dense tracks (automatic lag above 1), velocities otherwise
    track_data: Literal["auto", "velocities", "displacements"] = "auto"
    # displacements: passes of the errors-in-variables whitening (G at noisy positions), each
    # linearised at the previous mean; 0: white displacement noise
    eiv_iterations: int = 2
    # displacements: remove the O(sigma^2) bias of the whitened displacements (G and its Jacobian at noisy
    # positions: curvature of the flow), columns times exp(-2 pi^2 sigma^2 |k|^2)
    eiv_curvature: bool = True
    # velocities: posterior covariance at the residuals' correlation time times the noise variance
    correlated_errors: bool = True
    # velocities: covariance noise at least the posterior-predictive floor (tracks re-integrated from the mean)
    predictive_floor: bool = True
    # observation spacing (RK4 steps) above which tracks are sparse: pairs instead of the
    # five-point difference (linear), Gauss-Newton refinement (hybrid "auto")
    sparse_steps: int = 10
    # linear: the error of the velocities beyond the noise, the velocity of scales the basis does not hold,
    # "white" (the noise model above) or "ou": an Ornstein-Uhlenbeck process along each track (variance
    # representation_var per component, time scale representation_time, model units; None: estimated from
    # the residuals of a first fit), whitened exactly (methods.representation)
    representation: Literal["white", "ou"] = "white"
    representation_var: float | None = None
    representation_time: float | None = None
    noise_grid: int = 41  # log-spaced velocity-noise variances tried by empirical Bayes
    # var: 4D-Var
    optimizer: Literal["gauss_newton", "lbfgs", "adam"] = "gauss_newton"
    var_iterations: int = 30  # optimiser iterations per continuation stage
    var_lr: float = 0.05  # adam learning rate (real coefficient units)
    var_sigma_floor: float = 1e-6  # smallest position noise std used in the misfit
    continuation: tuple[float, ...] = (0.05, 0.1, 0.2, 0.35, 0.5, 0.7, 1.0)  # window fractions
    # enkf: ensemble Kalman inversion (ES-MDA)
    enkf_members: int = 256  # ensemble size
    enkf_iterations: int = 4  # ES-MDA passes per continuation stage; each observation's alpha is the number of passes that see it
    enkf_sigma_floor: float = 1e-3  # smallest position noise std used by the ensemble update
    # retrieve / embed / hybrid
    bank_size: int = 100_000  # prior draws ranked by the learned similarity
    bank_batch: int = 65_536  # bank items generated and scored at once (memory bound)
    bank_cache_mb: int = 1024  # keep an i.i.d. prior bank up to this size in memory for later calls (0: never)
    top_k: int = 16  # retrieved candidates kept (Algorithm 1)
    closed_form: bool = False  # embed: Gaussian conditional of section 5 (eqs 41a / 48a)
    hybrid_start: Literal["embed", "retrieve"] = "embed"  # hybrid: var started from this estimate
    hybrid_iterations: int = 15  # Gauss-Newton iterations per continuation stage of hybrid's refinement ("var": in all)
    # starts of the refinement: the product mean, plus hybrid_starts - 1 draws from the learned
    # conditional (the first its mean); the end point of least 4D-Var cost is kept (search.multistart_map)
    hybrid_starts: int = 1
    # hybrid: after the Gaussian product of the learned conditional and the velocity likelihood,
    # "none" stop, "gauss_newton" refine by a short 4D-Var on positions (original prior),
    # "auto" refine only sparse tracks (spacing > sparse_steps RK4 steps),
    # "var" the old hybrid: 4D-Var started from the embed / retrieve estimate, no product
    hybrid_refine: Literal["none", "auto", "gauss_newton", "var"] = "auto"
    # position noise std (domain lengths) above which hybrid does not use the learned conditional:
    # the shipped encoder was trained on exact tracks stored in float32 (rounding noise ~2e-8); a
    # mixture-trained set encoder too was measured not to help there (README, assimilation benchmark)
    hybrid_learned_noise_limit: float = 1e-6

    def validate(self) -> "AssimConfig":
        """Returns self, or raises ValueError with one line naming the bad setting."""
        checks = [
            (self.members >= 1, f"members must be >= 1, got {self.members}"),
            (self.noise_std is None or self.noise_std >= 0, f"noise_std must be >= 0, got {self.noise_std}"),
            (self.fd_lag is None or self.fd_lag >= 1, f"fd_lag must be None (automatic) or >= 1, got {self.fd_lag}"),
            (self.fd_order in (None, 2, 4, 6), f"fd_order must be None (automatic), 2, 4 or 6, got {self.fd_order}"),
            (self.track_data in TRACK_DATA, f"track_data must be one of {TRACK_DATA}, got {self.track_data!r}"),
            (self.eiv_iterations >= 0, f"eiv_iterations must be >= 0, got {self.eiv_iterations}"),
            (self.noise_grid >= 2, f"noise_grid must be >= 2, got {self.noise_grid}"),
            (self.optimizer in OPTIMIZERS, f"optimizer must be one of {OPTIMIZERS}, got {self.optimizer!r}"),
            (self.var_iterations >= 1, f"var_iterations must be >= 1, got {self.var_iterations}"),
            (self.var_lr > 0, f"var_lr must be > 0, got {self.var_lr}"),
            (self.var_sigma_floor > 0, f"var_sigma_floor must be > 0, got {self.var_sigma_floor}"),
            (len(self.continuation) >= 1 and all(0 < f <= 1 for f in self.continuation)
             and abs(self.continuation[-1] - 1.0) < 1e-12,
             f"continuation must be window fractions in (0, 1] ending with 1.0, got {self.continuation}"),
            (self.enkf_members >= 2, f"enkf_members must be >= 2, got {self.enkf_members}"),
            (self.enkf_iterations >= 1, f"enkf_iterations must be >= 1, got {self.enkf_iterations}"),
            (self.enkf_sigma_floor > 0, f"enkf_sigma_floor must be > 0, got {self.enkf_sigma_floor}"),
            (1 <= self.bank_size < 2**31, f"bank_size must be in [1, 2^31), got {self.bank_size}"),
            (self.bank_cache_mb >= 0, f"bank_cache_mb must be >= 0, got {self.bank_cache_mb}"),
            (self.bank_batch >= 1, f"bank_batch must be >= 1, got {self.bank_batch}"),
            (1 <= self.top_k <= self.bank_size, f"top_k must be in [1, bank_size], got {self.top_k}"),
            (self.hybrid_start in HYBRID_STARTS, f"hybrid_start must be one of {HYBRID_STARTS}, got {self.hybrid_start!r}"),
            (self.hybrid_iterations >= 1, f"hybrid_iterations must be >= 1, got {self.hybrid_iterations}"),
            (self.hybrid_starts >= 1, f"hybrid_starts must be >= 1, got {self.hybrid_starts}"),
            (self.hybrid_refine in HYBRID_REFINES, f"hybrid_refine must be one of {HYBRID_REFINES}, got {self.hybrid_refine!r}"),
            (self.hybrid_learned_noise_limit >= 0,
             f"hybrid_learned_noise_limit must be >= 0, got {self.hybrid_learned_noise_limit}"),
            (self.sparse_steps >= 1, f"sparse_steps must be >= 1, got {self.sparse_steps}"),
            (self.representation in ("white", "ou"), f"representation must be 'white' or 'ou', got {self.representation!r}"),
            (self.representation_var is None or self.representation_var > 0,
             f"representation_var must be None (estimated) or > 0, got {self.representation_var}"),
            (self.representation_time is None or self.representation_time > 0,
             f"representation_time must be None (estimated) or > 0, got {self.representation_time}"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)
        return self


def config_from_options(options: dict) -> AssimConfig:
    """Returns the validated AssimConfig with `options` (AssimConfig field names) applied.

    Raises:
        ValueError: for an unknown option (one line listing the valid ones) or a bad value.
    """
    names = {f.name for f in dataclasses.fields(AssimConfig)}
    unknown = sorted(set(options) - names)
    if unknown:
        raise ValueError(f"unknown option(s) {', '.join(unknown)}; valid: {', '.join(sorted(names))}")
    return dataclasses.replace(AssimConfig(), **options).validate()
