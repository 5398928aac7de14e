"""lagda map --withhold: drifters left out by their ids, and the map checked against their daily velocities."""

import dataclasses
import json

import numpy as np
import pytest
import xarray as xr

from lagda.assimilation.scores import Z
from lagda.io.fixes import Fixes
from lagda.io.physical import EARTH_RADIUS_M, parse_time
from lagda.io.tracks import id_text
from lagda.mapping.check import check_map, withheld
from lagda.mapping.resume import _differences
from lagda.mapping.run import map_archive, map_fixes
from lagda.mapping.settings import MapSettings
from lagda.mapping.store import open_map

DAY = 86400.0
T0 = parse_time("2025-01-01")


def linear_map(lon, lat, days=6):
    """A map across the dateline whose u is linear in longitude and time (bilinear sampling is exact for it)."""
    time = T0 + DAY * np.arange(days)
    t, la, lo = np.meshgrid(np.arange(days), lat, lon, indexing="ij")
    u = 0.1 + 0.01 * (lo - 180.0) + 0.002 * t
    shape = u.shape
    return xr.Dataset({"u": (("time", "lat", "lon"), u), "v": (("time", "lat", "lon"), np.full(shape, 0.02)),
                       "u_std": (("time", "lat", "lon"), np.full(shape, 0.01)),
                       "v_std": (("time", "lat", "lon"), np.full(shape, 0.015))},
                      coords={"time": (time * 1e9).astype("datetime64[ns]"), "lat": lat, "lon": lon})


def eastward(lon0, lat, speed, hours, start=T0):
    """Hourly fixes of a drifter moving east at `speed` m/s along latitude `lat` (its daily velocity: (speed, 0))."""
    s = 3600.0 * np.arange(hours)
    lon = lon0 + np.degrees(speed * s / (EARTH_RADIUS_M * np.cos(np.radians(lat))))
    return start + s, (lon + 180.0) % 360.0 - 180.0, np.full(len(s), lat)


def test_the_check_of_a_known_map_against_known_drifters_is_the_closed_form():
    lon, lat = np.arange(170.25, 190.0, 0.5), np.arange(-5.25, 5.0, 0.5)  # the map passes 180
    maps = linear_map(lon, lat)
    tracks = [eastward(179.8, 1.0, 0.15, 73),  # crosses 180
              eastward(181.3, -2.0, 0.05, 97, T0 + 12 * 3600.0),
              eastward(150.0, 0.0, 0.1, 49),  # west of the map: outside
              eastward(178.0, 1.0, 0.1, 73, T0 + 10 * DAY)]  # after its last day: outside
    fixes = Fixes(np.repeat(np.arange(4), [len(t[0]) for t in tracks]),
                  *(np.concatenate([t[k] for t in tracks]) for k in range(3)), np.array(["a", "b", "c", "d"]))
    maps["u"][:, 10, 27] = np.nan  # a cell with no value next to no drifter: the others' values unchanged
    scores = check_map(maps, fixes)
    # each daily velocity of drifters a and b against the map at its midpoint, in closed form
    expected = []
    for lon0, la, speed, days, start in ((179.8, 1.0, 0.15, 3, T0), (181.3, -2.0, 0.05, 4, T0 + 12 * 3600.0)):
        for day in range(days):
            mid_s = start + 24 * 3600.0 * day + 12 * 3600.0
            mid_lon = lon0 + np.degrees(speed * (mid_s - start) / (EARTH_RADIUS_M * np.cos(np.radians(la))))
            u = 0.1 + 0.01 * (mid_lon - 180.0) + 0.002 * (mid_s - T0) / DAY
            expected.append((u - speed, 0.02))
    error = np.array(expected)
    assert scores["velocities"] == len(error) == 7 and scores["drifters"] == 2
    assert scores["outside"] == 2 + 3 and scores["no_value"] == 0
    reference = np.array([[0.15, 0.0]] * 3 + [[0.05, 0.0]] * 4)
    assert scores["error"] == pytest.approx(np.sqrt(np.sum(error**2) / np.sum(reference**2)), rel=1e-6)
    std = np.array([0.01, 0.015])
    assert scores["coverage_95"] == pytest.approx(np.mean(np.abs(error) <= Z * std))
    assert scores["z_rms"] == pytest.approx(np.sqrt(np.mean((error / std) ** 2)), rel=1e-6)
    maps["u"][:] = np.nan  # no value anywhere: every velocity inside is counted as such
    assert check_map(maps, fixes)["no_value"] == 7


def test_the_withheld_drifters_are_chosen_by_their_ids_alone():
    ids = np.array([f"3002340600{k:05d}" for k in range(40)])
    fixes = Fixes(np.repeat(np.arange(40), 3), np.tile(np.arange(3.0), 40), np.zeros(120), np.zeros(120), ids)
    chosen = set(ids[np.unique(fixes.traj[withheld(fixes, 0.1)])])
    assert len(chosen) == 4 and not withheld(fixes, 0.0).any()
    order = np.random.default_rng(0).permutation(40)  # the same drifters stored in another order
    shuffled = Fixes(np.repeat(np.arange(40), 3), fixes.time, fixes.lon, fixes.lat, ids[order])
    assert set(ids[order][np.unique(shuffled.traj[withheld(shuffled, 0.1)])]) == chosen
    few = fixes.subset(fixes.traj < 3)  # one drifter at least
    assert len(np.unique(few.traj[withheld(few, 0.1)])) == 1


def test_a_resume_of_a_run_made_before_withhold_existed_is_not_refused():
    manifest = lambda s: {"settings": dataclasses.asdict(s), "archive": "a.nc", "archive_bytes": 1}
    stored = manifest(MapSettings())
    del stored["settings"]["withhold"]
    assert _differences(stored, manifest(MapSettings())) == []
    assert _differences(stored, manifest(MapSettings(withhold=0.2))) == ["withhold"]


@pytest.mark.parametrize("suffix", [".nc", ".zarr"])
def test_a_map_with_withheld_drifters_is_checked_against_them(tmp_path, suffix):
    from test_map import U, V, settings, write_archive

    archive = tmp_path / "gdp.nc"
    write_archive(archive, -40.0, 30.0, size=3.0, days=10, n=10)
    s = dataclasses.replace(settings(-40.0, 30.0, size=3.0), period=(T0, T0 + 8 * DAY), withhold=0.3)
    said = []
    out = tmp_path / f"map{suffix}"
    summary = map_archive(archive, out, s, workers=1, progress=False, say=said.append)
    note = [line for line in said if "withheld 3 of 10 drifters" in line]
    assert note and "--withhold 0.3" in note[0]
    with open_map(out) as maps:
        ids = json.loads(maps.attrs["check_withheld_ids"])
        # the check's lines are the map's last notes, said one line each: the whole, then one per distance band
        lines = maps.attrs["check"].split("\n")
        assert len(ids) == 3 and said[-len(lines):] == [f"note: {line}" for line in lines]
        assert lines[0].startswith("withheld drifters (30%, 3 of 10): ") and "(a map of zero: 100%)" in lines[0]
        assert len(lines) >= 2 and all(line.startswith("withheld, where the map") and "binned mean" in line
                                       for line in lines[1:])
        # the fixes the map was made from (selected, cleaned, low-passed), before it withheld some
        fixes = map_fixes(archive, s, s.tiles())
        out_of_map = np.isin(fixes.traj, [t for t, i in enumerate(fixes.ids) if id_text(i) in ids])
        # n_fixes counts the mapped drifters' fixes in the region within half a day of a map day, not the others'
        day = np.floor((fixes.time - T0) / DAY + 0.5)
        counted = ((day >= 0) & (day <= 8) & (fixes.lon > s.region[0]) & (fixes.lon < s.region[1])
                   & (fixes.lat > s.region[2]) & (fixes.lat < s.region[3]))
        assert int(maps["n_fixes"].sum()) == np.sum(counted & ~out_of_map) < np.sum(counted)
        # the attributes are the check of the map as written: scored again from it, the same
        held = fixes.subset(out_of_map)
        again = check_map(maps, held)
        assert again["velocities"] == maps.attrs["check_velocities"] > 10
        assert again["error"] == pytest.approx(maps.attrs["check_error"], rel=1e-6)
        # the uniform current, mapped from the others, within 10% of its speed at the withheld drifters
        assert maps.attrs["check_rms_m_s"] < 0.1 * np.hypot(U, V)
    assert summary["check"]["check_velocities"] == again["velocities"]
    said.clear()
    map_archive(archive, out, s, resume=True, progress=False, say=said.append)  # complete: its check said again
    assert "already complete" in said[0] and said[1:] == [f"note: {line}" for line in lines]
