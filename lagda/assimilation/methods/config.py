"""The settings of each assimilation method: one frozen dataclass per method, fields declared with their help.

Every field is a `lagda.settings.setting(default, help)`: its meaning and units live in the field's
metadata, which the command line reads to make one option per field (`--fd-lag` for `fd_lag`). Configs share fields
by inheritance: `MethodConfig` (every method), `LinearConfig`, `OptimiserConfig` (the 4D-Var fit of
`var` and of hybrid's refinement), `BankConfig` (the learned methods' bank). Defaults are chosen for
the small preset (dt 1e-4, T 0.1, K = 49). This module imports no JAX, so the command line can build
its options at start-up.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from lagda.settings import setting

OPTIMIZERS = ("gauss_newton", "lbfgs", "adam")
HYBRID_STARTS = ("embed", "retrieve")
HYBRID_REFINES = ("none", "auto", "gauss_newton", "var")
TRACK_DATA = ("auto", "velocities", "displacements")
REPRESENTATIONS = ("auto", "white", "ou")
FD_LAGS = (1, 2, 4, 8, 16, 32)  # finite-difference lags tried by the automatic lag choice


@dataclasses.dataclass(frozen=True)
class MethodConfig:
    """Settings every method takes."""

    members: int = setting(256, "posterior samples drawn from a Gaussian posterior (enkf: the ensemble size)")
    noise_std: float | None = setting(None, "position noise std in domain lengths, if known; None: estimated")

    def checks(self) -> list[tuple[bool, str]]:
        """Returns (ok, message) pairs, one per rule; subclasses add theirs to super().checks()."""
        return [(self.members >= 1, f"members must be >= 1, got {self.members}"),
                (self.noise_std is None or self.noise_std >= 0, f"noise_std must be >= 0, got {self.noise_std}")]

    def validate(self):
        """Returns self, or raises ValueError with one line naming the bad setting."""
        for ok, message in self.checks():
            if not ok:
                raise ValueError(message)
        return self


@dataclasses.dataclass(frozen=True)
class LinearConfig(MethodConfig):
    """`linear`: the closed-form Gaussian posterior from the tracks' velocities or displacements."""

    fd_lag: int | None = setting(None, "observations between the two ends of a finite difference; None: automatic")
    fd_order: int | None = setting(None, "finite-difference order: 2 (pairs at midpoints), 4 or 6 (central, at "
                                         "observed points); None: 6 if smooth and dense")
    track_data: Literal["auto", "velocities", "displacements"] = setting(
        "auto", "data: velocities (finite differences), displacements (path integrals), auto: displacements for noisy "
                "dense tracks (automatic lag above 1), velocities otherwise")
    eiv_iterations: int = setting(2, "displacements: passes of the errors-in-variables whitening (the flow at noisy "
                                     "positions), each linearised at the previous mean; 0: white displacement noise")
    eiv_curvature: bool = setting(True, "displacements: remove the O(sigma^2) bias of the whitened displacements "
                                        "(columns times exp(-2 pi^2 sigma^2 |k|^2))")
    correlated_errors: bool = setting(True, "velocities: posterior covariance at the residuals' correlation time "
                                            "times the noise variance")
    predictive_floor: bool = setting(True, "velocities: covariance noise at least the posterior-predictive floor "
                                           "(tracks re-integrated from the mean)")
    sparse_steps: int = setting(10, "observation spacing (RK4 steps) above which tracks are sparse: pairs instead of "
                                    "central differences, and hybrid's refinement (refine auto)")
    representation: Literal["auto", "white", "ou"] = setting(
        "auto", "the error of the velocities beyond the noise: white, or ou (the velocity of scales the basis leaves "
                "out as an Ornstein-Uhlenbeck process along each track, whitened exactly); auto: ou in a chosen "
                "basis (a model with a time basis), white in lagda's own model")
    representation_var: float | None = setting(None, "ou: its variance per component (model units); None: the "
                                                     "model's (a climatology), else estimated")
    representation_time: float | None = setting(None, "ou: its time scale (model time); None: the model's, else "
                                                      "estimated")
    ou_spacing: float = setting(0.25, "ou: lag-1 pairs kept at least this fraction of the OU time scale apart (an "
                                      "error correlated over days makes hourly pairs nearly redundant); 0: every pair")
    noise_grid: int = setting(41, "log-spaced noise variances tried by empirical Bayes")

    def checks(self) -> list[tuple[bool, str]]:
        return super().checks() + [
            (self.fd_lag is None or self.fd_lag >= 1, f"fd_lag must be None (automatic) or >= 1, got {self.fd_lag}"),
            (self.fd_order in (None, 2, 4, 6), f"fd_order must be None (automatic), 2, 4 or 6, got {self.fd_order}"),
            (self.track_data in TRACK_DATA, f"track_data must be one of {TRACK_DATA}, got {self.track_data!r}"),
            (self.eiv_iterations >= 0, f"eiv_iterations must be >= 0, got {self.eiv_iterations}"),
            (self.noise_grid >= 2, f"noise_grid must be >= 2, got {self.noise_grid}"),
            (self.ou_spacing >= 0, f"ou_spacing must be >= 0, got {self.ou_spacing}"),
            (self.sparse_steps >= 1, f"sparse_steps must be >= 1, got {self.sparse_steps}"),
            (self.representation in REPRESENTATIONS,
             f"representation must be one of {REPRESENTATIONS}, got {self.representation!r}"),
            (self.representation_var is None or self.representation_var > 0,
             f"representation_var must be None (estimated) or > 0, got {self.representation_var}"),
            (self.representation_time is None or self.representation_time > 0,
             f"representation_time must be None (estimated) or > 0, got {self.representation_time}"),
        ]


@dataclasses.dataclass(frozen=True)
class OptimiserConfig(MethodConfig):
    """The 4D-Var fit of the positions (var, hybrid's refinement): optimiser, misfit noise floor, continuation."""

    optimizer: Literal["gauss_newton", "lbfgs", "adam"] = setting("gauss_newton", "4D-Var optimiser")
    lr: float = setting(0.05, "adam's learning rate (real coefficient units)")
    sigma_floor: float = setting(1e-6, "smallest position noise std used in the misfit (domain lengths)")
    continuation: tuple[float, ...] = setting((0.05, 0.1, 0.2, 0.35, 0.5, 0.7, 1.0),
                                              "window fractions fitted in turn, ending with 1.0")

    def checks(self) -> list[tuple[bool, str]]:
        return super().checks() + [
            (self.optimizer in OPTIMIZERS, f"optimizer must be one of {OPTIMIZERS}, got {self.optimizer!r}"),
            (self.lr > 0, f"lr must be > 0, got {self.lr}"),
            (self.sigma_floor > 0, f"sigma_floor must be > 0, got {self.sigma_floor}"),
            _continuation_check(self.continuation),
        ]


def _continuation_check(fractions) -> tuple[bool, str]:
    ok = len(fractions) >= 1 and all(0 < f <= 1 for f in fractions) and abs(fractions[-1] - 1.0) < 1e-12
    return ok, f"continuation must be window fractions in (0, 1] ending with 1.0, got {fractions}"


@dataclasses.dataclass(frozen=True)
class VarConfig(OptimiserConfig):
    """`var`: strong-constraint 4D-Var with its Laplace spread."""

    iterations: int = setting(30, "optimiser iterations per continuation stage")

    def checks(self) -> list[tuple[bool, str]]:
        return super().checks() + [(self.iterations >= 1, f"iterations must be >= 1, got {self.iterations}")]


SAMPLE_STARTS = ("prior", "var", "learned", "hybrid", "proposal")
MASS_MATRICES = ("dense", "diagonal")
# whitened units: below, the moves stall; above, leapfrog on a unit Gaussian nears its instability (2)
STEP_SIZE_RANGE = (1e-3, 1.0)
DIVERGENT_WARN = 0.01  # sample: a stage with more divergent HMC transitions than this is named in the decision line


@dataclasses.dataclass(frozen=True)
class SampleConfig(MethodConfig):
    """`sample`: the posterior by adaptive tempered SMC with HMC moves; defaults for K = 49 (the module's costs)."""

    members: int = setting(4096, "posterior samples kept: every particle of every run, systematically resampled to "
                                 "this many when there are more")
    particles: int = setting(1024, "particles per run")
    runs: int = setting(2, "independent runs, each from its own key, pooled; R-hat and agreement between them")
    target_ess: float = setting(0.5, "each stage's next tempering l keeps this fraction of the particles as ESS")
    mcmc_steps: int = setting(5, "HMC transitions per particle per stage")
    step_size: float = setting(0.5, "initial leapfrog step, in units of the particles' spread (whitened coordinates)")
    target_acceptance: float = setting(0.9, "the step size is multiplied by exp(acceptance - this) after each stage")
    trajectory_length: float = setting(1.5, "leapfrog steps per transition: ceil(trajectory_length / step size), ...")
    max_leapfrog_steps: int = setting(48, "... at most this many")
    mass_matrix: Literal["dense", "diagonal"] = setting("dense", "whitening by the particles' covariance or its "
                                                                 "diagonal")
    max_stages: int = setting(500, "tempering stages before giving up (the result then says tempering_complete "
                                   "false)")
    final_moves: int = setting(4, "stages of resampling and moves at l = 1 (equal weights afterwards)")
    sigma_floor: float = setting(1e-6, "smallest position noise std used in the misfit (domain lengths)")
    start: Literal["prior", "var", "learned", "hybrid", "proposal"] = setting(
        "prior", "initial particles: the prior (the gold standard), var (its Laplace Gaussian at the MAP), learned "
                 "(the learned conditional of the tracks, hybrid's prior; needs --model RUN, an encoder trained with "
                 "the inner or l2 similarity), hybrid (hybrid's posterior of the tracks: the learned conditional times "
                 "the likelihood; any encoder hybrid reads, by default the shipped one) or proposal (a Gaussian given "
                 "in Python); each but the prior with its covariance times proposal_scale")
    proposal_scale: float = setting(1.0, "a proposal's covariance is multiplied by this (> 1 for overconfident ones)")
    importance_draws: int = setting(0, "importance sampling first (0: off): per run up to this many draws from the "
                                       "start, weighted by prior x likelihood / start, taken as the run's sample "
                                       "when their ESS reaches target_ess x particles and their Pareto k < 0.7; "
                                       "else the run tempers from the start as usual (the result says which)")
    particle_batch: int = setting(0, "particles moved at once (lax.map over batches; 0: all by vmap): bounds the "
                                     "memory of the gradient through RK4 (~3.5 MB per particle and drifter for 1000 "
                                     "steps, K = 49) on a GPU")

    def checks(self) -> list[tuple[bool, str]]:
        return super().checks() + [
            (self.particles >= 2, f"particles must be >= 2, got {self.particles}"),
            (self.runs >= 1, f"runs must be >= 1, got {self.runs}"),
            (0 < self.target_ess < 1, f"target_ess must be in (0, 1), got {self.target_ess}"),
            (self.mcmc_steps >= 1, f"mcmc_steps must be >= 1, got {self.mcmc_steps}"),
            (STEP_SIZE_RANGE[0] <= self.step_size <= STEP_SIZE_RANGE[1],
             f"step_size must be in {list(STEP_SIZE_RANGE)}, got {self.step_size}"),
            (0 < self.target_acceptance < 1, f"target_acceptance must be in (0, 1), got {self.target_acceptance}"),
            (self.trajectory_length > 0, f"trajectory_length must be > 0, got {self.trajectory_length}"),
            (self.max_leapfrog_steps >= 1, f"max_leapfrog_steps must be >= 1, got {self.max_leapfrog_steps}"),
            (self.mass_matrix in MASS_MATRICES,
             f"mass_matrix must be one of {MASS_MATRICES}, got {self.mass_matrix!r}"),
            (self.max_stages >= 1, f"max_stages must be >= 1, got {self.max_stages}"),
            (self.final_moves >= 1, f"final_moves must be >= 1, got {self.final_moves}"),
            (self.sigma_floor > 0, f"sigma_floor must be > 0, got {self.sigma_floor}"),
            (self.start in SAMPLE_STARTS, f"start must be one of {SAMPLE_STARTS}, got {self.start!r}"),
            (self.proposal_scale > 0, f"proposal_scale must be > 0, got {self.proposal_scale}"),
            (self.particle_batch >= 0, f"particle_batch must be >= 0, got {self.particle_batch}"),
            (self.importance_draws == 0 or self.importance_draws >= self.particles,
             f"importance_draws must be 0 (off) or >= particles ({self.particles}), got {self.importance_draws}"),
        ]


@dataclasses.dataclass(frozen=True)
class EnkfConfig(MethodConfig):
    """`enkf`: ensemble Kalman inversion (ES-MDA) over growing windows; `members` is the ensemble size."""

    iterations: int = setting(4, "ES-MDA passes per continuation stage (each observation's inflation is the number "
                                 "of passes that see it)")
    sigma_floor: float = setting(1e-3, "smallest position noise std used by the ensemble update (domain lengths)")
    continuation: tuple[float, ...] = setting((0.05, 0.1, 0.2, 0.35, 0.5, 0.7, 1.0),
                                              "window fractions assimilated in turn, ending with 1.0")

    def checks(self) -> list[tuple[bool, str]]:
        return super().checks() + [
            (self.members >= 2, f"members (the ensemble size) must be >= 2, got {self.members}"),
            (self.iterations >= 1, f"iterations must be >= 1, got {self.iterations}"),
            (self.sigma_floor > 0, f"sigma_floor must be > 0, got {self.sigma_floor}"),
            _continuation_check(self.continuation),
        ]


@dataclasses.dataclass(frozen=True)
class BankConfig(MethodConfig):
    """The learned methods' bank: prior draws (or a dataset's coefficients) ranked by the learned similarity."""

    bank_size: int = setting(100_000, "prior draws ranked by the learned similarity")
    bank_batch: int = setting(65_536, "bank items generated and scored at once (a memory bound)")
    bank_cache_mb: int = setting(1024, "keep an i.i.d. prior bank up to this size in memory for later calls of the "
                                       "same method object (0: never)")
    top_k: int = setting(16, "retrieved candidates kept (Algorithm 1)")

    def checks(self) -> list[tuple[bool, str]]:
        return super().checks() + [
            (1 <= self.bank_size < 2**31, f"bank_size must be in [1, 2^31), got {self.bank_size}"),
            (self.bank_cache_mb >= 0, f"bank_cache_mb must be >= 0, got {self.bank_cache_mb}"),
            (self.bank_batch >= 1, f"bank_batch must be >= 1, got {self.bank_batch}"),
            (1 <= self.top_k <= self.bank_size, f"top_k must be in [1, bank_size], got {self.top_k}"),
        ]


@dataclasses.dataclass(frozen=True)
class RetrieveConfig(BankConfig):
    """`retrieve`: the top candidates of the bank with softmax weights (the paper's Algorithm 1, eq. 28)."""


@dataclasses.dataclass(frozen=True)
class EmbedConfig(BankConfig):
    """`embed`: the learned conditional's weighted mean and spread over the whole bank."""

    closed_form: bool = setting(False, "the Gaussian conditional of section 5 (eqs 41a / 48a) instead of the bank")


@dataclasses.dataclass(frozen=True)
class HybridConfig(LinearConfig, EmbedConfig, OptimiserConfig):
    """`hybrid`: the learned conditional as the prior of the linear inversion, refined by 4D-Var on sparse tracks."""

    refine: Literal["none", "auto", "gauss_newton", "var"] = setting(
        "auto", "after the Gaussian product of the learned conditional and the velocity likelihood: none (stop), "
                "gauss_newton (a short 4D-Var on positions), auto (refine sparse tracks only), var (4D-Var from the "
                "embed / retrieve estimate, no product)")
    iterations: int = setting(15, "Gauss-Newton iterations per continuation stage of the refinement (var: in all)")
    starts: int = setting(1, "starts of the refinement: the product mean, plus starts - 1 draws from the learned "
                             "conditional (the first its mean); end points in one basin: the least-cost one's "
                             "Laplace Gaussian; in several: the mixture of their Laplace Gaussians")
    start: Literal["embed", "retrieve"] = setting("embed", "refine var: 4D-Var started from this estimate")
    learned_noise_limit: float = setting(1e-6, "position noise std (domain lengths) above which the learned "
                                               "conditional is not used: the shipped encoder was trained on exact "
                                               "tracks stored in float32")

    def checks(self) -> list[tuple[bool, str]]:
        return super().checks() + [
            (self.start in HYBRID_STARTS, f"start must be one of {HYBRID_STARTS}, got {self.start!r}"),
            (self.iterations >= 1, f"iterations must be >= 1, got {self.iterations}"),
            (self.starts >= 1, f"starts must be >= 1, got {self.starts}"),
            (self.refine in HYBRID_REFINES, f"refine must be one of {HYBRID_REFINES}, got {self.refine!r}"),
            (self.learned_noise_limit >= 0, f"learned_noise_limit must be >= 0, got {self.learned_noise_limit}"),
        ]


# deprecated option names (CHANGELOG.md) -> (the methods they apply to, the field's name); accepted with a
# deprecation note until the next release
RENAMED = {
    "var_iterations": (("var",), "iterations"), "var_lr": (("var", "hybrid"), "lr"),
    "var_sigma_floor": (("var", "hybrid"), "sigma_floor"), "enkf_members": (("enkf",), "members"),
    "enkf_iterations": (("enkf",), "iterations"), "enkf_sigma_floor": (("enkf",), "sigma_floor"),
    "hybrid_start": (("hybrid",), "start"), "hybrid_iterations": (("hybrid",), "iterations"),
    "hybrid_starts": (("hybrid",), "starts"), "hybrid_refine": (("hybrid",), "refine"),
    "hybrid_learned_noise_limit": (("hybrid",), "learned_noise_limit"),
}


def configure(method: str, config_class, options: dict, strict: bool = True) -> tuple[Any, list[str]]:
    """Returns (the validated config of `method` with `options` applied, deprecation notes).

    Options are field names of `config_class`; a deprecated option name (`RENAMED`, CHANGELOG.md) is mapped
    to its field with a note (dropped, with a note, for a method it never applied to).

    Parameters
    ----------
    strict
        raise for an option that is no field of this method (else leave it out: the caller
        applies one set of options to several methods and checks that each is used by one).

    Raises
    ------
    ValueError
        one line for an unknown option (listing the valid ones) or a bad value.
    """
    names = {f.name for f in dataclasses.fields(config_class)}
    values, notes = {}, []
    for name, value in options.items():
        if name in RENAMED:
            methods, new = RENAMED[name]
            if method not in methods:
                if strict:
                    notes.append(f"option {name} is deprecated and does not apply to {method}: ignored")
                continue
            notes.append(f"option {name} is deprecated (removed in the next release): use {new}")
            name = new
        if name in names:
            values[name] = value
        elif strict:
            raise ValueError(f"option {name} does not apply to method {method}; valid: {', '.join(sorted(names))}")
    return dataclasses.replace(config_class(), **values).validate(), notes
