"""Posterior over Fourier coefficients, as weighted samples per field, with what the method decided.

A method's estimate of one field is a `FieldEstimate`; the `Posterior` of a track file stacks them
(`stack_estimates`). Particle methods give their particles and weights, Gaussian methods (linear,
var's Laplace approximation) samples drawn from the Gaussian with equal weights and the Gaussian's covariance
itself (`cov`: the spreads written to file are then exact, not the samples'), retrieval its top candidates as
members (and again as `candidates`).
"""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np

from lagda.assimilation.methods.config import DIVERGENT_WARN
from lagda.report import counted

# info entries left out of the diagnostics: the learned conditional's moments (2K values each),
# which the result file already holds as the posterior's coefficients
LARGE_INFO = ("mean", "var")
MAX_ARRAY = 16  # longer arrays in info are left out of the diagnostics
_DROP = object()


def _weighted_moments(values, weights):
    """Returns the weighted mean and std over members of real `values` (field, member, mode)."""
    mean = np.einsum("fm,fmk->fk", weights, values)
    var = np.einsum("fm,fmk->fk", weights, (values - mean[:, None, :]) ** 2)
    return mean, np.sqrt(np.maximum(var, 0.0))


@dataclasses.dataclass(frozen=True)
class FieldEstimate:
    """One field's posterior: weighted samples, plus retrieval candidates when there are any."""

    samples: np.ndarray  # complex (member, mode)
    weights: np.ndarray  # float64 (member,), sums to 1
    candidates: np.ndarray | None = None  # complex (rank, mode)
    candidate_weights: np.ndarray | None = None  # (rank,)
    info: dict = dataclasses.field(default_factory=dict)
    cov: np.ndarray | None = None  # a Gaussian posterior's covariance of x = (Re c, Im c), float64 (2 mode, 2 mode)


@dataclasses.dataclass(frozen=True)
class Posterior:
    """Posterior over coefficients for each field, as weighted samples.

    Attributes
    ----------
    samples
        complex128 `(field, member, mode)` coefficient samples.
    weights
        float64 `(field, member)`, each row sums to 1.
    method
        name of the DA method that produced it.
    candidates
        retrieval only, complex `(field, rank, mode)` best candidates.
    candidate_weights
        retrieval only, float `(field, rank)`.
    seconds
        wall seconds spent per field `(field,)`.
    info
        per field, the method's decisions (FieldEstimate.info): a tuple of dicts.
    cov
        a Gaussian posterior's covariance of x = (Re c, Im c), float64 `(field, 2 mode, 2 mode)`, when every
        field has one (the samples are drawn from it): the spreads (`std_re`, `std_im`,
        lagda.assimilation.fields.grid_posterior) are then computed from it exactly; else None.
    """

    samples: np.ndarray
    weights: np.ndarray
    method: str
    candidates: np.ndarray | None = None
    candidate_weights: np.ndarray | None = None
    seconds: np.ndarray | None = None
    info: tuple | None = None
    cov: np.ndarray | None = None

    def __post_init__(self):
        s, w = np.asarray(self.samples), np.asarray(self.weights)
        if s.ndim != 3 or w.shape != s.shape[:2]:
            raise ValueError(f"Posterior: samples {s.shape} must be (field, member, mode) and weights {w.shape} "
                             "(field, member)")
        if self.cov is not None and np.shape(self.cov) != (s.shape[0], 2 * s.shape[2], 2 * s.shape[2]):
            raise ValueError(f"Posterior: cov {np.shape(self.cov)} must be (field, 2 mode, 2 mode) for samples "
                             f"{s.shape}")

    @property
    def n_field(self) -> int:
        """Returns the number of fields."""
        return int(np.shape(self.samples)[0])

    @property
    def mean(self) -> np.ndarray:
        """Returns the weighted posterior mean, complex `(field, mode)`."""
        w = np.asarray(self.weights, dtype=np.float64)
        return np.einsum("fm,fmk->fk", w, np.asarray(self.samples, dtype=np.complex128))

    @property
    def std_re(self) -> np.ndarray:
        """Returns the std of Re c, float `(field, mode)`: from `cov` when there is one, else the samples'."""
        if self.cov is not None:
            return self._cov_std()[:, : np.shape(self.samples)[2]]
        return _weighted_moments(np.real(self.samples).astype(np.float64), np.asarray(self.weights, np.float64))[1]

    @property
    def std_im(self) -> np.ndarray:
        """Returns the std of Im c, float `(field, mode)`: from `cov` when there is one, else the samples'."""
        if self.cov is not None:
            return self._cov_std()[:, np.shape(self.samples)[2] :]
        return _weighted_moments(np.imag(self.samples).astype(np.float64), np.asarray(self.weights, np.float64))[1]

    def _cov_std(self) -> np.ndarray:
        return np.sqrt(np.maximum(np.diagonal(np.asarray(self.cov, np.float64), axis1=1, axis2=2), 0.0))

    def diagnostics(self) -> list[dict]:
        """Returns per field the JSON-ready decisions of the method (info without large arrays)."""
        return [jsonable(dict(info)) for info in (self.info or [{}] * self.n_field)]


def stack_estimates(estimates, method: str, seconds) -> "Posterior":
    """Returns the `Posterior` of per-field `FieldEstimate`s (their info as `Posterior.info`), `seconds` `(field,)`."""
    has_candidates = all(e.candidates is not None for e in estimates)
    has_cov = all(e.cov is not None for e in estimates)
    return Posterior(
        samples=np.stack([e.samples for e in estimates]).astype(np.complex128),
        weights=np.stack([e.weights for e in estimates]).astype(np.float64),
        method=method,
        candidates=np.stack([e.candidates for e in estimates]).astype(np.complex128) if has_candidates else None,
        candidate_weights=np.stack([e.candidate_weights for e in estimates]) if has_candidates else None,
        seconds=np.asarray(seconds, np.float64),
        info=tuple(dict(e.info) for e in estimates),
        cov=np.stack([e.cov for e in estimates]).astype(np.float64) if has_cov else None,
    )


def jsonable(value, key: str | None = None):
    """Returns `value` as plain JSON types: numpy scalars as Python, short arrays as lists, inf / nan
    as the strings "inf" / "nan"; `_DROP` for entries left out (LARGE_INFO keys, long arrays)."""
    if key in LARGE_INFO:
        return _DROP
    if isinstance(value, dict):
        out = {str(k): jsonable(v, str(k)) for k, v in value.items()}
        return {k: v for k, v in out.items() if v is not _DROP}
    if isinstance(value, (list, tuple)):
        return [v for v in (jsonable(v) for v in value) if v is not _DROP]
    if hasattr(value, "__array__") and not np.isscalar(value):
        array = np.asarray(value)
        if array.ndim == 0:
            return jsonable(array.item())
        return _DROP if array.size > MAX_ARRAY else jsonable(array.tolist())
    if isinstance(value, np.generic):
        return jsonable(value.item())
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return str(value)


def describe_diagnostics(method: str, diagnostics: list[dict], mapping=None) -> str:
    """Returns one line of what `method` decided per field, fields with the same story grouped ("field 0: " left out
    when there is one field).

    E.g. "hybrid: fields 0-7: differences over 1 fix step, velocity noise 3e-09, prior learned x4, refined no".

    Parameters
    ----------
    diagnostics
        one info dict per field (`Posterior.diagnostics()`).
    mapping
        the tracks' lagda.io.physical.Mapping, or None: then scales stay in model units; with one, the
        error model's time scale is in days and its std, the noise levels, in m/s and m.
    """
    groups: dict[str, list[int]] = {}
    for f, info in enumerate(diagnostics):
        groups.setdefault(_describe_field(info, mapping) or "no diagnostics", []).append(f)
    parts = [text if len(diagnostics) == 1 else f"{_field_range(fields)}: {text}" for text, fields in groups.items()]
    if not parts:
        return f"{method}: no fields"
    undetermined = [f for f, info in enumerate(diagnostics) if info.get("noise_determined") is False]
    advice = (f". The tracks of {_field_range(undetermined)} do not determine the noise (the middle of the range "
              "they allow is used): give --noise-std if it is known (0 for exact tracks)") if undetermined else ""
    return f"{method}: " + "; ".join(parts) + advice


def _scales(mapping):
    """Returns (speed, length, days): functions writing a model velocity, length and time in m/s, m and days with a
    lagda.io.physical.Mapping (a square box's side; sqrt(L_x L_y) otherwise), or as plain model numbers without."""
    if mapping is None:
        plain = "{:.3g}".format
        return plain, plain, plain
    side = float(np.sqrt(np.prod(mapping.lengths_m)))
    return (lambda v: f"{float(v) * side / mapping.time_scale_s:.2g} m/s", lambda x: f"{float(x) * side:.2g} m",
            lambda t: f"{float(t) * mapping.time_scale_s / 86400.0:.3g} days")


def _field_range(fields: list[int]) -> str:
    """Returns "field 3" or "fields 0-2,5" for a sorted list of field indices."""
    if len(fields) == 1:
        return f"field {fields[0]}"
    runs, start = [], fields[0]
    for a, b in zip(fields, fields[1:] + [None]):
        if b != a + 1:
            runs.append(f"{start}" if start == a else f"{start}-{a}")
            start = b
    return "fields " + ",".join(runs)


def _describe_field(info: dict, mapping=None) -> str:
    """Returns the short story of one field's diagnostics (the known keys; the file holds them all), its scales in
    physical units with a `mapping` (see describe_diagnostics)."""
    words = []
    yes = lambda flag: "yes" if flag else "no"
    speed, length, days = _scales(mapping)
    if "lag" in info or "data" in info:
        order = f"order-{info['fd_order']} " if "fd_order" in info else ""
        steps = f"from {order}differences over {counted(int(info['lag']), 'fix step')}" if "lag" in info else ""
        words.append(" ".join(word for word in (str(info.get("data", "")), steps) if word))
    if "cv_ratio" in info:
        words.append(f"the current the flow leaves out: std {speed(info['representation_std'])} over "
                     f"{days(info['representation_time'])}; held-out drifters: {float(info['cv_ratio']):.0%} of their "
                     "mean square velocity unexplained (zero: 100%)"
                     + (f"; {info['velocity_outliers_dropped']} velocity outliers left out"
                        if info.get("velocity_outliers_dropped") else "")
                     + ("; answered zero (no better than it)" if info.get("zero_guard") else ""))
    elif info.get("error_model") == "ou":
        words.append(f"the current the flow leaves out (variance: {info.get('representation_var_source', '?')}; "
                     f"time scale: {info.get('representation_time_source', '?')})")
    if "third_difference_heavy_tail" in info:
        words.append("noise judged by the median of the third differences (a few fixes off their track)")
    units = {"position noise": length, "velocity noise": speed} if mapping is not None else {}
    for key, label in (("noise_std_est", "position noise"), ("position_noise_std", "position noise"),
                       ("velocity_noise_std", "velocity noise"), ("data_noise_std", "data noise"), ("sigma", "sigma")):
        if isinstance(info.get(key), (int, float)) and not (label == "position noise"
                                                            and "position noise" in " ".join(words)):
            words.append(f"{label} {units.get(label, '{:.2g}'.format)(info[key])}")
            if key == "sigma" and isinstance(info.get("sigma_90"), (list, tuple)):  # the evidence's 90% interval
                words[-1] += " (90% {:.2g} to {:.2g})".format(*info["sigma_90"])
            if key == "sigma" and info.get("noise_determined") is False:
                words[-1] += ", undetermined: any std below about {:.2g} fits as well".format(info["sigma_90"][1])
    given = info.get("noise_source", {True: "given", False: "estimated"}.get(info.get("noise_std_given")))
    if given is not None:
        words.append("noise " + {"empirical_bayes": "estimated",
                                 "evidence": "from the fit's evidence"}.get(given, str(given)))
    if "stages_max" in info:  # sample: its convergence evidence, and where its moves failed
        words.append(f"stages {info['stages_max']}" + ("" if info.get("tempering_complete", True) else
                                                       " (tempering incomplete: the last stage's l is below 1)"))
        if isinstance(info.get("rhat_max"), (int, float)):
            words.append(f"R-hat max {info['rhat_max']:.3g}")
        if isinstance(info.get("divergent_max"), (int, float)):
            words.append(f"divergent moves up to {info['divergent_max']:.0%} of a stage"
                         + (": the moves could not follow the posterior's curvature, so its spread may be too narrow"
                            if info["divergent_max"] > DIVERGENT_WARN else ""))
    if "importance_runs" in info:  # sample with importance_draws: which runs the start's weights alone served
        words.append(f"importance sampled {info['importance_runs']} of {info.get('n_runs', '?')} runs (ESS min "
                     f"{info['importance_ess_min']:.0f}, Pareto k max {info['importance_pareto_k_max']:.2f}"
                     + ("" if info["importance_runs"] == info.get("n_runs") else "; the others tempered") + ")")
    if info.get("learned_conditional") is False:
        words.append(f"learned prior unused ({info.get('learned_fallback', 'no reason given')})")
    elif "prior_inflation" in info:
        a = info["prior_inflation"]
        words.append("prior original" if a in ("inf", float("inf")) else f"prior learned x{float(a):g}")
    if info.get("encoder_fix_spacing"):
        words.append(f"encoder read fixes {info['encoder_fix_spacing']:.3g} apart (its training cadence)")
    if "refined" in info:
        words.append(f"refined {yes(info['refined'])}")
    if "iterations" in info:
        words.append(f"iterations {info['iterations']}")
    if "passes" in info:
        words.append(f"passes {info['passes']}")
    if "converged" in info:
        words.append(f"converged {yes(info['converged'])}")
    if "top_score" in info:
        words.append(f"top score {info['top_score']:.3g}")
    if info.get("closed_form"):
        words.append("closed form")
    return ", ".join(words)
