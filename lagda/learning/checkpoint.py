"""Orbax checkpoints of a training run: model state, optimiser state and the epoch.

The saved tree is {"leaves": {"00000": array, ...}, "epoch": int}: the flattened leaves of
(params, buffers, opt_state). Restoring unflattens them into the tree structure of an
abstract model built from the run's config (`nnx.eval_shape`), so nothing about Python
classes is pickled and a checkpoint is readable by any process that can rebuild the model.
"""

from __future__ import annotations

import pathlib

import jax
import numpy as np
import orbax.checkpoint as ocp

TMP_SUFFIX = ".orbax-checkpoint-tmp"  # orbax's name for a checkpoint being written


def latest_epoch(directory: pathlib.Path) -> int | None:
    """Returns the epoch of the newest finished checkpoint in `directory` (None if none), without a manager."""
    directory = pathlib.Path(directory)
    epochs = [int(p.name) for p in directory.iterdir() if p.is_dir() and p.name.isdigit()] if directory.is_dir() else []
    return max(epochs, default=None)


def manager(directory: pathlib.Path, keep: int) -> ocp.CheckpointManager:
    """Returns a CheckpointManager over `directory` keeping the newest `keep` checkpoints."""
    options = ocp.CheckpointManagerOptions(max_to_keep=keep, create=True)
    return ocp.CheckpointManager(pathlib.Path(directory).absolute(), options=options)


def local_copy(tree):
    """Returns the pytree of replicated (possibly multi-process) arrays as host numpy arrays
    (this process's replica)."""
    return jax.tree.map(lambda leaf: np.asarray(leaf.addressable_data(0)) if isinstance(leaf, jax.Array) else leaf,
                        tree)


def save(mngr: ocp.CheckpointManager, epoch: int, tree) -> None:
    """Saves the pytree `tree` as the checkpoint of `epoch` (completed epochs) and waits.

    Replicated arrays are saved from this process's replica; under jax.distributed every
    process calls save.
    """
    leaves = jax.tree.leaves(local_copy(tree))
    payload = {"leaves": {f"{i:05d}": np.asarray(leaf) for i, leaf in enumerate(leaves)},
               "epoch": np.asarray(epoch, np.int64)}
    mngr.save(epoch, args=ocp.args.StandardSave(payload))
    mngr.wait_until_finished()


def restore(mngr: ocp.CheckpointManager, like, epoch: int | None = None):
    """Returns (tree with the structure of `like`, epoch) from the latest (or given) checkpoint.

    Parameters
    ----------
    like
        a pytree (concrete or abstract) with the saved structure.

    Raises
    ------
    FileNotFoundError
        if there is no checkpoint.
    ValueError
        if the checkpoint does not match `like` (another model configuration).
    """
    epoch = mngr.latest_step() if epoch is None else epoch
    if epoch is None:
        raise FileNotFoundError(f"no checkpoint in {mngr.directory}")
    leaves, treedef = jax.tree.flatten(like)
    abstract = {"leaves": {f"{i:05d}": jax.ShapeDtypeStruct(np.shape(leaf), leaf.dtype)
                           for i, leaf in enumerate(leaves)},
                "epoch": jax.ShapeDtypeStruct((), np.int64)}
    try:
        payload = mngr.restore(epoch, args=ocp.args.StandardRestore(abstract))
    except Exception as error:  # orbax raises several types for a structure or shape mismatch
        raise ValueError(f"checkpoint {epoch} in {mngr.directory} does not match the model config "
                         f"({type(error).__name__}: {str(error).splitlines()[0][:200]})") from None
    restored = [payload["leaves"][f"{i:05d}"] for i in range(len(leaves))]
    return jax.tree.unflatten(treedef, restored), int(payload["epoch"])
