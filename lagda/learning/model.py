"""A trained run as a model: build it, load it from a run directory, embed tracks with it.

Assimilation and evaluation import this module, not the training loop. A run directory holds
config.json (TrainConfig), dataset.json (modes, frequencies, prior, times of the training
data), checkpoints/ (orbax) and metrics.jsonl.
"""

from __future__ import annotations

import hashlib
import json
import math
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from tqdm import tqdm

from lagda.learning import checkpoint, kernel_set
from lagda.learning.config import TrainConfig
from lagda.learning.encoders import (
    FeatureStats,
    TrajectoryTransformer,
    encode_track_points,
    encode_tracks,
    similarity_mask,
)
from lagda.learning.loss_registry import LOSSES
from lagda.learning.optimizer import make_optimizer
from lagda.learning.set_encoder import SetEncoder, embedding_width


class Contrastive(nnx.Module):
    """The trained objects: the encoder g_v, log tau and the sigmoid-loss bias."""

    def __init__(self, n_obs: int, k1, k2, config: TrainConfig, *, rngs: nnx.Rngs, modes: dict | None = None):
        self.coef_embedding = config.coef_embedding  # the fixed g_u(c) the encoder is compared with
        if config.encoder == "set":
            if modes is None:
                raise ValueError("the set encoder needs the dataset's modes, frequencies and times (PairedData.meta())")
            self.encoder = SetEncoder(embedding_width(len(k1), config.coef_embedding), config, modes, rngs=rngs)
        else:
            self.encoder = TrajectoryTransformer(n_obs, 2 * len(k1), config, rngs=rngs, modes=modes)
        scale = None if config.similarity_weights == "uniform" else (modes or {}).get("prior_scale")
        if config.similarity_weights == "prior" and scale is None:
            raise ValueError("similarity_weights = 'prior' needs the dataset's prior_scale (PairedData.meta())")
        self.mask = FeatureStats(jnp.asarray(similarity_mask(k1, k2, config.mask_mean_mode, scale,
                                                             config.coef_embedding)))
        log_tau = jnp.asarray(math.log(config.tau), jnp.float32)
        self.log_tau = nnx.Param(log_tau) if config.learn_tau else FeatureStats(log_tau)
        self.bias = nnx.Param(jnp.asarray(config.sigmoid_bias, jnp.float32))
        if LOSSES[config.loss].set_kernel:
            self._init_kernel_set(2 * len(k1), config, modes)

    def _init_kernel_set(self, n_embed: int, config: TrainConfig, modes: dict | None) -> None:
        # The evaluation draw of the random features: fixed, saved in every checkpoint (training
        # draws a new one each step, train.rff_key).
        key = jax.random.fold_in(jax.random.key(config.seed), EVAL_DRAW)
        omega, beta = kernel_set.draw_frequencies(key, config.kernel, n_embed, config.kernel_features,
                                                  config.kernel_scale)
        self.rff_omega = FeatureStats(omega.astype(jnp.float32))
        self.rff_beta = FeatureStats(beta.astype(jnp.float32))
        if config.kernel_coef_set == "time":
            if modes is None:
                raise ValueError("the time-indexed coefficient set needs the dataset's times and frequencies")
            times = kernel_set.coefficient_times(modes["time"], config.kernel_coef_times)
            self.coef_times = FeatureStats(jnp.asarray(times, jnp.float32))
            self.mode_omega = FeatureStats(jnp.asarray(np.asarray(modes["omega"]), jnp.float32))

    def coefficient_points(self, u_emb):
        """Returns the coefficient side's point sets `(batch, M, 2K)` of masked g_u(c) `(batch, 2K)` (kernel_set)."""
        if not hasattr(self, "coef_times"):
            return kernel_set.coefficient_points(u_emb, None, None)
        return kernel_set.coefficient_points(u_emb, self.mode_omega[...], self.coef_times[...])


EVAL_DRAW = 2_000_003  # fold_in tag of the fixed evaluation draw of the random features


def build_model(config: TrainConfig, n_obs: int, k1, k2, modes: dict | None = None) -> Contrastive:
    """Returns a freshly initialised Contrastive model (seed = config.seed), n_e = 2 * len(k1).

    `modes`: the dataset meta (PairedData.meta()), needed by physics models and the set encoder.
    """
    return Contrastive(n_obs, k1, k2, config, rngs=nnx.Rngs(params=config.seed), modes=modes)


def _embed_fn(graphdef, state, positions, estimate, times=None, mask=None):
    return encode_tracks(nnx.merge(graphdef, state), positions, estimate, times, mask)


def _estimate_fn(graphdef, state, positions):
    model = nnx.merge(graphdef, state)
    flat = model.physics_estimate(positions.reshape(-1, *positions.shape[2:]))
    return flat.reshape(*positions.shape[:2], -1)


_embed_jit = jax.jit(_embed_fn, static_argnums=0)
_estimate_jit = jax.jit(_estimate_fn, static_argnums=0)


def _batched(fn, model, arrays, batch_size: int, desc: str | None) -> np.ndarray:
    """Returns fn(graphdef, state, *chunks) over the leading axis in padded batches, concatenated."""
    graphdef, state = nnx.split(model)
    n = arrays[0].shape[0]
    size = min(batch_size, n)
    out = []
    for start in tqdm(range(0, n, size), desc=desc, disable=desc is None, leave=False):
        chunks = []
        for array in arrays:
            chunk = None if array is None else array[start:start + size]
            if chunk is not None and chunk.shape[0] < size:
                chunk = np.concatenate([chunk, np.repeat(chunk[-1:], size - chunk.shape[0], axis=0)])
            chunks.append(None if chunk is None else jnp.asarray(chunk))
        out.append(np.asarray(fn(graphdef, state, *chunks))[: min(size, n - start)])
    return np.concatenate(out).astype(np.float32)


def _set_embed_fn(graphdef, state, positions, estimate, times, mask, alphas):
    model = nnx.merge(graphdef, state)
    points = encode_track_points(model.encoder, positions, estimate, times, mask) * model.mask[...][None, None]
    return kernel_set.set_embedding(points, model.rff_omega[...], model.rff_beta[...], *alphas)


_set_embed_jit = jax.jit(_set_embed_fn, static_argnums=(0, 6))


def embed_track_sets(model: Contrastive, config: TrainConfig, positions, batch_size: int = 256, estimates=None,
                     progress: bool = False, times=None, mask=None) -> np.ndarray:
    """Returns the kernel-set embeddings [sqrt(alpha1) mean v_i, sqrt(alpha2) mean z(v_i)] `(field, 2K + D)`.

    Each field's set is every token of every drifter (encode_track_points), masked and normalised;
    z uses the run's fixed evaluation draw (model.rff_omega, model.rff_beta). Inner products with
    `kernel_set_similarity(model, config).coefficient_embedding(g_u(c))` are the similarities s.
    `times`, `mask` `(field, drifter, obs)`: set encoder only, as in `embed_tracks`.
    """
    positions = np.asarray(positions, np.float32)
    if positions.ndim != 4:
        raise ValueError(f"expected positions (field, drifter, obs, 2), got {positions.shape}")
    shape = positions.shape[:3]
    arrays = [positions, estimates, None if times is None else np.broadcast_to(np.asarray(times, np.float32), shape),
              None if mask is None else np.broadcast_to(np.asarray(mask, bool), shape)]
    alphas = (config.kernel_alpha1, config.kernel_alpha2)
    fn = lambda graphdef, state, *chunks: _set_embed_jit(graphdef, state, *chunks, alphas)  # noqa: E731
    return _batched(fn, model, arrays, batch_size, "embed" if progress else None)


def kernel_set_similarity(model: Contrastive, config: TrainConfig) -> kernel_set.KernelSetSimilarity:
    """Returns the run's kernel-set similarity with its stored draw (the `kind` for losses.similarity)."""
    timed = hasattr(model, "coef_times")
    return kernel_set.KernelSetSimilarity(
        omega=np.asarray(model.rff_omega[...]), beta=np.asarray(model.rff_beta[...]), alpha1=config.kernel_alpha1,
        alpha2=config.kernel_alpha2, mask=np.asarray(model.mask[...]),
        mode_omega=np.asarray(model.mode_omega[...]) if timed else np.zeros(0, np.float32),
        times=np.asarray(model.coef_times[...]) if timed else None)


def track_estimates(model: TrajectoryTransformer, positions, batch_size: int = 256, progress: bool = False):
    """Returns the physics estimates theta_hat `(field, drifter, n_e)` of tracks, or None (no physics).

    They depend on the data only, so training computes them once per dataset.
    """
    if not model.physics:
        return None
    if isinstance(positions, np.ndarray) or not hasattr(positions, "shape"):  # a DiskPositions is read batch by batch
        positions = np.asarray(positions, np.float32)
    return _batched(_estimate_jit, model, [positions], batch_size, "physics features" if progress else None)


def embed_tracks(model: TrajectoryTransformer | SetEncoder, positions, batch_size: int = 256, estimates=None,
                 progress: bool = False, times=None, mask=None) -> np.ndarray:
    """Returns float32 embeddings g_v `(field, n_e)` of tracks `(field, drifter, obs, 2)`.

    Fields are embedded in batches of `batch_size` (the last padded, so one compilation per
    batch shape); a field's drifters are averaged (`encode_tracks`).

    Parameters
    ----------
    model : TrajectoryTransformer or SetEncoder
        The encoder g_v (`load_run`).
    positions : array_like
        Unwrapped positions `(field, drifter, obs, 2)`, domain lengths.
    batch_size : int, default 256
        Fields per compiled call.
    estimates : array_like, optional
        Precomputed `track_estimates` (physics models; computed on the fly otherwise).
    progress : bool, default False
        Show a progress bar.
    times, mask : array_like, optional
        Float model times and bool validity, broadcastable to `(field, drifter, obs)`: set encoder only
        (default: the training time grid, all observations valid); masked positions are never read.

    Returns
    -------
    numpy.ndarray
        float32 `(field, n_e)`.

    Raises
    ------
    ValueError
        If `positions` is not 4-dimensional (its shape quoted).
    """
    positions = np.asarray(positions, np.float32)
    if positions.ndim != 4:
        raise ValueError(f"expected positions (field, drifter, obs, 2), got {positions.shape}")
    arrays = [positions, estimates]
    if times is not None or mask is not None:
        shape = positions.shape[:3]
        arrays.append(None if times is None else np.broadcast_to(np.asarray(times, np.float32), shape))
        arrays.append(None if mask is None else np.broadcast_to(np.asarray(mask, bool), shape))
    return _batched(_embed_jit, model, arrays, batch_size, "embed" if progress else None)


def read_run_files(run_dir):
    """Returns (TrainConfig, dataset meta) from a run directory's json files, without the model.

    Raises
    ------
    FileNotFoundError
        if run_dir or its config/dataset json is missing.
    ValueError
        if they are corrupted.
    """
    run_dir = pathlib.Path(run_dir)
    for name in ("config.json", "dataset.json"):
        if not (run_dir / name).is_file():
            raise FileNotFoundError(f"not a lagda run directory: {run_dir} (missing {name})")
    try:
        config = TrainConfig.from_dict(json.loads((run_dir / "config.json").read_text()))
        meta = json.loads((run_dir / "dataset.json").read_text())
    except (json.JSONDecodeError, TypeError) as error:
        raise ValueError(f"corrupted run directory {run_dir}: {error}") from None
    return config, meta


def load_run(run_dir):
    """Returns the trajectory encoder g_v, its TrainConfig and its data's description, from a run's latest checkpoint.

    Parameters
    ----------
    run_dir : str or os.PathLike
        A run directory written by `lagda.learning.train.train` (config.json, dataset.json, checkpoints/).

    Returns
    -------
    encoder : TrajectoryTransformer or SetEncoder
        g_v: tracks `(field, drifter, obs, 2)` in model units to embeddings `(field, n_e)` (`embed_tracks`).
    config : TrainConfig
        The run's settings.
    meta : dict
        The training data's description (dataset.json): modes `k1`, `k2` and frequencies `omega` `(mode,)`,
        `prior_scale` `(mode,)`, observation times `time` `(obs,)`, `n_drifters` and the generator's `attrs`.

    Raises
    ------
    FileNotFoundError, ValueError
        As `load_trained`.

    Examples
    --------
    >>> from lagda.examples import shipped
    >>> encoder, config, meta = load_run(shipped("learned"))
    >>> config.encoder
    'set'
    """
    model, config, meta = load_trained(run_dir)
    return model.encoder, config, meta


def load_trained(run_dir):
    """Returns (Contrastive model, TrainConfig, dataset meta) of the latest checkpoint of a run.

    The whole trained model: the encoder, the (possibly learned) temperature
    `trained_tau(model)` and the similarity mask. It is built abstractly (nnx.eval_shape),
    restored with orbax and filled with nnx.merge, so no initialisation is computed.

    Parameters
    ----------
    run_dir : str or os.PathLike
        A run directory written by `lagda.learning.train.train`.

    Returns
    -------
    model : Contrastive
        The trained model.
    config : TrainConfig
        The run's settings.
    meta : dict
        The training data's description, as in `load_run`.

    Raises
    ------
    FileNotFoundError
        If `run_dir`, its config.json / dataset.json or its checkpoints are missing.
    ValueError
        If they are corrupted or do not match.
    """
    run_dir = pathlib.Path(run_dir)
    config, meta = read_run_files(run_dir)
    abstract = nnx.eval_shape(lambda: build_model(config, len(meta["time"]), meta["k1"], meta["k2"], meta))
    graphdef, params, buffers = nnx.split(abstract, nnx.Param, ...)
    if not (run_dir / "checkpoints").is_dir():
        raise FileNotFoundError(f"no checkpoints in run directory {run_dir}")
    mngr = checkpoint.manager(run_dir / "checkpoints", config.keep_checkpoints)
    (params, buffers), _ = _restore_model_only(mngr, params, buffers, config, meta)
    return nnx.merge(graphdef, params, buffers), config, meta


def trained_tau(model: Contrastive) -> float:
    """Returns the model's temperature tau = exp(log_tau): the trained value when learn_tau."""
    return float(jnp.exp(model.log_tau[...]))


def _restore_model_only(mngr, params, buffers, config, meta):
    # The optimiser state is part of the saved tree; rebuild its abstract structure too.
    tx = make_optimizer(config, 1)
    like = (params, buffers, jax.eval_shape(tx.init, params))
    if LOSSES[config.loss].stateful:  # the per-sample state is saved too (one entry per training pair)
        like = like + (jax.eval_shape(lambda: LOSSES[config.loss].init_state(int(meta["n_pairs"]), config)),)
    restored, epoch = checkpoint.restore(mngr, like)
    params, buffers = restored[:2]
    mngr.close()
    return (params, buffers), epoch


def run_identity(run_dir) -> str:
    """Returns a portable identity of a run: "<dir name> sha256:<first 16 hex>" of its config,
    dataset meta and latest checkpoint files (what a result file records as model_run)."""
    run_dir = pathlib.Path(run_dir)
    digest = hashlib.sha256()
    files = [run_dir / "config.json", run_dir / "dataset.json"]
    ckpt = run_dir / "checkpoints"
    if ckpt.is_dir():
        steps = sorted((d for d in ckpt.iterdir() if d.name.isdigit()), key=lambda d: int(d.name))
        if steps:
            files += sorted(f for f in steps[-1].rglob("*") if f.is_file())
    for f in files:
        if f.is_file():
            digest.update(f.relative_to(run_dir).as_posix().encode())
            digest.update(f.read_bytes())
    return f"{run_dir.resolve().name} sha256:{digest.hexdigest()[:16]}"
