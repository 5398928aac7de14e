"""Paired training data in memory: coefficients c and drifter tracks v of many fields.

`load_paired` reads a lagda dataset file (netCDF, docs/design/forward-model.md "Datasets", validated by
`simulate.schema.open_dataset`) or an `.npz` with the same variable names. The dataset's
modes, frequencies, prior scale, observation times and generator settings travel with
the arrays (`PairedData.meta`), so a trained run directory can describe its data.
"""

from __future__ import annotations

import dataclasses
import glob
import json
import os
import pathlib

import numpy as np


@dataclasses.dataclass(frozen=True)
class PairedData:
    """Pairs (c, v) of one dataset, as numpy arrays.

    Attributes
    ----------
    coef
        complex64 `(sample, mode)` coefficients c_k.
    positions
        float32 `(sample, drifter, obs, 2)` unwrapped tracks.
    time
        float64 `(obs,)` observation times t_j.
    k1, k2
        int32 `(mode,)` wavevectors
    omega
        float64 `(mode,)` frequencies.
    prior_scale
        float64 `(mode,)` prior standard deviations a_k.
    attrs
        generator settings (SimConfig fields) as a JSON-compatible dict.
    time_basis
        for pairs in a chosen basis (simulate.qg.basis_pairs), its Legendre time basis:
        {"degree": `(mode,)`, "start", "length" (model time), "current": `(mode,)` bool}; None: lagda's modes.
    """

    coef: np.ndarray
    positions: np.ndarray
    time: np.ndarray
    k1: np.ndarray
    k2: np.ndarray
    omega: np.ndarray
    prior_scale: np.ndarray
    attrs: dict
    time_basis: dict | None = None

    def __post_init__(self):
        n, k = self.coef.shape if self.coef.ndim == 2 else (None, None)
        pos = self.positions.shape
        if n is None or len(pos) != 4 or pos[0] != n or pos[3] != 2 or pos[2] != len(self.time):
            raise ValueError(f"inconsistent pairs: coef {self.coef.shape} (sample, mode), positions {pos} "
                             f"(sample, drifter, obs, 2), time {self.time.shape}")
        if not (len(self.k1) == len(self.k2) == len(self.omega) == len(self.prior_scale) == k):
            raise ValueError(f"mode arrays k1 {self.k1.shape}, k2 {self.k2.shape}, omega {self.omega.shape} "
                             f"do not match coef {self.coef.shape}")

    @property
    def n_samples(self) -> int:
        """Number of fields (pairs)."""
        return self.coef.shape[0]

    def subset(self, index) -> "PairedData":
        """Returns the pairs at `index` (a slice or integer array) with the same metadata."""
        return dataclasses.replace(self, coef=self.coef[index], positions=self.positions[index])

    def meta(self) -> dict:
        """Returns what assimilation needs about the data: modes, frequencies, prior, times, settings."""
        return {"k1": self.k1.tolist(), "k2": self.k2.tolist(), "omega": self.omega.tolist(),
                "prior_scale": self.prior_scale.tolist(), "time": self.time.tolist(),
                "n_drifters": int(self.positions.shape[1]), "attrs": self.attrs, "time_basis": self.time_basis}


def _jsonable(value):
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return value


def _from_xarray(ds) -> PairedData:
    positions = np.stack([ds["x"].transpose("sample", "drifter", "obs").values,
                          ds["y"].transpose("sample", "drifter", "obs").values], axis=-1)
    coef = ds["coef_re"].values + 1j * ds["coef_im"].values
    prior = ds["prior_scale"].values if "prior_scale" in ds else np.full(ds.sizes["mode"], np.nan)
    chosen = None
    if "time_basis_degree" in ds:
        chosen = {"degree": ds["time_basis_degree"].values.astype(int).tolist(),
                  "start": float(ds.attrs["time_basis_start"]), "length": float(ds.attrs["time_basis_length"]),
                  "current": ds["time_basis_current"].values.astype(bool).tolist()}
    return PairedData(coef=coef.astype(np.complex64), positions=positions.astype(np.float32),
                      time=ds["time"].values.astype(np.float64), k1=ds["k1"].values.astype(np.int32),
                      k2=ds["k2"].values.astype(np.int32), omega=ds["omega"].values.astype(np.float64),
                      prior_scale=np.asarray(prior, np.float64),
                      attrs={k: _jsonable(v) for k, v in ds.attrs.items()}, time_basis=chosen)


def _from_npz(path: pathlib.Path) -> PairedData:
    try:
        with np.load(path, allow_pickle=False) as f:
            arrays = {name: f[name] for name in f.files}
    except Exception as error:  # zipfile / pickle / format errors of a corrupted file
        raise ValueError(f"not a paired dataset: {path}: cannot be read as .npz ({type(error).__name__})") from None
    missing = {"coef", "positions", "time", "k1", "k2", "omega"} - set(arrays)
    if missing:
        raise ValueError(f"not a paired dataset: {path}: missing arrays {sorted(missing)}")
    attrs = json.loads(str(arrays["attrs"])) if "attrs" in arrays else {}
    return PairedData(coef=arrays["coef"].astype(np.complex64), positions=arrays["positions"].astype(np.float32),
                      time=arrays["time"].astype(np.float64), k1=arrays["k1"].astype(np.int32),
                      k2=arrays["k2"].astype(np.int32), omega=arrays["omega"].astype(np.float64),
                      prior_scale=arrays.get("prior_scale", np.full(len(arrays["k1"]), np.nan)).astype(np.float64),
                      attrs=attrs)


class DiskPositions:
    """Tracks `(sample, drifter, obs, 2)` float32 of dataset files, read from disk when indexed (streaming).

    Behaves as the in-memory array where training reads it: `shape`, `ndim`, `dtype`,
    `[index]` for a slice or integer array of samples (optionally followed by more indices),
    `np.asarray` (reads everything). The files are one run's (a file, or its shards, in any
    order); each read takes the requested rows only, sorted, from each file.
    """

    def __init__(self, paths):
        import netCDF4

        files = [netCDF4.Dataset(p) for p in paths]
        self.files = sorted(files, key=lambda f: int(getattr(f, "lagda_shard_index", 0)))  # as join_shards orders them
        sizes = [f.dimensions["sample"].size for f in self.files]
        self.starts = np.concatenate([[0], np.cumsum(sizes)])
        first = self.files[0]["x"]
        self.shape = (int(self.starts[-1]), *first.shape[1:], 2)
        self.ndim, self.dtype = 4, np.dtype(np.float32)

    def _rows(self, samples: np.ndarray) -> np.ndarray:
        unique, inverse = np.unique(samples, return_inverse=True)
        parts = []
        for f, (lo, hi) in zip(self.files, zip(self.starts[:-1], self.starts[1:])):
            local = unique[(unique >= lo) & (unique < hi)] - lo
            if len(local):
                parts.append(np.stack([f["x"][local], f["y"][local]], axis=-1).astype(np.float32))
        return np.concatenate(parts)[inverse]

    def __getitem__(self, index):
        first, rest = (index[0], index[1:]) if isinstance(index, tuple) else (index, ())
        samples = np.arange(self.shape[0])[first]
        rows = self._rows(np.atleast_1d(samples))
        rows = rows[0] if np.ndim(samples) == 0 else rows
        return rows[(slice(None),) * (np.ndim(samples) > 0) + rest] if rest else rows

    def __array__(self, dtype=None, copy=None):
        return self[:].astype(dtype or self.dtype)

    def __len__(self) -> int:
        return self.shape[0]


def load_paired(path, stream: bool = False) -> PairedData:
    """Returns the pairs of a lagda dataset file (.nc, validated) or an .npz with the same names.

    Parameters
    ----------
    path : str, os.PathLike or list of them
        The dataset file, or a list of the shard files of one run (joined: `simulate.schema.open_dataset`).
    stream : bool, default False
        Keep the tracks on disk (`DiskPositions`, netCDF only), read batch by batch.

    Returns
    -------
    PairedData
        Coefficients complex64 `(sample, mode)` and positions `(sample, drifter, obs, 2)` in model units, with
        the dataset's modes, frequencies, prior scale, times and generator settings (`PairedData.meta`).

    Raises
    ------
    FileNotFoundError
        If the file does not exist.
    ValueError
        If it is not a readable, valid paired dataset (one line naming the problem).
    """
    from simulate.schema import open_dataset

    if stream:
        paths = list(path) if isinstance(path, (list, tuple)) else [path]
        ds = open_dataset(paths if len(paths) > 1 else paths[0])  # validated, lazily
        with ds:
            meta = _from_xarray(ds.isel(sample=slice(0, 1)))  # modes, prior, times, settings
            coef = ds["coef_re"].values + 1j * ds["coef_im"].values
        return dataclasses.replace(meta, coef=coef.astype(np.complex64), positions=DiskPositions(paths))
    if isinstance(path, (list, tuple)):
        ds = open_dataset(path, load=True)
        return _from_xarray(ds)
    path = pathlib.Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such dataset file: {path}")
    if path.suffix == ".npz":
        return _from_npz(path)

    ds = open_dataset(path, load=True)  # validates the schema; one-line ValueError otherwise
    try:
        return _from_xarray(ds)
    except KeyError as error:
        raise ValueError(f"not a lagda dataset: {path}: missing variable {error}") from None
    finally:
        ds.close()


def as_paired(data, stream: bool = False) -> PairedData:
    """Returns `data` itself if it is PairedData, else the pairs of a path, a glob pattern or a list (`join_files`).

    stream: tracks stay on disk (`load_paired`); a list must then be one run's shard files.
    """
    if isinstance(data, PairedData):
        return data
    if isinstance(data, (list, tuple)) or _is_pattern(data):  # a quoted glob ('train-*.nc') names shard files
        return join_files(list(data) if isinstance(data, (list, tuple)) else [data], stream)
    return load_paired(data, stream)


def _is_pattern(path) -> bool:
    """Returns whether `path` is a glob pattern that names no file itself."""
    text = os.fspath(path)
    return any(c in text for c in "*?[") and not os.path.exists(text)


def expand_paths(paths) -> list[pathlib.Path]:
    """Returns the paths with each glob pattern that names no file (e.g. 'train-*.nc', quoted) expanded, sorted.

    Raises
    ------
    FileNotFoundError
        for a pattern that matches nothing.
    """
    out = []
    for item in paths:
        text = os.fspath(item)
        if _is_pattern(text):
            matches = sorted(glob.glob(text))
            if not matches:
                raise FileNotFoundError(f"no dataset file matches {text}")
            out += [pathlib.Path(m) for m in matches]
        else:
            out.append(pathlib.Path(text))
    return out


def _run_identity(path: pathlib.Path):
    """Returns the generator settings of a shard file (its run), or the path itself for any other file."""
    if path.suffix == ".npz" or not path.is_file():
        return path
    import xarray as xr

    from simulate.schema import CONFIG_FIELDS

    try:
        with xr.open_dataset(path, engine="netcdf4", decode_times=False) as ds:
            if "lagda_shard_count" not in ds.attrs:
                return path
            return tuple(str(ds.attrs.get(k)) for k in CONFIG_FIELDS if k != "chunk_size")
    except Exception:  # not netCDF: load_paired says why
        return path


def join_files(items, stream: bool = False) -> PairedData:
    """Returns the pairs of several files (or PairedData): shards of one run joined along samples, then merged.

    Shard files (`lagda simulate --shard I/N`) of the same run are joined into that run's
    dataset (simulate.schema.open_dataset of the list); the datasets that result, e.g. a
    fixed-release and a random-release file of the same fields, are merged along the drifter
    axis (`merge_drifters`). Glob patterns are expanded (`expand_paths`).
    """
    parts, groups = [], {}
    for item in items:
        if isinstance(item, PairedData):
            parts.append(item)
            continue
        for path in expand_paths([item]):
            groups.setdefault(_run_identity(path), []).append(path)
    if stream and len(parts) + len(groups) > 1:
        raise ValueError("streamed training data must be one file or one run's shard files (merging drifters of "
                         "several files needs them in memory)")
    for paths in groups.values():
        parts.append(load_paired(paths if len(paths) > 1 else paths[0], stream))
    return parts[0] if len(parts) == 1 else merge_drifters(parts)


def merge_drifters(datasets: list[PairedData]) -> PairedData:
    """Returns one PairedData whose drifters are those of `datasets`, in order, per field.

    For files of the same fields (same --seed and --n-samples, hence the same coefficients)
    with other releases or drifter counts, e.g. a fixed-release and a random-release file.

    Raises
    ------
    ValueError
        if the coefficients, modes, frequencies or times differ.
    """
    first = datasets[0]
    for other in datasets[1:]:
        if other.coef.shape != first.coef.shape or not np.array_equal(other.coef, first.coef):
            raise ValueError("cannot merge drifters: the datasets hold different fields (use the same --seed and "
                             "--n-samples)")
        check_same_modes(first.meta(), other, "a dataset to merge")
    attrs = {**first.attrs, "merged_releases": [d.attrs.get("release", "unknown") for d in datasets]}
    return dataclasses.replace(first, positions=np.concatenate([d.positions for d in datasets], axis=1), attrs=attrs)


def check_same_modes(meta: dict, data: PairedData, what: str) -> None:
    """Checks that `data` has the modes and frequencies of a run's `meta`.

    Raises
    ------
    ValueError
        naming `what` (e.g. the dataset path) if modes, frequencies or obs differ.
    """
    same_modes = np.array_equal(np.asarray(meta["k1"]), data.k1) and np.array_equal(np.asarray(meta["k2"]), data.k2)
    if not same_modes:
        raise ValueError(f"{what} has modes (K = {len(data.k1)}) that differ from the model's (K = {len(meta['k1'])})")
    if not np.allclose(np.asarray(meta["omega"]), data.omega, rtol=1e-6, atol=1e-9):
        raise ValueError(f"{what} has frequencies omega that differ from the model's training data")
    if len(meta["time"]) != len(data.time) or not np.allclose(np.asarray(meta["time"]), data.time, rtol=1e-6):
        raise ValueError(f"{what} has {len(data.time)} observation times that differ from the model's "
                         f"{len(meta['time'])}")
