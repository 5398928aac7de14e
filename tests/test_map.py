"""lagda map: tiles and blend of a uniform current on Dask workers (their environment, the task graph), the blend in
blocks of days, the figure, and a tile method registered by name."""

import dataclasses
import json
import os

import numpy as np
import pytest
import xarray as xr

from lagda.io.physical import parse_time
from lagda.mapping.dask_driver import local_cluster
from lagda.mapping.methods.interface import TileMethod, TileSummary
from lagda.mapping.run import map_archive
from lagda.mapping.settings import MapSettings
from tests.map_archives import START, U, V, settings, write_archive


@pytest.fixture(scope="module")
def uniform(tmp_path_factory):
    """(archive, settings, an uninterrupted map, the warnings it gave) of a uniform current north of the equator,
    with Dask's large-graph warning lowered from 10 MB to 4 kB (a task holding a tile's fixes here was up to 44 kB)."""
    import warnings

    import dask

    folder = tmp_path_factory.mktemp("map")
    archive = folder / "gdp.nc"
    write_archive(archive, -40.0, 30.0, spikes=3)
    out = folder / "map.nc"
    with warnings.catch_warnings(record=True) as caught, \
            dask.config.set({"distributed.admin.large-graph-warning-threshold": "4kB"}):
        warnings.simplefilter("always")
        summary = map_archive(archive, out, settings(-40.0, 30.0), workers=2, progress=False, say=lambda _: None)
    return archive, settings(-40.0, 30.0), out, summary, [str(w.message) for w in caught]


def test_tiles_fixes_go_to_the_workers_as_data_not_in_the_task_graph(uniform):
    """A dense tile (300 drifters at 15-minute fixes: 20 MB) made Dask warn "Sending large graph" when its fixes
    were arguments of the task; scattered first, the graph holds their key alone."""
    assert not [message for message in uniform[-1] if "large graph" in message]


def test_local_cluster_workers_keep_the_adaptive_malloc_threshold_and_leave_ctrl_c_to_lagda():
    """Dask's default MALLOC_TRIM_THRESHOLD_ (a fixed mmap threshold: page faults on every matrix) is not set; the
    workers ignore SIGINT (a terminal's Ctrl-C reaches them too: each printed a traceback), the map stops on it."""
    import signal

    from dask.distributed import Client

    # Python's own Ctrl-C handler here, whatever started the tests (a shell's `&` or nohup starts them ignoring
    # SIGINT, which the workers would inherit): their SIG_IGN must be lagda's doing, and this process's is left
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with local_cluster(1) as cluster, Client(cluster) as client:
            assert list(client.run(lambda: os.environ.get("MALLOC_TRIM_THRESHOLD_")).values()) == [None]
            assert list(client.run(lambda: os.environ.get("OPENBLAS_NUM_THREADS")).values()) == ["1"]
            assert list(client.run(lambda: signal.getsignal(signal.SIGINT) is signal.SIG_IGN).values()) == [True]
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, previous)


def test_uniform_current_is_recovered_on_every_tile_without_seams(uniform):
    _, s, out, summary, _ = uniform
    assert summary["inverted"] == summary["tiles"] == len(s.tiles())
    with xr.open_dataset(out) as ds:
        assert ds.u.dims == ("time", "lat", "lon") and ds.u.attrs["units"] == "m s-1"
        where = ds.n_fixes > 0
        assert int(where.sum()) > 100
        u, v = ds.u.where(where), ds.v.where(where)
        # every cell with drifters, in every tile and across tile edges, within 10% of the current's speed
        speed = np.hypot(U, V)
        assert float(np.nanmax(np.abs(u - U))) < 0.1 * speed and float(np.nanmax(np.abs(v - V))) < 0.1 * speed
        assert float(np.nanmedian(ds.u_std.where(where))) > 0
        assert "spikes" in ds.attrs["notes"] and ds.attrs["clean_spikes_dropped"] == 3 * 14  # 3 per drifter
        records = json.loads(ds.attrs["tile_records"])  # what each tile chose, the local GP's scales included
        assert len(records) == summary["tiles"] and ds.attrs["local_gp"].startswith("near the drifters, in ")
        fitted = [r["local_gp"] for r in records if isinstance(r.get("local_gp"), dict)]
        assert fitted and all(10.0 <= f["ell_km"] and f["std_m_s"] > 0 for f in fitted)
        # the cleaned spikes leave no velocity off the uniform current: the tiles' outlier screen drops none
        assert ds.attrs["tile_velocity_outliers_dropped"] == 0
        assert all(r.get("velocity_outliers_dropped") == 0 for r in records if "skipped" not in r)
        assert "far off their tile's fitted field" not in " ".join(summary["notes"])  # none left out: not said


def test_the_blend_in_blocks_of_days_writes_the_same_map(uniform, map_scheduler, tmp_path, monkeypatch):
    # the blend holds BLEND_DAYS map times at once: blocks of 4 days (four blocks, the last short) give the map
    # the one-block run wrote, cell for cell
    import lagda.mapping.write as write

    archive, s, reference, _, _ = uniform
    monkeypatch.setattr(write, "BLEND_DAYS", 4)
    out = tmp_path / "blocks.zarr"
    map_archive(archive, out, s, scheduler=map_scheduler, progress=False, say=lambda _: None)
    with xr.open_zarr(out) as a, xr.open_dataset(reference) as b:
        assert len(a.time) == 15 and a.u.encoding["chunks"][0] == 4
        for name in ("u", "v", "u_std", "v_std", "n_fixes"):
            np.testing.assert_array_equal(a[name].values, b[name].values)


def test_plot_map_draws_the_busiest_day_or_the_one_asked_for(uniform, tmp_path):
    """The figure's day: the one with the most fixes by default, else the map time nearest the date given; a date
    outside the map's days is refused in one line and nothing is written."""
    from lagda.mapping.plot import map_figure, open_map, plot_map

    _, _, reference, _, _ = uniform
    with xr.open_dataset(reference) as ds:
        counts = ds.n_fixes.sum(("lat", "lon")).values
        days = [str(t)[:10] for t in ds.time.values]
    png, day = plot_map(reference, tmp_path / "busiest.png")
    assert day == days[int(np.argmax(counts))] and (tmp_path / "busiest.png").stat().st_size > 0
    assert plot_map(reference, tmp_path / "asked.png", days[3] + "T10:00")[1] == days[3]
    with pytest.raises(ValueError, match="outside the map's days") as info:
        plot_map(reference, tmp_path / "late.png", "2030-01-01")
    assert "\n" not in str(info.value) and not (tmp_path / "late.png").exists()
    with open_map(reference) as maps:
        titles = [ax.get_title() for ax in map_figure(maps, 3).axes[:3]]
    assert titles[0].startswith("speed") and titles[1].startswith("total predictive std")


@dataclasses.dataclass(frozen=True)
class _EveryFix:
    """A toy method's data: every tile gets all the map's fixes."""

    fixes: object

    def in_tile(self, tile):
        return self.fixes


class _ConstantField(TileMethod):
    """A toy tile method: every tile the same eastward current with the same std, whatever its drifters (a module
    class: Dask pickles it by reference)."""

    name = "constant"
    summary = "every cell the same eastward current"
    std_meaning = " (the toy's constant)"

    def prepare(self, fixes):
        return _EveryFix(fixes), (f"constant: {len(fixes)} fixes, none used",)

    def map_tile(self, data, tile, grid):
        days, rows, cols = grid.window(tile)
        shape = (days.stop - days.start, rows.stop - rows.start, cols.stop - cols.start)
        full = lambda value: np.full(shape, value, np.float32)
        return {"u": full(0.25), "v": full(0.0), "u_std": full(0.1), "v_std": full(0.1),
                "info": {"tile": tile.key, "fixes": len(data)}}

    def summarise(self, infos):
        return TileSummary([f"{len(infos)} tiles of the constant current"])


def test_a_tile_method_registered_by_name_makes_a_map(map_scheduler, tmp_path, monkeypatch):
    """A new tile method is one class and one registry entry: registered, MapSettings, the command line and
    map_archive take it by name and the map is its field, its notes and its std's meaning; unregistered, it is
    refused."""
    from lagda.cli import build_parser
    from lagda.mapping.methods.registry import TILE_METHODS

    archive = tmp_path / "gdp.nc"
    write_archive(archive, -40.0, 30.0, size=3.0, days=8, n=4)
    make = lambda: MapSettings((-40.0, -37.0, 30.0, 33.0), (parse_time(START), parse_time(START) + 6 * 86400.0),
                               resolution=0.5, tile_deg=3.0, halo_deg=1.0, window_days=8.0, step_days=4.0,
                               method="constant")
    with pytest.raises(ValueError, match="method='constant': one of objective, basis$"):
        make()
    monkeypatch.setitem(TILE_METHODS, "constant", _ConstantField)
    s = make()
    assert build_parser().parse_args(["map", "--tracks", str(archive), "--out", "m.nc", "--tile-method",
                                      "constant"]).tile_method == "constant"
    with pytest.raises(ValueError, match="one of objective, basis, constant"):
        MapSettings(method="nope")
    out, said = tmp_path / "map.nc", []
    summary = map_archive(archive, out, s, scheduler=map_scheduler, progress=False, say=said.append)
    assert summary["inverted"] == summary["tiles"] == len(s.tiles()) and summary["skipped"] == 0
    assert f"note: {len(s.tiles())} tiles of the constant current" in said
    assert any(line.startswith("note: constant: ") and line.endswith(" fixes, none used") for line in said)
    with xr.open_dataset(out) as ds:
        np.testing.assert_array_equal(ds.u.values, 0.25)
        np.testing.assert_array_equal(ds.v.values, 0.0)
        np.testing.assert_allclose(ds.u_std.values, 0.1, rtol=1e-5)  # the std of a mixture of equal pieces
        assert ds.u_std.attrs["long_name"].endswith("standard deviation (the toy's constant)")
        assert json.loads(ds.attrs["settings"])["method"] == "constant" and ds.attrs["local_gp"] == "off"
        assert "constant: " in ds.attrs["notes"]
