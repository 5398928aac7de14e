"""The partial run of `lagda map`: its manifest, the checks that let it resume, and the tile pieces saved in it.

The run keeps its state in `OUT.partial/`: `manifest.json` (the settings, the archive's identity and the code's
digest, simulate.provenance) and one `tiles/KEY.npz` per finished tile (written to a temporary name, then renamed), so a
killed run resumes at the next tile (`resume=True`) and a finished one is not redone. A partial run made by other
code is not resumed, and a tile made by a worker running other code stops the run (lagda.mapping.dask_driver):
either would blend two codes' tiles into one map.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os

import numpy as np

from lagda.arguments import again, given
from lagda.io.locations import is_url, open_zarr_url
from lagda.io.sources import track_files
from lagda.mapping.settings import ABSENT_SETTINGS, MapSettings
from lagda.mapping.store import open_map
from simulate.atomic import make_folder_atomic, remove_stale, remove_stale_inside, remove_tree, write_atomic
from simulate.provenance import code_digest, other_code

VARIABLES = ("u", "v", "u_std", "v_std")  # the arrays of a tile's piece, and of the map


def archive_identity(archive) -> dict:
    """Returns what a resume checks of the archive: its absolute path and size in bytes; for several files (a
    folder, or files listed in any order) their number and a digest of their sorted absolute paths; for a Zarr
    store at a URL the URL, its dimensions' sizes and a digest of its attributes (a new version differs)."""
    files = track_files(archive)
    if len(files) == 1 and is_url(files[0]):
        with open_zarr_url(files[0]) as ds:
            described = json.dumps({"sizes": dict(ds.sizes), "attrs": ds.attrs}, sort_keys=True, default=str)
        return {"archive": files[0], "archive_bytes": None,
                "archive_sha256": hashlib.sha256(described.encode()).hexdigest()}
    size = sum(os.path.getsize(path) if os.path.isfile(path) else sum(
        os.path.getsize(os.path.join(d, f)) for d, _, names in os.walk(path) for f in names) for path in files)
    if len(files) == 1:
        return {"archive": os.path.abspath(files[0]), "archive_bytes": int(size)}
    paths = "\n".join(sorted(os.path.abspath(path) for path in files))
    return {"archive": os.path.dirname(os.path.commonprefix(paths.splitlines())) or os.sep, "archive_files": len(files),
            "archive_paths_sha256": hashlib.sha256(paths.encode()).hexdigest(), "archive_bytes": int(size)}


def run_manifest(archive, settings: MapSettings) -> dict:
    """Returns what the run records and a resume compares: {"settings": the settings as JSON, the archive's identity
    (`archive_identity`), "code": this code's digest (simulate.provenance.code_digest)}."""
    return {"settings": json.loads(json.dumps(dataclasses.asdict(settings))), **archive_identity(archive),
            "code": code_digest()}


def _stored(path: str) -> dict | None:
    """Returns the manifest a partial folder or a finished map records, None when it cannot be read."""
    try:
        if path.endswith(".partial"):
            with open(os.path.join(path, "manifest.json")) as handle:
                return json.load(handle)
        with open_map(path) as ds:
            return json.loads(ds.attrs["manifest"])
    except (OSError, ValueError, KeyError):
        return None


def _differences(stored: dict, manifest: dict) -> list[str]:
    settings = set(stored.get("settings", {})) | set(manifest["settings"])
    # a setting newer than a stored run: that run had its default, or did without what the setting adds
    defaults = dataclasses.asdict(MapSettings()) | ABSENT_SETTINGS
    old = {k: stored.get("settings", {}).get(k, defaults.get(k)) for k in settings}
    return sorted({k for k in settings if old[k] != manifest["settings"].get(k)}
                  | {k for k in set(stored) | set(manifest) if k.startswith("archive")
                     and stored.get(k) != manifest.get(k)})


def prepare_partial(out: str, manifest: dict, resume: bool, overwrite: bool, say) -> tuple[str, bool]:
    """Returns (the partial folder, whether the output is already complete) after checking resume and overwrite
    and removing what interrupted runs left (stale temporaries)."""
    partial = out + ".partial"
    for path in (out, partial):
        remove_stale(path, lambda line: say(f"note: {line}"))
    if os.path.isdir(partial):
        remove_stale_inside(os.path.join(partial, "tiles"), lambda line: say(f"note: {line}"))
    if overwrite:  # the old output stays until the new one replaces it
        if os.path.isdir(partial):
            remove_tree(partial)
        if resume:
            say(f"note: {given('resume')} with {given('overwrite')}: starting again")
        return partial, False
    if os.path.exists(out):
        if not resume:
            raise ValueError(f"{out} exists; pass {given('overwrite')} to replace it, or {given('resume')} to finish "
                             f"an interrupted run (on a complete map, {given('resume')} changes nothing)")
        stored = _stored(out)
        if stored is not None and not _differences(stored, manifest):
            if os.path.isdir(partial):  # killed after the rename, before the cleanup
                remove_tree(partial)
                say(f"note: removed {partial}, left by a run killed after its map was written")
            if stored.get("code") != manifest["code"]:
                say(f"note: {out} was made by {other_code(stored.get('code'))}: left as it is; "
                    f"{given('overwrite')} makes it again with this code")
            return partial, True
        if not os.path.isdir(partial):
            raise ValueError(f"{out} exists with other settings and there is no interrupted run to resume: pass "
                             f"{given('overwrite')} to replace it")
    if os.path.isdir(partial):
        if not resume:
            raise ValueError(f"{partial} holds an interrupted run: pass {given('resume')} to finish it or "
                             f"{given('overwrite')} to start again")
        stored = _stored(partial)
        if stored is None:  # lagda makes a partial folder whole with its manifest: this one is not lagda's
            raise ValueError(f"{partial} has no readable manifest: pass {given('overwrite')} to start again")
        changed = _differences(stored, manifest)
        if changed:
            raise ValueError(f"cannot resume {out}: its partial run was made with other settings "
                             f"({', '.join(changed)}); pass {given('overwrite')} to start again")
        if stored.get("code") != manifest["code"]:  # its tiles and this code's would blend into one map
            raise ValueError(f"cannot resume {out}: its partial run was made by {other_code(stored.get('code'))}; "
                             f"pass {given('overwrite')} to start again")
    elif resume:
        say("note: nothing to resume: starting a new run")
    return partial, False


def start_partial(partial: str, manifest: dict) -> None:
    """Creates the partial folder, whole with its manifest and tiles folder, unless it exists."""
    if os.path.isdir(partial):
        return

    def fill(folder):
        os.mkdir(os.path.join(folder, "tiles"))
        with open(os.path.join(folder, "manifest.json"), "w") as handle:
            json.dump(manifest, handle, indent=1)

    make_folder_atomic(partial, fill, fault="map-partial")


def interrupted_state(out) -> str:
    """Returns what an interrupted map left at `out`, and what the same command or call with resume does."""
    out = os.fspath(out)
    tiles = os.path.join(out + ".partial", "tiles")
    if os.path.exists(out) and not os.path.isdir(tiles):
        return f"{out} is complete; {again()} with {given('resume')} reports it already complete"
    if os.path.isdir(tiles):
        saved = sum(name.endswith(".npz") for name in os.listdir(tiles))
        return (f"{saved} tiles are saved in {out}.partial: rerun {again()} with {given('resume')} to continue "
                "from the next tile")
    return f"nothing was saved: rerun {again()}"


def save_piece(partial: str, piece: dict) -> None:
    """Saves a tile's piece (its VARIABLES present and its info as JSON) as `PARTIAL/tiles/KEY.npz`, written to a
    temporary name and renamed."""
    path = os.path.join(partial, "tiles", piece["info"]["tile"] + ".npz")
    arrays = {name: piece[name] for name in VARIABLES if name in piece}

    def write(tmp):
        with open(tmp, "wb") as handle:
            np.savez(handle, info=np.array(json.dumps(piece["info"])), **arrays)

    write_atomic(path, write, fault="map-tile")


def load_info(partial: str, key: str) -> dict:
    """Returns the info of the piece saved for tile `key`."""
    with np.load(os.path.join(partial, "tiles", key + ".npz")) as data:
        return json.loads(str(data["info"]))


def load_piece(partial: str, key: str) -> dict:
    """Returns the piece saved for tile `key`: {"info": ..., and each of VARIABLES it holds}."""
    with np.load(os.path.join(partial, "tiles", key + ".npz")) as data:
        return {"info": json.loads(str(data["info"])), **{name: data[name] for name in VARIABLES if name in data}}
