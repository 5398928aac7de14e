"""The assimilation methods as objects: each owns its config and is called as `method(tracks, model, key)`.

    method = METHODS["linear"](noise_std=1e-3)          # or Linear(LinearConfig(noise_std=1e-3))
    posterior = method(tracks, model, jax.random.key(0))  # Posterior of every field of `tracks`

A method object is built from its config (a frozen dataclass of lagda.assimilation.methods.config,
validated on construction) and, for the learned methods, a trained encoder (`Scorer`, or
`Embed.from_run(run_dir)`). The classes here are thin: each imports its implementation module (JAX)
on first call, so `METHODS` can be read at start-up by the command line, which makes one option per
config field.

The methods by name are `METHODS`; `make_method` builds one from its name and settings.
"""

from __future__ import annotations

import abc
import time
from typing import ClassVar

from lagda.assimilation.methods.config import (
    EmbedConfig,
    EnkfConfig,
    HybridConfig,
    LinearConfig,
    MethodConfig,
    RetrieveConfig,
    SampleConfig,
    VarConfig,
    configure,
)
from lagda.assimilation.posterior import FieldEstimate, Posterior, stack_estimates


class Method(abc.ABC):
    """An assimilation method: its config, and `__call__(tracks, model, key) -> Posterior`.

    Class attributes: `name` (the --method value), `Config` (its config class), `summary` (one line),
    `learned` (needs a trained encoder), `chosen_basis` (works in a chosen basis with a time basis),
    `takes_background` (fits the departure from a model's prior mean velocity, `FlowModel.background`).
    """

    name: ClassVar[str]
    Config: ClassVar[type[MethodConfig]]
    summary: ClassVar[str]
    learned: ClassVar[bool] = False
    chosen_basis: ClassVar[bool] = True
    takes_background: ClassVar[bool] = False
    progress: bool = False  # draw a progress bar on stderr (the methods that take long: sample)

    def __init__(self, config: MethodConfig | None = None, **options):
        """Builds the method from `config`, or from `options` (its config's field names; the deprecated option
        names of CHANGELOG.md are accepted with a note in `self.notes`).

        Raises
        ------
        ValueError
            for an unknown option or a bad value (one line)
        TypeError
            for another method's config.
        """
        if config is not None and options:
            raise ValueError(f"{self.name}: pass a config or options, not both")
        if config is not None and not isinstance(config, self.Config):
            raise TypeError(f"{self.name} takes a {self.Config.__name__}, got a {type(config).__name__}")
        self.config, notes = ((config.validate(), []) if config is not None
                              else configure(self.name, self.Config, options))
        self.notes = tuple(notes)

    def __call__(self, tracks, model, key=None) -> Posterior:
        """Returns the posterior of every field of `tracks` (lagda.io.tracks.Tracks; field f of the posterior is
        field f of the tracks) in `model` (lagda.assimilation.model.FlowModel), from `key` (default key(0)).

        Raises
        ------
        ValueError
            for tracks the method cannot use, a chosen basis the method does not take, or a model with a background
            (`FlowModel.background`) for a method that takes none.
        """
        import jax

        self.check_basis(model.time is not None)
        if getattr(model, "background", None) is not None and not self.takes_background:
            takers = " or ".join(name for name, method in METHODS.items() if method.takes_background)
            raise ValueError(f"{self.name} takes no background (a prior mean velocity): {takers} does")
        with jax.enable_x64(True):  # the inversions need float64 whatever the caller's JAX setting
            key = jax.random.key(0) if key is None else key
            estimates, seconds = self.estimates(tracks, model, key)
        return stack_estimates(estimates, self.name, seconds)

    @classmethod
    def check_basis(cls, chosen: bool) -> None:
        """Checks that the method can work in a chosen basis (a model with a time basis) when `chosen` is true.

        Raises
        ------
        ValueError
            one line naming the methods that can, for a method that compares tracks with a trained
            model's flows.
        """
        if chosen and not cls.chosen_basis:
            takers = [name for name, method in METHODS.items() if method.chosen_basis and not method.learned]
            raise ValueError(f"{cls.name} compares tracks with a trained model's flows, which have no time basis: "
                             f"use {', '.join(takers[:-1])} or {takers[-1]} with a chosen basis")

    def estimates(self, tracks, model, key) -> tuple[list[FieldEstimate], list[float]]:
        """Returns (FieldEstimate per field, wall seconds per field):
        `estimate` on each field with key fold_in(key, f)."""
        import jax

        out, seconds = [], []
        for f in range(tracks.n_field):
            start = time.perf_counter()
            out.append(self.estimate(tracks.for_field(f), model, jax.random.fold_in(key, f)))
            seconds.append(time.perf_counter() - start)
        return out, seconds

    @abc.abstractmethod
    def estimate(self, tracks, model, key) -> FieldEstimate:
        """Returns the estimate of one field from its tracks (a one-field Tracks)."""


class Linear(Method):
    name, Config = "linear", LinearConfig
    takes_background = True  # with its error model along the tracks (lagda.assimilation.methods.linear)
    summary = ("closed-form linear-Gaussian posterior from the tracks' velocities (or, on noisy dense tracks, their "
               "displacements), noise by empirical Bayes")

    def estimate(self, tracks, model, key) -> FieldEstimate:
        from lagda.assimilation.methods.linear import assimilate_linear

        return assimilate_linear(tracks.positions, tracks.times, tracks.release, model, self.config, key)


class Var(Method):
    name, Config = "var", VarConfig
    summary = "4D-Var through the differentiable simulator (Levenberg-Marquardt, continuation) with its Laplace spread"

    def estimate(self, tracks, model, key) -> FieldEstimate:
        from lagda.assimilation.methods.variational import assimilate_var

        return assimilate_var(tracks.positions, tracks.times, tracks.release, model, self.config, key)


class Enkf(Method):
    name, Config = "enkf", EnkfConfig
    summary = "ensemble Kalman inversion (ES-MDA over growing windows)"

    def estimate(self, tracks, model, key) -> FieldEstimate:
        from lagda.assimilation.methods.ensemble import assimilate_enkf

        return assimilate_enkf(tracks.positions, tracks.times, tracks.release, model, self.config, key)


ENCODER_STARTS = ("learned", "hybrid")  # sample's starts that read a trained encoder
LEARNED_START = ("sample: start {start!r} needs a trained encoder (for 'learned', one whose similarity has a "
                 "closed-form conditional: inner or l2; the shipped encoder's cosine has none): --model RUN, or "
                 "Sample.from_run(RUN) / run_dir in Python")


class Sample(Method):
    """`sample`; with start "learned" or "hybrid" it also holds a trained encoder: the learned conditional of each
    field's tracks (methods.sample.learned_proposal), or hybrid's posterior of them (a Hybrid of the same encoder),
    is the sampler's initial Gaussian.

    Design: the encoder is needed by those starts only, so Sample stays an unlearned method (`learned` False: no
    encoder for the other starts) that takes an optional encoder: `Sample(config, encoder=scorer, run=name)`, or
    `Sample.from_run(run_dir, config)` as the learned methods' `from_run`; `make_method` (so `lagda assimilate
    --method sample --start learned|hybrid --model RUN`) restores the run for those starts only. The command line
    defaults start "hybrid" to the shipped encoder, as the learned methods; start "learned" needs a closed-form
    similarity, which the shipped cosine one has not.
    """

    name, Config = "sample", SampleConfig
    summary = ("the posterior itself by tempered SMC with HMC moves (blackjax): its mean, the estimate of least "
               "expected error, and its spread; the gold standard, slow (--start var, learned or hybrid: from var's "
               "Laplace Gaussian, the learned conditional of a --model RUN, or hybrid's posterior)")

    def __init__(self, config: SampleConfig | None = None, *, encoder=None, run: str | None = None, **options):
        """The sampler with `config` (or the defaults and `options`), and the encoder its start needs.

        Parameters
        ----------
        encoder
            lagda.assimilation.methods.learned.Scorer of a trained run, for start "learned" only.
        run
            the run's identity or name, recorded in each field's info ("learned_run"); from_run sets it.

        Raises
        ------
        ValueError
            start "learned" without an encoder, or an encoder for another start (one line).
        """
        super().__init__(config, **options)
        if (self.config.start in ENCODER_STARTS) != (encoder is not None):
            raise ValueError(LEARNED_START.format(start=self.config.start) if encoder is None else
                             f"sample: an encoder serves starts {' and '.join(ENCODER_STARTS)} only, "
                             f"not {self.config.start!r}")
        self.encoder, self.run, self.hybrid = encoder, run, None

    @classmethod
    def from_run(cls, run_dir, config: SampleConfig | None = None, **options) -> "Sample":
        """Returns the method with the encoder of a trained run (restored once), recorded by its identity."""
        from lagda.assimilation.methods.learned import scorer_from_run
        from lagda.learning.model import run_identity

        return cls(config, encoder=scorer_from_run(run_dir)[0], run=run_identity(run_dir), **options)

    def estimate(self, tracks, model, key) -> FieldEstimate:
        import dataclasses
        from contextlib import nullcontext

        from lagda.assimilation.methods.sample import assimilate_sample, learned_proposal, progress_bar

        config, proposal, learned = self.config, None, {}
        if config.start == "learned":  # the field's learned conditional, or hybrid's fallback: the prior
            proposal, problem = learned_proposal(tracks, model, self.encoder)
            learned = {"learned_run": self.run, "learned_conditional": problem is None}
            if problem is not None:
                config, learned["learned_fallback"] = (dataclasses.replace(config, start="prior"),
                                                       f"prior instead: {problem}")
        elif config.start == "hybrid":  # hybrid's posterior of the field, moment-matched
            proposal, learned = self._hybrid_proposal(tracks, model, key)
        with progress_bar("sample") if self.progress else nullcontext() as progress:
            estimate = assimilate_sample(tracks.positions, tracks.times, tracks.release, model, config, key,
                                         proposal=proposal, progress=progress)
        if not learned:
            return estimate
        return dataclasses.replace(estimate, info={**estimate.info, "start": self.config.start, **learned})

    def _hybrid_proposal(self, tracks, model, key):
        """Returns (q, info) for start "hybrid": hybrid's posterior of one field as a Gaussian, and what hybrid
        decided (kept under "hybrid") with its seconds."""
        import jax

        from lagda.assimilation.methods.sample import HYBRID_MEMBERS_PER_DIM, Gaussian

        if self.hybrid is None:  # one Hybrid per sampler: its prior bank serves every field
            self.hybrid = Hybrid(self.encoder, noise_std=self.config.noise_std,
                                 members=HYBRID_MEMBERS_PER_DIM * 2 * model.n_modes)
        start = time.perf_counter()
        field = self.hybrid.estimate(tracks, model, jax.random.fold_in(key, 1))
        decided = {k: v for k, v in field.info.items() if isinstance(v, (str, bool, int, float)) or v is None}
        return (Gaussian.of_members(field.samples, field.weights),
                {"learned_run": self.run, "hybrid": decided, "hybrid_seconds": time.perf_counter() - start})


class LearnedMethod(Method):
    """A method that compares tracks with a trained encoder's embedding of a bank of coefficients.

    The object keeps the i.i.d. prior bank it drew (up to config.bank_cache_mb) for its later calls.
    """

    learned, chosen_basis = True, False

    def __init__(self, encoder, config: MethodConfig | None = None, bank=None, **options):
        """The method with a trained encoder, `config` (or the defaults and `options`) and its bank.

        Parameters
        ----------
        encoder
            lagda.assimilation.methods.learned.Scorer (the trained model's comparison of tracks with coefficients)
        bank
            complex `(n, mode)` coefficients to rank, or None for prior draws.
        """
        super().__init__(config, **options)
        self.encoder, self.bank, self.bank_cache = encoder, bank, {}

    @classmethod
    def from_run(cls, run_dir, config: MethodConfig | None = None, bank=None, **options) -> "LearnedMethod":
        """Returns the method with the encoder of a trained run (restored once)."""
        from lagda.assimilation.methods.learned import scorer_from_run

        return cls(scorer_from_run(run_dir)[0], config, bank, **options)

    def estimates(self, tracks, model, key) -> tuple[list[FieldEstimate], list[float]]:
        from lagda.assimilation.methods.learned import bank_estimates

        return bank_estimates(self.name, tracks, model, self.config, self.encoder, key, self.bank, self.bank_cache)

    def estimate(self, tracks, model, key) -> FieldEstimate:
        import jax

        return self.estimates(tracks, model, jax.random.fold_in(key, 0))[0][0]


class Retrieve(LearnedMethod):
    name, Config = "retrieve", RetrieveConfig
    summary = "the paper's Algorithm 1: top candidates of a coefficient bank by learned similarity, softmax weights"


class Embed(LearnedMethod):
    name, Config = "embed", EmbedConfig
    summary = "the learned conditional: weighted mean and spread over a large prior bank"


class Hybrid(LearnedMethod):
    name, Config = "hybrid", HybridConfig
    chosen_basis = True  # with an encoder trained on pairs in that basis (methods.hybrid.basis_hybrid_estimates)
    summary = ("the learned conditional as the prior of the linear inversion; on sparse tracks a Gauss-Newton "
               "4D-Var on the positions follows")

    def estimates(self, tracks, model, key) -> tuple[list[FieldEstimate], list[float]]:
        from lagda.assimilation.methods.hybrid import hybrid_estimates

        return hybrid_estimates(tracks, model, self.config, self.encoder, key, self.bank, self.bank_cache)


METHODS: dict[str, type[Method]] = {cls.name: cls for cls in (Linear, Var, Enkf, Sample, Retrieve, Embed, Hybrid)}
"""The assimilation methods by name (the values of `lagda assimilate --method`): name -> Method subclass.

Each class has `Config` (its settings: a frozen dataclass of lagda.assimilation.methods.config),
`summary` (one line), `learned` (needs a trained encoder) and `chosen_basis` (works in a chosen basis).
`METHODS[name](**options)` or `METHODS[name](config)` builds an unlearned method (a learned one takes a
trained encoder first; `make_method` builds either); calling it with (tracks, model, key) returns the
Posterior of every field of the tracks.

Examples
--------
>>> from lagda.assimilation import METHODS
>>> sorted(METHODS)
['embed', 'enkf', 'hybrid', 'linear', 'retrieve', 'sample', 'var']
>>> METHODS["linear"].Config.__name__, METHODS["embed"].learned
('LinearConfig', True)
>>> METHODS["var"](iterations=10).config.iterations
10
"""


def method_config(name: str, options: MethodConfig | dict | None = None) -> tuple[MethodConfig, list[str]]:
    """Returns the validated config of method `name` and the notes on deprecated option names.

    Parameters
    ----------
    name : str
        A key of `METHODS`.
    options : MethodConfig or dict or None
        The method's settings: its own config (`METHODS[name].Config`, exactly that class), or a dict of that
        config's field names (the deprecated names of CHANGELOG.md are accepted with a note), or None for the
        defaults.

    Returns
    -------
    config : MethodConfig
        An instance of `METHODS[name].Config`, validated.
    notes : list of str
        One line per deprecated option name used.

    Raises
    ------
    ValueError
        One line for an unknown method, an unknown option (listing the valid ones), a bad value, or another
        method's config.

    Examples
    --------
    >>> from lagda.assimilation.methods.config import LinearConfig
    >>> method_config("linear", {"members": 16})[0].members
    16
    >>> method_config("var", LinearConfig())
    Traceback (most recent call last):
    ...
    ValueError: method var takes a VarConfig, got a LinearConfig
    """
    if name not in METHODS:
        raise ValueError(f"unknown method {name!r}; valid methods: {', '.join(METHODS)}")
    cls = METHODS[name]
    if isinstance(options, MethodConfig):
        if type(options) is not cls.Config:  # exactly: HybridConfig is also a LinearConfig
            raise ValueError(f"method {name} takes a {cls.Config.__name__}, got a {type(options).__name__}")
        return options.validate(), []
    return configure(name, cls.Config, dict(options or {}))


def check_options(name: str, options: MethodConfig | dict | None = None) -> None:
    """Checks that `name` is a method and `options` settings it takes, before any file is read or run restored.

    Parameters
    ----------
    name : str
        A key of `METHODS`.
    options : MethodConfig or dict or None
        As `method_config` takes them.

    Raises
    ------
    ValueError
        As `method_config`.

    Examples
    --------
    >>> check_options("linear", {"members": 16})
    >>> check_options("linear", {"top_k": 4})
    Traceback (most recent call last):
    ...
    ValueError: option top_k does not apply to method linear; valid: ...
    """
    method_config(name, options)


def make_method(name: str, options: MethodConfig | dict | None = None, run_dir=None, encoder=None) -> Method:
    """Returns the method `name` with its settings; a learned one (or sample started from an encoder) with the
    encoder given or restored from `run_dir`.

    Parameters
    ----------
    name : str
        A key of `METHODS`.
    options : MethodConfig or dict or None
        The method's settings, as `method_config` takes them; the notes on deprecated names are the method's
        `notes`.
    run_dir : str or path-like, optional
        A trained run (lagda train), restored for a learned method or sample's starts "learned" and "hybrid".
    encoder : lagda.assimilation.methods.learned.Scorer, optional
        A trained encoder to use instead of `run_dir`'s.

    Returns
    -------
    Method
        Ready to be called as `method(tracks, model, key)`.

    Raises
    ------
    ValueError
        For an unknown method or option, a bad value, another method's config, or a learned method (or
        sample's start "learned") without an encoder or run.

    Examples
    --------
    >>> method = make_method("enkf", {"members": 8})
    >>> method.name, method.config.members, method.notes
    ('enkf', 8, ())
    """
    config, notes = method_config(name, options)  # checked before any run is restored
    cls = METHODS[name]
    if cls is Sample and config.start in ENCODER_STARTS:  # the starts of an unlearned method that read an encoder
        method = (Sample.from_run(run_dir, config) if encoder is None and run_dir is not None
                  else Sample(config, encoder=encoder))  # with neither: ValueError(LEARNED_START)
    elif not cls.learned:
        method = cls(config)
    elif encoder is not None:
        method = cls(encoder, config)
    elif run_dir is None:
        raise ValueError(f"method {name!r} needs a trained model (--model RUN, or run_dir in Python)")
    else:
        method = cls.from_run(run_dir, config=config)
    method.notes = tuple(notes)
    return method
