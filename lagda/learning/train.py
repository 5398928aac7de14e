"""Contrastive training of the trajectory encoder g_v against the fixed g_u(c) = (Re c, Im c).

One jitted, pure train step over (graphdef, params, buffers, opt_state, batch) with the old
state donated; data parallel over all devices of all processes (a 1-D mesh 'data': the batch
is sharded, parameters replicated, XLA inserts the gradient all-reduce). Several processes
(hosts, or CPU processes on one machine): set JAX_COORDINATOR_ADDRESS (host:port of process
0), JAX_NUM_PROCESSES and JAX_PROCESS_ID (or `lagda train --coordinator --num-processes
--process-id`) and start the same command in every process: `train` calls
`jax.distributed.initialize` first (gloo collectives on CPU). Every process draws the same
global batches; each assembles its own rows of them into the global batch
(`jax.make_array_from_process_local_data`), all processes save the orbax checkpoint together,
and process 0 alone writes config.json, dataset.json and metrics.jsonl and prints.

Run directory: config.json, dataset.json (modes, frequencies, prior, times, generator
settings of the training data), checkpoints/ (orbax, one per epoch), metrics.jsonl.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import json
import math
import os
import pathlib
import shutil
import sys
import time

import jax
import numpy as np
import optax
from flax import nnx
from jax.sharding import Mesh, NamedSharding, PartitionSpec
from tqdm import tqdm

from lagda.learning import checkpoint, kernel_set, regimes
from lagda.learning.config import TrainConfig
from lagda.learning.data import PairedData, as_paired
from lagda.learning.evaluate import retrieval_scores
from lagda.learning.loss_registry import LOSSES
from lagda.learning.model import Contrastive, build_model, track_estimates
from lagda.learning.optimizer import make_optimizer
from simulate.atomic import OutputLock, fault_point, remove_stale_inside, write_atomic


class TrainingDiverged(ValueError):
    """The loss became NaN or infinite; the last good checkpoint is kept."""


def contrastive_loss(model: Contrastive, coef, positions, config: TrainConfig, estimate=None, mask=None, rff=None,
                     negatives=None):
    """Returns the batch loss of config.loss (lagda.learning.loss_registry.LOSSES) on logits s(g_u(c), g_v(v))
    (eq. 12 for "cond").

    `mask`: bool `(batch, drifter, obs)` of the observations the set encoder reads (None: all).
    `rff`: (omega, beta), the step's random-feature draw (a set-kernel loss; None: the model's fixed draw).
    `negatives`: coefficients `(K, mode)` of other pairs in the u|v softmax ("cond"; config.negatives).
    Stateless losses only; the stateful ones (sogclr, nuclr) go through `stateful_loss`.
    """
    return LOSSES[config.loss](model, coef, positions, config, estimate, mask, rff, negatives)


def stateful_loss(model: Contrastive, coef, positions, config: TrainConfig, loss_state, index, run_length,
                  estimate=None, mask=None):
    """Returns (eq. 15 surrogate, (Psi estimate, new per-sample state)) of sogclr / nuclr (nuclr.py).

    `index`: `(batch,)` training-sample indices; `run_length`: (n pairs, total steps, steps per epoch).
    """
    return LOSSES[config.loss](model, coef, positions, config, loss_state, index, run_length, estimate, mask)


def rff_key(key):
    """Returns the key of a step's random-feature draw from the step's key (shared by both sides and all devices)."""
    return jax.random.fold_in(key, 7)


@functools.partial(jax.jit, static_argnums=0, static_argnames=("config", "total_steps", "run_length"),
                   donate_argnums=(1, 3, 8))
def train_step(graphdef, params, buffers, opt_state, coef, positions, estimate=None, key=None, loss_state=None,
               index=None, negatives=None, *, config: TrainConfig, total_steps: int, run_length: tuple | None = None):
    """Returns (params, opt_state, loss), and for sogclr / nuclr (params, opt_state, loss, loss_state): one step.

    The optimiser is `make_optimizer(config, total_steps)`; `estimate` is the precomputed physics feature
    `(batch, drifter, n_e)` or None; `key` is the step's key: it draws the observation regimes
    (config.regime == "mixture") and the random features (kernel_set). `run_length` = (n pairs, total
    steps, steps per epoch) of a stateful loss, whose `loss_state` (nuclr.init_state) and `index` `(batch,)`
    the step then takes; `negatives` `(K, mode)`: config.negatives coefficients of other pairs ("cond").
    The old params, opt_state and loss_state are donated. `make_train_step` binds the
    static settings: JAX's own jit cache then compiles each distinct step once per process.
    """
    tx = make_optimizer(config, total_steps)
    mask = None
    if config.regime == "mixture":
        positions, mask = regimes.sample_regimes(key, positions, config)
    rff = None
    if LOSSES[config.loss].set_kernel:
        rff = kernel_set.draw_frequencies(rff_key(key), config.kernel, 2 * coef.shape[-1], config.kernel_features,
                                          config.kernel_scale)
    if LOSSES[config.loss].stateful:
        def objective(p):
            model = nnx.merge(graphdef, p, buffers)
            return stateful_loss(model, coef, positions, config, loss_state, index, run_length, estimate, mask)

        (_, (loss, loss_state)), grads = jax.value_and_grad(objective, has_aux=True)(params)
    else:
        def objective(p):
            return contrastive_loss(nnx.merge(graphdef, p, buffers), coef, positions, config, estimate, mask, rff,
                                    negatives)

        loss, grads = jax.value_and_grad(objective)(params)
    updates, opt_state = tx.update(grads, opt_state, params)
    params = optax.apply_updates(params, updates)
    return (params, opt_state, loss) if loss_state is None else (params, opt_state, loss, loss_state)


def make_train_step(config: TrainConfig, total_steps: int, run_length: tuple | None = None):
    """Returns `train_step` with its static settings bound, called as step(graphdef, params, buffers, opt_state, coef,
    positions, estimate=None, key=None, loss_state=None, index=None, negatives=None).

    Settings that do not change the step (epochs, evaluation, checkpoints, streaming; total_steps without a
    cosine decay) are normalised, so a resumed run or another run of the same step reuses its compilation.
    """
    same_step = dataclasses.replace(config, epochs=1, eval_every=1, eval_library=0, keep_checkpoints=1, stream=False)
    return functools.partial(train_step, config=same_step, total_steps=total_steps if config.cosine_decay else 0,
                             run_length=run_length)


def _write_json(path: pathlib.Path, text: str) -> None:
    write_atomic(path, lambda tmp: tmp.write_text(text), path.stem)


ALREADY_COMPLETE = "already complete"


def _report(line: str) -> None:
    print(f"lagda train: {line}", file=sys.stderr)


PROVENANCE = {"history", "source", "title", "date_created", "date_modified"}  # attributes that name, not define


def _dataset_record(train_data: PairedData) -> dict:
    """Returns dataset.json's content: the training data's modes, prior, times, generator settings and size."""
    return json.loads(json.dumps({**train_data.meta(), "n_pairs": train_data.n_samples}))


def _prepare_run_dir(run_dir: pathlib.Path, config: TrainConfig, train_data: PairedData, resume: bool,
                     write: bool = True) -> bool:
    """Checks the run dir for a new or resumed run; returns whether a resume continues a saved run.

    Process 0 (`write`) removes the stale temporaries of an interrupted run and writes config.json and
    dataset.json. `--resume` with no saved run starts afresh (reported).

    Raises
    ------
    ValueError
        a resume whose config (epochs aside) or training data differs from the saved ones (named),
        or a new run into a folder that holds checkpoints.
    """
    saved = resume and (run_dir / "config.json").is_file()
    if resume and not saved:
        _report(f"nothing to resume ({run_dir / 'config.json'} does not exist): starting afresh")
    if saved:
        old = TrainConfig.from_dict(json.loads((run_dir / "config.json").read_text()))
        differ = [k for k, v in vars(old).items() if k != "epochs" and getattr(config, k) != v]
        if differ:
            raise ValueError(f"cannot resume {run_dir}: config differs from the saved one in {differ}")
        if (run_dir / "dataset.json").is_file():
            old_data, data = json.loads((run_dir / "dataset.json").read_text()), _dataset_record(train_data)
            differ = sorted(k for k in set(old_data) | set(data) if k != "attrs" and old_data.get(k) != data.get(k))
            old_attrs, attrs = old_data.get("attrs") or {}, data.get("attrs") or {}
            # the generator settings both records hold (a file's provenance lines, and an array file's lack of
            # attributes, say nothing of the samples)
            differ += sorted(f"attrs.{k}" for k in set(old_attrs) & set(attrs) - PROVENANCE
                             if old_attrs[k] != attrs[k])
            if differ:
                raise ValueError(f"cannot resume {run_dir}: the training data differs from the saved run's in "
                                 f"{differ}")
    elif (run_dir / "checkpoints").exists() and any((run_dir / "checkpoints").iterdir()):
        raise ValueError(f"{run_dir} already holds checkpoints: pass resume=True (--resume) or use a new run dir")
    run_dir.mkdir(parents=True, exist_ok=True)
    if write:
        remove_stale_inside(run_dir, _report)
        for tmp in sorted((run_dir / "checkpoints").glob(f"*{checkpoint.TMP_SUFFIX}*")):
            shutil.rmtree(tmp)
            _report(f"removed {tmp}, an unfinished checkpoint of an interrupted run")
        _write_json(run_dir / "config.json", config.to_json())
        _write_json(run_dir / "dataset.json", json.dumps(_dataset_record(train_data), indent=1))
    return saved


def _complete(run_dir: pathlib.Path, config: TrainConfig, latest: int | None) -> bool:
    """Whether the run holds the checkpoint and metrics of its last epoch (nothing left to do)."""
    if latest != config.epochs or not (run_dir / "metrics.jsonl").is_file():
        return False
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return bool(lines) and json.loads(lines[-1])["epoch"] == config.epochs


_DISTRIBUTED = {"initialized": False}


def initialize_distributed() -> None:
    """Starts jax.distributed from JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES, JAX_PROCESS_ID (once, if set).

    Must run before any JAX computation or device query of the process (`train` calls it first;
    a script that makes its data with JAX beforehand calls it itself).
    """
    if "JAX_COORDINATOR_ADDRESS" in os.environ and not _DISTRIBUTED["initialized"]:
        jax.config.update("jax_cpu_collectives_implementation", "gloo")  # collectives across CPU processes
        count, index = os.environ.get("JAX_NUM_PROCESSES"), os.environ.get("JAX_PROCESS_ID")
        jax.distributed.initialize(os.environ["JAX_COORDINATOR_ADDRESS"], None if count is None else int(count),
                                   None if index is None else int(index))
        _DISTRIBUTED["initialized"] = True


def _global_batch(rows: np.ndarray, sharding: NamedSharding) -> jax.Array:
    """Returns the global batch `rows (batch, ...)` (the same on every process) sharded on `sharding`.

    Each process gathers only the rows its own devices hold and contributes them
    (`jax.make_array_from_process_local_data`); with one process this is a plain placement.
    """
    start, stop = _local_rows(sharding, rows.shape)
    return jax.make_array_from_process_local_data(sharding, np.ascontiguousarray(rows[start:stop]), rows.shape)


@functools.lru_cache(maxsize=16)
def _local_rows(sharding: NamedSharding, shape: tuple) -> tuple[int, int]:
    """Returns [start, stop) of the leading-axis rows this process's devices hold (fixed per run: computed once)."""
    slices = [index[0] for index in sharding.addressable_devices_indices_map(shape).values()]
    return min(s.start or 0 for s in slices), max(shape[0] if s.stop is None else s.stop for s in slices)


def _replicated(tree, sharding: NamedSharding):
    """Returns the pytree of host or device arrays (the same on every process) replicated over `sharding`."""
    def place(leaf):
        host = np.asarray(leaf)
        return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])
    return jax.tree.map(place, tree)


def _epoch_batches(key, epoch: int, n: int, batch: int) -> np.ndarray:
    """Returns `(step, batch)` sample indices of one epoch: a permutation from fold_in(key, epoch)."""
    perm = np.asarray(jax.random.permutation(jax.random.fold_in(key, epoch), n))
    steps = n // batch
    return perm[: steps * batch].reshape(steps, batch)


def _step_negatives(batches: np.ndarray, step: int, count: int) -> np.ndarray:
    """Returns the `(count,)` sample indices of a step's negatives: the epoch's next `count` samples after the
    step's batch, cyclically, so never one of the batch's own pairs (count + batch <= the epoch's samples)."""
    flat = batches.reshape(-1)
    return flat[(np.arange(count) + (step + 1) * batches.shape[1]) % flat.size]


def _append_metrics(path: pathlib.Path, record: dict, keep_below: int | None = None) -> None:
    lines = path.read_text().splitlines() if path.exists() else []
    if keep_below is not None:  # on resume drop epochs that are about to be redone
        lines = [ln for ln in lines if json.loads(ln)["epoch"] < keep_below]
    lines.append(json.dumps(record))
    _write_json(path, "\n".join(lines) + "\n")


def regime_key(config: TrainConfig, epoch: int, step: int):
    """Returns the key of the observation regimes of one train step (a function of seed, epoch, step)."""
    base = jax.random.fold_in(jax.random.key(config.seed), 1_000_003)  # apart from the shuffling keys
    return jax.random.fold_in(jax.random.fold_in(base, epoch), step)


def _run_epoch(state, epoch, train_data, estimates, batches, step_fn, graphdef, sharding, progress, config):
    params, buffers, opt_state = state[:3]
    loss_state = state[3] if len(state) > 3 else None
    total, start = 0.0, time.perf_counter()
    bar = tqdm(batches, desc=f"epoch {epoch + 1}", disable=not progress, leave=False)
    replicated = NamedSharding(sharding.mesh, PartitionSpec())  # the negatives: the same on every device and process
    with concurrent.futures.ThreadPoolExecutor(1) as reader:  # reads batch i + 1 (from memory or disk) during step i
        pending = reader.submit(train_data.positions.__getitem__, batches[0])
        for i, index in enumerate(bar):
            rows = pending.result()
            if i + 1 < len(batches):
                pending = reader.submit(train_data.positions.__getitem__, batches[i + 1])
            coef = _global_batch(train_data.coef[index], sharding)
            positions = _global_batch(rows, sharding)
            estimate = None if estimates is None else _global_batch(estimates[index], sharding)
            key = regime_key(config, epoch, i) if config.regime == "mixture" or LOSSES[config.loss].set_kernel else None
            if loss_state is None:
                negatives = None
                if config.negatives:
                    negatives = _replicated(train_data.coef[_step_negatives(batches, i, config.negatives)], replicated)
                params, opt_state, loss = step_fn(graphdef, params, buffers, opt_state, coef, positions, estimate, key,
                                                  None, None, negatives)
            else:  # the batch's sample indices address the per-sample state (replicated on every device)
                index = _global_batch(np.asarray(index, np.int32), sharding)
                params, opt_state, loss, loss_state = step_fn(graphdef, params, buffers, opt_state, coef, positions,
                                                              estimate, key, loss_state, index)
            value = float(checkpoint.local_copy(loss))
            if not math.isfinite(value):
                raise TrainingDiverged(f"loss became {value} at epoch {epoch + 1} step {i + 1}; the last good "
                                       f"checkpoint (epoch {epoch}) is kept; lower lr or set grad_clip")
            total += value
            rate = (i + 1) * len(index) / (time.perf_counter() - start)
            bar.set_postfix(loss=f"{value:.4f}", samples_per_s=f"{rate:.0f}")
    seconds = time.perf_counter() - start
    stats = {"train_loss": total / len(batches), "samples_per_s": len(batches) * batches.shape[1] / seconds,
             "epoch_seconds": seconds}
    return (params, buffers, opt_state) + (() if loss_state is None else (loss_state,)), stats


def train(config: TrainConfig, train_data, test_data, run_dir, resume: bool = False,
          progress: bool = True) -> pathlib.Path:
    """Returns `run_dir` after training g_v on `train_data` for config.epochs epochs.

    Minimises config.loss (default L_cond, eq. 12 / Opt. Problem 3.13) over mini-batches of
    pairs; after every epoch saves a checkpoint and appends train loss, throughput and
    retrieval R@1/5/10 (train and test libraries) to metrics.jsonl.

    Parameters
    ----------
    config : TrainConfig
        Training settings (validated here).
    train_data, test_data : PairedData, path or list of them
        Paired data `coef (sample, mode)`, `positions (sample, drifter, obs, 2)` in model units, or lagda
        dataset paths; `test_data` may be None. A list is joined (`data.join_files`): the shard files of one run
        (`lagda simulate --shard`) along samples, datasets of the same fields (same seed) along drifters
        (`merge_drifters`: e.g. a fixed-release file and a random-release file).
    run_dir : str or os.PathLike
        The run directory (created): config.json, dataset.json, checkpoints/, metrics.jsonl.
    resume : bool, default False
        Continue from the latest checkpoint in `run_dir`; bit-for-bit identical to an uninterrupted run
        (shuffling uses fold_in(seed, epoch)).
    progress : bool, default True
        Show a progress bar per epoch.

    Returns
    -------
    pathlib.Path
        `run_dir`, readable by `lagda.learning.load_run`.

    Raises
    ------
    ValueError, FileNotFoundError
        Bad config, data or run directory (one line); another run writing `run_dir` (`simulate.atomic.Busy`).
    TrainingDiverged
        A NaN or infinite loss (a ValueError); the last good checkpoint is kept.

    Examples
    --------
    One epoch of the `tiny` preset on 64 pairs:

    >>> import json, os, tempfile
    >>> from lagda.learning.config import tiny
    >>> from simulate import generate_dataset, small
    >>> folder = tempfile.mkdtemp()
    >>> data = generate_dataset(small(n_samples=64, t_final=0.002), os.path.join(folder, "pairs.nc"),
    ...                         report=lambda line: None)
    >>> run = train(tiny(epochs=1), data, None, os.path.join(folder, "run"), progress=False)
    >>> sorted(json.loads(open(run / "metrics.jsonl").readline()))[:3]
    ['epoch', ...]
    """
    initialize_distributed()
    config.validate()
    run_dir = pathlib.Path(run_dir)
    lock = None
    if jax.process_index() == 0:  # one lock for a run of several processes: process 0 writes the run's files
        run_dir.parent.mkdir(parents=True, exist_ok=True)
        lock = OutputLock(run_dir, "lagda train")  # a second run into this folder refuses, naming this one
    try:
        return _train(config, train_data, test_data, run_dir, resume, progress)
    finally:
        if lock is not None:
            lock.release()


def _train(config: TrainConfig, train_data, test_data, run_dir: pathlib.Path, resume: bool,
           progress: bool) -> pathlib.Path:
    """`train` once its run folder is locked."""
    train_data = as_paired(train_data, config.stream)  # a list: shards joined, releases merged (data.join_files)
    test_data = None if test_data is None else as_paired(test_data)
    mesh = Mesh(np.asarray(jax.devices()), ("data",))
    if config.batch_size % mesh.size:
        raise ValueError(f"batch_size = {config.batch_size} is not divisible by the {mesh.size} devices")
    steps_per_epoch = train_data.n_samples // config.batch_size
    if steps_per_epoch < 1:
        raise ValueError(f"batch_size = {config.batch_size} exceeds the {train_data.n_samples} training pairs")
    if config.negatives + config.batch_size > steps_per_epoch * config.batch_size:
        used = steps_per_epoch * config.batch_size
        raise ValueError(f"negatives = {config.negatives} and batch_size = {config.batch_size} exceed the {used} "
                         f"pairs an epoch uses: set negatives to at most {used - config.batch_size}")
    if resume and _complete(run_dir, config, checkpoint.latest_epoch(run_dir / "checkpoints")):
        _prepare_run_dir(run_dir, config, train_data, resume, write=False)  # the settings must match
        _report(f"{run_dir} is {ALREADY_COMPLETE} ({config.epochs} epochs): nothing changed")
        return run_dir
    _prepare_run_dir(run_dir, config, train_data, resume, write=jax.process_index() == 0)
    progress = progress and jax.process_index() == 0  # one process logs
    model = build_model(config, train_data.positions.shape[2], train_data.k1, train_data.k2, train_data.meta())
    model.encoder.set_feature_stats(train_data.positions[:1024, 0])
    graphdef, params, buffers = nnx.split(model, nnx.Param, ...)
    total_steps = steps_per_epoch * config.epochs
    tx = make_optimizer(config, total_steps)
    state = (params, buffers, tx.init(params))
    run_length = None
    if LOSSES[config.loss].stateful:  # per-sample state of sogclr / nuclr, indexed by training pair
        run_length = (train_data.n_samples, total_steps, steps_per_epoch)
        state = state + (LOSSES[config.loss].init_state(train_data.n_samples, config),)
    mngr = checkpoint.manager(run_dir / "checkpoints", config.keep_checkpoints)
    first_epoch = 0
    if resume and mngr.latest_step() is not None:
        state, first_epoch = checkpoint.restore(mngr, state)
        if progress:
            _report(f"resuming after epoch {first_epoch} of {config.epochs}")
    elif resume and (run_dir / "checkpoints").exists():
        _report("no checkpoint saved yet: starting from epoch 0")
    replicated, sharded = NamedSharding(mesh, PartitionSpec()), NamedSharding(mesh, PartitionSpec("data"))
    state = _replicated(state, replicated)
    step_fn = make_train_step(config, total_steps, run_length)
    key = jax.random.key(config.seed)
    estimates = track_estimates(model.encoder, train_data.positions, config.eval_batch, progress)
    test_estimates = None
    if test_data is not None and config.eval_library:
        test_estimates = track_estimates(model.encoder, test_data.positions[:config.eval_library], config.eval_batch,
                                         progress)
    for epoch in range(first_epoch, config.epochs):
        batches = _epoch_batches(key, epoch, train_data.n_samples, config.batch_size)
        state, stats = _run_epoch(state, epoch, train_data, estimates, batches, step_fn, graphdef, sharded, progress,
                                  config)
        record = {"epoch": epoch + 1, "step": (epoch + 1) * steps_per_epoch, **stats}
        if config.eval_library and ((epoch + 1) % config.eval_every == 0 or epoch + 1 == config.epochs):
            trained = nnx.merge(graphdef, *checkpoint.local_copy(state[:2]))  # every process evaluates its replica
            record.update(retrieval_scores(trained, train_data, config, config.eval_library, "train", estimates))
            if test_data is not None:
                record.update(retrieval_scores(trained, test_data, config, config.eval_library, "test", test_estimates))
        if jax.process_index() == 0:  # metrics first: a resume from the previous checkpoint redoes and replaces them
            _append_metrics(run_dir / "metrics.jsonl", record, keep_below=epoch + 1 if epoch == first_epoch else None)
        checkpoint.save(mngr, epoch + 1, state)
        fault_point("checkpoint:saved")
        if progress:
            print(" ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in record.items()))
    mngr.close()
    return run_dir


