"""The track files of a source, and several of them read as one.

A source is a path (a file, or a Zarr store), a folder of track files, the URL of a Zarr store, or a list of them
(`track_files`); messages name it by `source_name`. Several physical track files are read one at a time
(`SeveralFiles`) and their fixes joined (`merge_raw`): a drifter id found in more than one file is one drifter (a
file per drifter and year, say).
"""

from __future__ import annotations

import dataclasses
import os
import warnings

import numpy as np

from lagda.io.locations import is_url, is_zarr
from lagda.io.readers.registry import read_file, track_suffixes
from lagda.io.tracks import RawTracks, id_text


def track_files(source) -> list[str]:
    """Returns the track files of `source`: a path (a file or a Zarr store), a folder of track files (its files and
    Zarr stores whose names end in a reader's suffix, `lagda.io.readers.registry.track_suffixes`, not its
    subfolders, in name order), the URL of a Zarr store (`is_url`), or a list of such paths.

    Raises
    ------
    FileNotFoundError
        a path that does not exist.
    ValueError
        a folder with no track file, or no path.
    """
    paths = [source] if isinstance(source, (str, os.PathLike)) else list(source)
    if not paths:
        raise ValueError("no track file given")
    files, suffixes = [], track_suffixes()
    for path in map(os.fspath, paths):
        if is_url(path):  # a Zarr store on a server: opened when read (open_zarr_url)
            files.append(path)
            continue
        if not os.path.exists(path):
            raise FileNotFoundError(f"no such track file: {path}")
        if os.path.isdir(path) and not is_zarr(path):
            found = sorted(os.path.join(path, name) for name in os.listdir(path)
                           if name.lower().endswith(suffixes) and not name.startswith("."))
            if not found:
                raise ValueError(f"{path}: a folder with no track file (names ending in {', '.join(suffixes)})")
            files += found
        else:
            files.append(path)
    return files


def source_name(source) -> str:
    """Returns how messages name a track source: its path, or "N files in FOLDER" for several."""
    files = track_files(source)
    if len(files) == 1:
        return files[0]
    folder = os.path.commonpath([os.path.abspath(f) for f in files])
    folder = folder if os.path.isdir(folder) and not is_zarr(folder) else os.path.dirname(folder)
    return f"{len(files)} files in {os.path.relpath(folder) if not os.path.isabs(files[0]) else folder}"


class SeveralFiles:
    """Reads several physical track files one at a time (`read`), keeping what the user is told of them: the
    drifters by id across the files (an id named in more than one file is one drifter), each file's notes and
    its reader's warnings, said once for all the files (`notes`, `warnings`).

    Parameters
    ----------
    files
        the track files (`track_files`).
    """

    def __init__(self, files: list[str]):
        self.files, self.name = list(files), source_name(files)
        self.kind, self.first, self.joined = None, {}, set()  # first: id text -> the first file naming it
        self.file_notes, self.said = [], {}  # said: a warning's text (without the path) -> how many files gave it

    def read(self, path: str) -> RawTracks:
        """Returns the fixes of one of the files as read, the trajectories of a file that names no ids named
        after it ("FILE" for one, "FILE:i" for several).

        Raises
        ------
        ValueError
            a lagda dataset or tracks in model units, or positions in other coordinates than the
            files read before (lon/lat and metres mixed).
        """
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            raw = read_file(path)
        for warning in caught:
            text = str(warning.message)
            text = text[len(path) + 2:] if text.startswith(f"{path}: ") else text
            self.said[text] = self.said.get(text, 0) + 1
        if not isinstance(raw, RawTracks) or raw.coordinates == "model":
            raise ValueError(f"{path}: several files are read together only as physical tracks (lon/lat or metres "
                             "at dated times); this one is " + ("a lagda dataset" if not isinstance(raw, RawTracks)
                                                                 else "in model units"))
        if self.kind not in (None, (raw.coordinates, raw.physical_time)):
            raise ValueError(f"{self.name}: the files mix positions in longitude/latitude and in metres")
        self.kind = (raw.coordinates, raw.physical_time)
        if not raw.ids_given:
            stem = os.path.basename(path.rstrip(os.sep))
            raw = dataclasses.replace(raw, ids=np.array([stem] if len(raw.ids) == 1 else
                                                        [f"{stem}:{i}" for i in range(len(raw.ids))]))
        for tid in map(id_text, raw.ids):
            if self.first.setdefault(tid, path) != path:
                self.joined.add(tid)
        self.file_notes.append(raw.notes)
        return raw

    def notes(self) -> tuple[str, ...]:
        """Returns the notes of the files read so far: how many files and drifters (and joined), and each file's
        notes once with the number of files that had it."""
        notes = [f"read {len(self.file_notes)} files: {len(self.first)} drifters" + (
            f", {len(self.joined)} of them named in more than one file (their fixes joined)" if self.joined else "")]
        for note in dict.fromkeys(note for file_notes in self.file_notes for note in file_notes):
            notes.append(f"{note} ({sum(note in file_notes for file_notes in self.file_notes)} of the files)")
        return tuple(notes)

    def warnings(self) -> list[str]:
        """Returns one line per distinct warning the files' readers gave, with how many of the files read gave it
        (the files read named as of all the files, when not every one was read)."""
        read = len(self.file_notes)
        who = self.name if read == len(self.files) else f"{read} of {self.name}"
        return [f"{who} ({'each' if n == read else f'{n} of them'}): {text}" for text, n in self.said.items()]


def merge_raw(raws: list, notes: tuple = ()) -> RawTracks:
    """Returns the fixes of several files' `RawTracks` (read by `SeveralFiles.read`) as one, with `notes`: the
    trajectories of one id (as text) are one drifter, its fixes joined (`clean_fixes` sorts them and resolves the
    times they share). Ids are text unless every id is an integer. Per-fix variables that a file lacks are NaN on
    its fixes; the global attributes are those every file has alike; physical tracks share one ocean (no
    `field`)."""
    order = {}  # id text -> [(file, trajectory)]
    for f, raw in enumerate(raws):
        for i, tid in enumerate(raw.ids):
            order.setdefault(id_text(tid), []).append((f, i))
    variables = sorted({name for raw in raws for name in raw.per_fix})
    times, positions, per_fix = [], [], {name: [] for name in variables}
    for parts in order.values():
        times.append(np.concatenate([np.asarray(raws[f].times[i], np.float64).ravel() for f, i in parts]))
        positions.append(np.concatenate([np.asarray(raws[f].positions[i], np.float64).reshape(-1, 2)
                                         for f, i in parts]))
        for name in variables:
            per_fix[name].append(np.concatenate([
                np.asarray(raws[f].per_fix[name][i], np.float64) if name in raws[f].per_fix
                else np.full(np.size(raws[f].times[i]), np.nan) for f, i in parts]))
    attrs = {key: value for key, value in raws[0].attrs.items()
             if all(key in raw.attrs and np.array_equal(raw.attrs[key], value) for raw in raws[1:])}
    integer = all(isinstance(tid, (int, np.integer)) for raw in raws for tid in raw.ids)
    ids = np.array([int(t) for t in order] if integer else list(order), dtype=np.int64 if integer else object)
    return RawTracks(times, positions, ids, None, raws[0].coordinates, raws[0].physical_time, attrs,
                     per_fix=per_fix, notes=tuple(notes))

