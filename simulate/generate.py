"""Dataset generation: prior draws of c, their drifter tracks v, written as one netCDF file.

Randomness depends only on (seed, sample index): sample s uses
key_s = fold_in(key(seed), s), split into four keys for its coefficients, release points,
Brownian increments and observation noise. The file is therefore bit-identical whatever the
chunk size or sharding (on one machine: the compiled code is the CPU's or the GPU's), and a resumed run reproduces an
uninterrupted one. Prior draws are made in float32
whatever the precision (so a float32 and a float64 file share c and release points) and are
stored as float64 (exact). Positions are stored in the integrator's precision.

Work is done in chunks of `chunk_size` fields; the last chunk is padded to the same shape so
one compilation serves the run, and that shape is padded to a multiple of `PAD` fields: compiled for batches of
150 or 500 fields, a few fields (at 500, the last two of each 250) came out of XLA's CPU code different in the
last bit from the same fields in a batch of 1,000 (measured; at multiples of PAD they agree on this machine, whose
AVX-512 vectors hold 16 float32; at multiples of 8 they did not).
A shard (`shard=(i, n)`, `lagda simulate --shard I/N`) computes
the contiguous block of samples `schema.shard_block(n_samples, i, n)` with the same per-sample keys, so
its file holds exactly those rows of the unsharded file; `schema.open_dataset` over all n shard
files returns the unsharded dataset (the union is bit-identical to a single run). Each finished chunk is saved in
`OUT.partial/` (a directory next to the output, created whole with a manifest of the settings that determine the
samples, the shard included); the final file is written to a temporary name and renamed, then the partial directory
is removed. Every step is a rename (`simulate.atomic`), so a kill at any instant is followed by a correct `resume`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import functools
import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from simulate import schema
from simulate.atomic import (
    Interrupted,
    OutputLock,
    check_folder,
    fault_point,
    make_folder_atomic,
    remove_stale,
    remove_stale_inside,
    remove_tree,
    write_atomic,
)
from simulate.atomic import write_netcdf as write_netcdf_atomic
from simulate.config import SimConfig
from simulate.flow import rectangular_modes
from simulate.kernels import fast_tracks
from simulate.prior import draw_coefficients, draw_frequencies, spectrum
from simulate.provenance import code_digest, other_code

ALREADY_COMPLETE = "already complete"
LIKE_FIELDS = ("frequency_seed", "k1_min", "k1_max", "k2_min", "k2_max",
               "spectrum_exponent", "rms_speed", "omega_max", "steady")


def simulate_chunk(coef, release, k1, k2, omega, keys, *, dt, n_obs: int, stride: int, diffusivity: float):
    """Returns unwrapped positions `(sample, drifter, obs, 2)` of one chunk: the physics call.

    The single place where generation integrates tracks: the fused kernel
    `simulate.kernels.fast_tracks` (checked against the reference `simulate_tracks`).

    Parameters
    ----------
    coef
        complex `(sample, mode)`
    release
        `(sample, drifter, 2)`, both in the integration precision.
    k1, k2
        concrete integer `(mode,)`
    omega
        `(mode,)`
    dt
        time step.
    keys
        PRNG keys `(sample,)` for the Brownian increments (unused when diffusivity = 0);
        drifter d of sample s uses split(keys[s], drifter)[d], as `simulate_tracks` does
        for one field, so tracks do not depend on how samples are grouped in chunks.
    n_obs, stride, diffusivity
        static settings.
    """
    n_drifters = release.shape[1]
    trajectory_keys = jax.vmap(lambda key: jax.random.split(key, n_drifters))(keys).reshape(-1)
    return fast_tracks(coef, release, np.asarray(k1), np.asarray(k2), omega, dt, n_obs, stride, diffusivity,
                       dtype=release.dtype, trajectory_keys=trajectory_keys)


@functools.lru_cache(maxsize=16)
def _draw_function(n_obs: int, n_drifters: int, release_rule: str, noisy: bool):
    """Returns the jitted per-chunk draws `(key, samples, ...) -> coef, release, keys, noise`."""

    def one_sample_draws(key, sample, scale, release_point, obs_noise):
        # flat draws, reshaped: same numbers as shaped draws, much faster to compile on CPU
        coef_key, release_key, brownian_key, noise_key = jax.random.split(jax.random.fold_in(key, sample), 4)
        coef = draw_coefficients(coef_key, scale, 1, jnp.complex64)[0]
        if release_rule == "random":
            release = jax.random.uniform(release_key, (n_drifters * 2,), jnp.float32).reshape(n_drifters, 2)
        else:
            release = jnp.broadcast_to(release_point[None, :], (n_drifters, 2))
        noise = jnp.zeros((n_drifters, n_obs, 2), jnp.float32)
        if noisy:
            noise = obs_noise * jax.random.normal(noise_key, (n_drifters * n_obs * 2,),
                                                  jnp.float32).reshape(noise.shape)
        return coef, release, brownian_key, noise

    def draws(key, samples, scale, release_point, obs_noise):
        return jax.vmap(one_sample_draws, in_axes=(None, 0, None, None, None))(
            key, samples, scale, release_point, obs_noise)

    return jax.jit(draws)


def _run_chunk(key, samples, scale, k1, k2, omega, config: SimConfig):
    """Returns coef complex64 `(sample, mode)`, release `(sample, drifter, 2)` and positions of one chunk."""
    real = jnp.dtype(config.precision)
    complex_dtype = jnp.complex64 if config.precision == "float32" else jnp.complex128
    draws = _draw_function(config.n_obs, config.n_drifters, config.release, config.obs_noise > 0)
    coef, release, brownian_keys, noise = draws(key, samples, jnp.asarray(scale, jnp.float32),
                                                jnp.asarray([config.release_x, config.release_y], jnp.float32),
                                                jnp.float32(config.obs_noise))
    positions = simulate_chunk(coef.astype(complex_dtype), release.astype(real), k1, k2, jnp.asarray(omega, real),
                               brownian_keys, dt=config.dt, n_obs=config.n_obs, stride=config.stride,
                               diffusivity=config.diffusivity)
    if config.obs_noise > 0:  # observation noise is added after integration
        positions = positions + noise.astype(real)
    return coef, release, positions


def _normalized(config: SimConfig) -> SimConfig:
    """Returns the config with each field coerced to its declared type (10 -> 10.0 for floats)."""
    values = {}
    for field in dataclasses.fields(SimConfig):
        value, kind = getattr(config, field.name), type(field.default)
        try:
            values[field.name] = value if kind is str else kind(value)
        except (TypeError, ValueError):
            raise ValueError(f"{field.name} must be a {kind.__name__}, got {value!r}") from None
    return SimConfig(**values).validate()


def dataset_modes(config: SimConfig, like: str | os.PathLike | None = None):
    """Returns `(k1, k2, omega, prior_scale)`, each `(mode,)`: the dataset's modes and prior.

    Without `like`, the rectangular mode set of the config, omega_k drawn from
    key(frequency_seed) and the spectrum a_k. With `like`, all four are copied from that
    dataset, so train and test files share their frequencies.

    Raises
    ------
    ValueError
        if a mode or prior setting of the config differs from the `like` file's,
        or the mode set carries no velocity.
    """
    if like is None:
        k1, k2 = rectangular_modes((config.k1_min, config.k1_max), (config.k2_min, config.k2_max))
        omega = draw_frequencies(jax.random.key(config.frequency_seed), len(k1), config.omega_max, config.steady)
        return k1, k2, omega, spectrum(k1, k2, config.spectrum_exponent, config.rms_speed)
    with schema.open_dataset(like) as ds:
        like_config = schema.config_from_attrs(ds)
        for name in LIKE_FIELDS:
            mine, theirs = getattr(config, name), getattr(like_config, name)
            if mine != theirs:
                raise ValueError(f"{name} = {mine} conflicts with {name} = {theirs} of the --like file {like}")
        return tuple(ds[name].values.copy() for name in ("k1", "k2", "omega", "prior_scale"))


def _manifest(config: SimConfig, modes, shard: tuple[int, int] = (0, 1)) -> dict:
    """Returns the partial-run manifest: everything that determines the samples (the config, the modes, the
    shard and the schema version) and the hash of it that a resume compares."""
    content = {
        "config": dataclasses.asdict(config),
        "modes": {name: np.asarray(a).tolist() for name, a in zip(("k1", "k2", "omega", "prior_scale"), modes)},
        "shard": [int(v) for v in shard],
        "schema_version": schema.SCHEMA_VERSION,
    }
    digest = hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()
    return {**content, "config_hash": digest}


def _file_manifest(out: Path) -> dict:
    """Returns the manifest of the settings an existing output file records.

    Raises
    ------
    ValueError
        if `out` is not a readable dataset of this schema.
    """
    try:
        with schema.open_dataset(out) as ds:
            config = schema.config_from_attrs(ds)
            modes = tuple(ds[name].values for name in ("k1", "k2", "omega", "prior_scale"))
            shard = (int(ds.attrs.get("lagda_shard_index", 0)), int(ds.attrs.get("lagda_shard_count", 1)))
    except (OSError, ValueError, KeyError) as error:
        raise ValueError(f"output {out} exists but is not a readable dataset ({error}): pass --overwrite to "
                         "replace it") from None
    return _manifest(config, modes, shard)


def partial_dir(out: str | os.PathLike) -> Path:
    """Returns the directory that holds the finished chunks of an unfinished run: `OUT.partial`."""
    out = Path(out)
    return out.with_name(out.name + ".partial")


def check_output(out: Path, overwrite: bool = True) -> None:
    """Raises ValueError if the output cannot (or, without `overwrite`, must not) be written; checked before
    computing."""
    if out.is_dir():
        raise ValueError(f"output {out} is a directory")
    check_folder(out)
    if out.exists() and not overwrite:
        raise ValueError(f"output {out} already exists: pass --overwrite to replace it")


def _differences(old: dict, new: dict) -> list[str]:
    """Returns the names of the settings in which two manifests differ."""
    fields = [name for name in new["config"] if old.get("config", {}).get(name) != new["config"][name]]
    fields += [name for name in ("modes", "shard", "schema_version") if old.get(name) != new[name]]
    return [name.replace("_", " ") if name == "schema_version" else name for name in fields] or ["settings hash"]


def _read_manifest(partial: Path) -> dict:
    try:
        return json.loads((partial / "manifest.json").read_text())
    except (OSError, ValueError):
        raise ValueError(f"cannot resume: {partial} has no readable manifest; pass --overwrite to start "
                         "again") from None


def _plan(out: Path, partial: Path, manifest: dict, resume: bool, overwrite: bool) -> str:
    """Returns what the run does: "complete" (the output is done), "resume" or "fresh"; raises before any write.

    Raises
    ------
    ValueError
        the output or an unfinished run exists and may not be used or replaced, or a resume
        would change a setting (named).
    """
    if out.exists() and not overwrite:
        if not resume:
            raise ValueError(f"output {out} already exists: pass --overwrite to replace it")
        existing = _file_manifest(out)
        if existing["config_hash"] != manifest["config_hash"]:
            raise ValueError(f"cannot resume: output {out} already exists with different settings "
                             f"({', '.join(_differences(existing, manifest))}); pass --overwrite to replace it")
        return "complete"
    if not partial.exists() or overwrite:
        return "fresh"
    if not resume:
        raise ValueError(f"an unfinished run exists in {partial}: pass --resume to continue it or --overwrite to "
                         "start again")
    old = _read_manifest(partial)
    if old.get("config_hash") != manifest["config_hash"]:
        raise ValueError(f"cannot resume: the unfinished run in {partial} used different settings "
                         f"({', '.join(_differences(old, manifest))}); rerun with the original settings or pass "
                         "--overwrite to start again")
    if old.get("code") != manifest["code"]:
        raise ValueError(f"cannot resume: the unfinished run in {partial} was made by {other_code(old.get('code'))}; "
                         "pass --overwrite to start again")
    return "resume"


def _clean(out: Path, partial: Path, plan: str, resume: bool, overwrite: bool, report: Callable) -> None:
    """Removes this output's stale temporaries, and the unfinished run a fresh or complete run replaces (reported)."""
    for path in (out, partial):
        remove_stale(path, report)
    if partial.exists() and plan == "resume":
        remove_stale_inside(partial, report)
    elif partial.exists():
        why = "the output is complete" if plan == "complete" else "--overwrite: starting again"
        remove_tree(partial)
        report(f"removed the unfinished run {partial} ({why})")
    elif resume and not overwrite and plan == "fresh":
        report(f"nothing to resume ({partial} does not exist): starting afresh")


def _create_partial(partial: Path, manifest: dict) -> None:
    """Makes `partial` holding its manifest, atomically (a folder under a temporary name, renamed)."""
    def fill(folder: Path) -> None:
        _write_atomic(folder / "manifest.json", lambda f: f.write(json.dumps(manifest, indent=1).encode()), "manifest")

    try:
        make_folder_atomic(partial, fill, "partial")
    except OSError as error:
        raise ValueError(f"cannot write {partial}: {error.strerror or error}") from None


def _write_atomic(path: Path, write: Callable, fault: str = "file") -> None:
    """Writes a file through `write(binary_file)` to a temporary name, then renames it."""

    def to_file(tmp):
        with open(tmp, "wb") as f:
            write(f)

    write_atomic(path, to_file, fault)


def _chunk_path(partial: Path, index: int) -> Path:
    return partial / f"chunk_{index:06d}.npz"


PAD = 16  # fields: every chunk is compiled for a multiple of this many (the module docstring says why)


def _run_chunks(config: SimConfig, modes, partial: Path, progress: Callable | None, block: tuple[int, int]):
    """Returns (coef, release, positions) of the samples [start, stop), saving each new chunk in `partial`.

    Chunks already in `partial` (a resumed run) are read back, the others computed. Chunk i + 1
    is dispatched before chunk i is copied to the host and saved, so the devices do not wait on
    the host; the rows go straight into the returned arrays. Calls progress(done, total) after
    each saved chunk.
    """
    k1, k2, omega, scale = modes
    first, stop = block
    total = stop - first
    size = min(config.chunk_size, total)
    compiled = -(-size // PAD) * PAD
    counts = [min(size, total - i * size) for i in range(-(-total // size))]
    real = np.dtype(config.precision)
    arrays = (np.empty((total, len(k1)), np.complex64), np.empty((total, config.n_drifters, 2), np.float32),
              np.empty((total, config.n_drifters, config.n_obs, 2), real))
    done = 0
    for index, count in enumerate(counts):
        if _chunk_path(partial, index).exists():
            with np.load(_chunk_path(partial, index)) as saved:
                for out, name in zip(arrays, ("coef", "release", "positions")):
                    out[index * size:index * size + count] = saved[name]
            done += count
    if progress is not None:
        progress(done, total)

    def save(index, count, chunk):
        rows = slice(index * size, index * size + count)
        for out, part in zip(arrays, chunk):
            out[rows] = np.asarray(part)[:count]
        saved = dict(zip(("coef", "release", "positions"), (out[rows] for out in arrays)))
        _write_atomic(_chunk_path(partial, index), lambda f: np.savez(f, **saved), "chunk")
        if progress is not None:
            progress(done + count, total)
        return count

    x64 = jax.enable_x64(True) if config.precision == "float64" else contextlib.nullcontext()
    with x64:
        key = jax.random.key(config.seed)
        pending = None
        for index, count in enumerate(counts):
            if _chunk_path(partial, index).exists():
                continue
            samples = jnp.arange(first + index * size, first + index * size + compiled,
                                 dtype=jnp.int32)  # padded: extra rows dropped
            chunk = _run_chunk(key, samples, scale, k1, k2, omega, config)  # dispatched, not waited for
            if pending is not None:
                done += save(*pending)
            pending = (index, count, chunk)
        if pending is not None:
            save(*pending)
    return arrays


def generate_dataset(config: SimConfig, out: str | os.PathLike, *, like: str | os.PathLike | None = None,
                     resume: bool = False, overwrite: bool = False, progress: Callable | None = None,
                     history: str | None = None, shard: tuple[int, int] = (0, 1),
                     report: Callable[[str], None] | None = None) -> Path:
    """Returns the path of a new dataset file of `config.n_samples` (c, tracks) pairs (or one shard of them).

    Tracks are RK4 (with Brownian forcing when diffusivity > 0) of the field (58)-(59) of the
    paper from the release points, recorded every `stride` steps, plus observation noise.

    A run killed at any instant leaves either the finished output or `OUT.partial` (a manifest and the
    finished chunks) plus stale temporaries; the same call with `resume=True` then ends with the file an
    uninterrupted run writes, or, when the output is already complete with the same settings, changes
    nothing and reports `ALREADY_COMPLETE`. Every run removes the stale temporaries of its output and says so.

    Parameters
    ----------
    config : SimConfig
        Generator settings (validated here); model units throughout (domain lengths, model time units).
    out : str or os.PathLike
        Output netCDF path, written to a temporary name and renamed at the end.
    like : str or os.PathLike, optional
        A dataset whose modes, frequencies and prior are copied (see `dataset_modes`).
    resume : bool, default False
        Continue the unfinished run in `OUT.partial` (refused if a setting that changes the samples, the shard
        included, differs); with no unfinished run, start afresh (reported); with a complete output of the same
        settings, do nothing (reported).
    overwrite : bool, default False
        Replace an existing output and discard an unfinished run (with `resume`: start again).
    progress : callable, optional
        Called as `progress(fields_done, fields_total)` after every chunk.
    history : str, optional
        The CF `history` line (default: this function and a UTC time stamp).
    shard : tuple of int, default (0, 1)
        `(i, n)`: only the samples `schema.shard_block(config.n_samples, i, n)`, the file marked as shard i of n
        (`schema.open_dataset` joins the n files into the unsharded dataset).
    report : callable, optional
        Called with one line for each thing decided or cleaned up on the user's behalf (default: printed to
        stderr).

    Returns
    -------
    pathlib.Path
        `out`: a lagda dataset (`simulate.schema`) with coefficients `coef_re`, `coef_im` `(sample, mode)` and positions
        `x`, `y` `(sample, drifter, obs)`.

    Raises
    ------
    ValueError
        Bad settings, a `like` conflict, an existing output or unfinished run that may not be used, a resume
        with another setting (named), an unwritable output path, or another run writing `out` (`Busy`); all
        checked before anything is written.
    Interrupted
        On a KeyboardInterrupt; its message says what is saved and whether `resume` continues.
    OSError
        A failed write (a full disk); its message says the same.

    Examples
    --------
    >>> import os, tempfile
    >>> from simulate import open_dataset, small
    >>> out = os.path.join(tempfile.mkdtemp(), "pairs.nc")
    >>> path = generate_dataset(small(n_samples=2, t_final=0.002), out, report=lambda line: None)
    >>> with open_dataset(path) as ds:
    ...     print(ds.x.shape)  # (sample, drifter, obs)
    (2, 1, 20)
    """
    report = report or (lambda line: print(line, file=sys.stderr))
    config = _normalized(config)
    index, count = shard
    if not 0 <= index < count or config.n_samples < count:
        raise ValueError(f"shard {index}/{count} is not a shard of {config.n_samples} samples (need 0 <= I < N <= "
                         "n_samples)")
    out = Path(out)
    modes = dataset_modes(config, like)
    check_output(out)
    with OutputLock(out, "lagda simulate"):  # a second run on this output refuses, naming this one
        return _generate(config, out, modes, (index, count), resume, overwrite, progress, history, report)


def _generate(config: SimConfig, out: Path, modes, shard, resume: bool, overwrite: bool, progress, history,
              report) -> Path:
    """`generate_dataset` once its output is locked."""
    index, count = shard
    partial = partial_dir(out)
    # the code's digest beside the settings: a partial run of other code is not resumed (its chunks and this code's
    # would join in one file); a finished file is compared by its settings alone
    manifest = {**_manifest(config, modes, (index, count)), "code": code_digest()}
    plan = _plan(out, partial, manifest, resume, overwrite)
    block = schema.shard_block(config.n_samples, index, count)
    state = {"stage": "start", "total": block[1] - block[0], "size": min(config.chunk_size, block[1] - block[0])}
    try:
        _clean(out, partial, plan, resume, overwrite, report)
        if plan == "complete":
            report(f"{out} is {ALREADY_COMPLETE} (same settings): nothing changed")
            return out
        state["stage"] = "chunks"
        if plan == "fresh":
            _create_partial(partial, manifest)
        coef, release, positions = _run_chunks(config, modes, partial, progress, block)
        state["stage"] = "final"
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        history = f"{stamp} {history or 'simulate.generate.generate_dataset'}"
        k1, k2, omega, scale = modes
        ds = schema.to_dataset(config, k1=k1, k2=k2, omega=omega, prior_scale=scale, coef=coef,
                               release=release, positions=positions, history=history, shard=(index, count))
        write_netcdf(ds, out)
        state["stage"] = "written"
        remove_tree(partial, "partial-removal")
        fault_point("final:done")
    except KeyboardInterrupt:
        if state["stage"] == "final" and _output_matches(out, manifest):  # stopped just after the rename
            state["stage"] = "written"
        raise Interrupted(_interrupted_message(state, out, partial)) from None
    except OSError as error:  # a full disk: what is saved, and how to go on
        raise type(error)(f"{error}; {_interrupted_message(state, out, partial)}") from error
    return out


def _output_matches(out: Path, manifest: dict) -> bool:
    """Whether `out` is a readable dataset of the settings of `manifest`."""
    try:
        return out.exists() and _file_manifest(out)["config_hash"] == manifest["config_hash"]
    except ValueError:
        return False


def _interrupted_message(state: dict, out: Path, partial: Path) -> str:
    """Returns what is true on disk after an interrupt at `state["stage"]`, and what a rerun does."""
    again = "rerun the same command with --resume to continue"
    if state["stage"] == "written":
        return f"{out} is complete; the same command with --resume reports it {ALREADY_COMPLETE}"
    if state["stage"] == "final":
        return f"all fields are saved in {partial} but {out} is not written: {again}"
    if (partial / "manifest.json").exists() and state["stage"] == "chunks":
        total, size = state["total"], state["size"]
        done = sum(min(size, total - int(p.stem[6:]) * size) for p in partial.glob("chunk_*.npz"))
        return f"{done} of {total} fields are saved in {partial}: {again}"
    if (partial / "manifest.json").exists():
        return f"the unfinished run in {partial} is kept: {again}"
    return "nothing was saved: rerun the command (with --resume it starts afresh)"


def write_netcdf(ds, out: Path) -> None:
    """Writes the dataset to a temporary name in the output's directory, then renames it (interruptible)."""
    write_netcdf_atomic(ds, out, schema.encoding(ds), "final")


def wander_statistics(ds) -> dict:
    """Returns how far tracks wander: median |z(T) - z(0)| and the fraction leaving [0, 1)^2.

    A track "leaves" when any recorded (unwrapped) position is outside the unit square, i.e.
    it crosses an edge of the periodic cell it was released in.
    """
    x, y = ds["x"].values.astype(np.float64), ds["y"].values.astype(np.float64)
    x0, y0 = ds["x0"].values, ds["y0"].values
    displacement = np.hypot(x[..., -1] - x0, y[..., -1] - y0)
    outside = (x < 0) | (x >= 1) | (y < 0) | (y >= 1)
    return {"median_displacement": float(np.median(displacement)),
            "fraction_leaving": float(np.mean(np.any(outside, axis=-1)))}
