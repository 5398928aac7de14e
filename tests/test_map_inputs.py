"""lagda map's inputs: bad input refused in one line, the archive's extent, the formats and files read as the ragged
archive (a year of a longer archive, a folder, a URL), sparse fixes and still drifters."""

import json
import warnings

import numpy as np
import pytest
import xarray as xr

from lagda.io.physical import parse_time
from lagda.mapping.run import map_archive
from lagda.mapping.settings import MapSettings
from tests.map_archives import U, V, settings, small_settings, write_archive


def test_map_refuses_bad_input_in_one_line(tmp_path, capsys):
    # the command in this process (its exit code and stderr as `lagda map` gives them); a warning would be a line more
    from lagda.cli import main

    archive = tmp_path / "gdp.nc"
    write_archive(archive, -40.0, 30.0, size=2.0, days=3, n=3)

    def run(*extra):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            code = main(["map", "--tracks", str(archive), "--region", "-40", "-34", "30", "36", "--period",
                         "2025-01-01", "2025-01-15", "--out", str(tmp_path / "m.nc"), *extra])
        printed = capsys.readouterr()
        assert not caught and not printed.out, (caught, printed.out)
        return code, printed.err

    code, err = run("--region", "-40", "-34", "80", "86")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "latitudes" in err
    code, err = run("--period", "2030-01-01", "2030-01-15")
    assert code == 2 and "no fix" in err
    code, err = run("--withhold", "1")
    assert code == 2 and err.strip() == ("lagda map: error: --withhold 1: the fraction of drifters to withhold must be "
                                         "in [0, 1)")
    assert not any(p.name.startswith("m.nc") for p in tmp_path.iterdir())


def test_a_region_or_period_with_no_fix_or_upside_down_is_refused_in_one_line(tmp_path):
    """A region holding no fix said so (the cleaning of no fix once failed with an IndexError), and a region south
    of itself or a period ending before it starts before the archive is read."""
    from lagda.mapping.archive import archive_extent

    archive = tmp_path / "gdp.nc"
    write_archive(archive, -40.0, 30.0, size=2.0, days=3, n=3)
    with pytest.raises(ValueError, match="no fix in the region given to take the map's period from"):
        archive_extent(archive, 0.5, 86400.0, region=(10.0, 16.0, 0.0, 6.0))
    with pytest.raises(ValueError, match="south < north"):
        MapSettings(region=(-40.0, -34.0, 36.0, 30.0))
    with pytest.raises(ValueError, match="the end must be after the start"):
        MapSettings(period=(parse_time("2025-01-15"), parse_time("2025-01-01")))


def test_map_without_region_and_period_maps_the_archives_extent_and_says_so(map_scheduler, tmp_path):
    """No region and no period: the archive's extent, said in a note, kept in the map's notes and manifest (so the
    same command resumes), and a map on the cells that hold fixes."""
    from lagda.mapping.archive import archive_extent

    archive, out = tmp_path / "gdp.nc", tmp_path / "map.nc"
    write_archive(archive, -40.0, 30.0, size=2.0, days=5, n=5)
    said = []
    s = settings(-40.0, 30.0)
    summary = map_archive(archive, out, MapSettings(None, None, s.resolution, s.cadence_s, s.tile_deg, s.halo_deg,
                                                    s.window_days, s.step_days, s.k_max, s.degree),
                          scheduler=map_scheduler, progress=False, say=said.append)
    region, period, notes = archive_extent(archive, s.resolution, s.cadence_s)
    assert summary["notes"][:2] == notes and f"note: {notes[0]}" in said and f"note: {notes[1]}" in said
    with xr.open_dataset(out) as ds:
        assert json.loads(ds.attrs["notes"])[:2] == notes
        stored = json.loads(ds.attrs["manifest"])["settings"]
        assert tuple(stored["region"]) == region and tuple(stored["period"]) == period
        assert ds.lon.values[0] == region[0] + s.resolution / 2 and ds.lat.values[-1] == region[3] - s.resolution / 2
        assert np.all(np.isfinite(ds.u.values[ds.n_fixes.values > 0]))
    again = map_archive(archive, out, MapSettings(None, None, s.resolution, s.cadence_s, s.tile_deg, s.halo_deg,
                                                  s.window_days, s.step_days, s.k_max, s.degree),
                        resume=True, progress=False, say=said.append)
    assert again.get("already_complete")


def test_archive_extent_leaves_out_spikes_and_lone_fixes_and_reads_whole_tracks_in_slices(tmp_path):
    """A fix at (0 E, 0 N) (a position spike) and one dated 1970 (a lone fix decades from its track) would stretch
    the map to a 40-degree box and 55 years: the extent is the clean archive's, and the note counts both. Read in
    slices shorter than one track, the extent and the selected fixes are the same."""
    from lagda.io.archive import _Ragged
    from lagda.mapping.archive import archive_extent, select_fixes

    clean_path, bad = tmp_path / "clean.nc", tmp_path / "bad.nc"
    write_archive(clean_path, -40.0, 30.0, size=2.0, days=5, n=5)  # 120 hourly fixes a drifter
    with xr.open_dataset(clean_path) as ds:
        ds = ds.load()
    lon, lat, time = ds.lon.values.copy(), ds.lat.values.copy(), ds.time.values.copy()
    lon[50], lat[50] = 0.0, 0.0  # drifter 0's 51st fix
    time[130] = np.datetime64("1970-01-01T00:00:00", "ns")  # drifter 1's 11th fix
    ds.assign(lon=("obs", lon, ds.lon.attrs), lat=("obs", lat, ds.lat.attrs), time=("obs", time)).to_netcdf(bad)
    region, period, notes = archive_extent(bad, 0.5, 86400.0)
    assert (region, period) == archive_extent(clean_path, 0.5, 86400.0)[:2]
    assert region[1] - region[0] <= 3.0 and period[1] - period[0] <= 5 * 86400.0
    left_out = "598 fixes the map can use (1 position spikes, 1 lone fixes at a track's end (a wrong time) left out)"
    assert left_out in notes[0]
    with xr.open_dataset(bad, decode_times=False) as ds:  # slices end at a drifter's end, at least one drifter each
        slices = lambda n: [(sl.start, sl.stop) for sl, *_ in _Ragged(ds, bad).chunks(n, whole_trajectories=True)]
        assert slices(50) == [(120 * k, 120 * k + 120) for k in range(5)]
        assert slices(250) == [(0, 240), (240, 480), (480, 600)]
    assert archive_extent(bad, 0.5, 86400.0, chunk_fixes=50) == (region, period, notes)
    whole, sliced = select_fixes(bad, region, period), select_fixes(bad, region, period, chunk_fixes=50)
    for name in ("traj", "time", "lon", "lat"):
        np.testing.assert_array_equal(getattr(whole, name), getattr(sliced, name))
    seconds = (time - np.datetime64("1970-01-01", "ns")) / np.timedelta64(1, "s")
    inside = ((lon >= region[0]) & (lon <= region[1]) & (lat >= region[2]) & (lat <= region[3])
              & (seconds >= period[0]) & (seconds <= period[1]))
    assert len(whole) == inside.sum() and np.all(np.diff(whole.traj) >= 0)


def test_daily_fixes_are_mapped_and_said_two_day_fixes_refused(map_scheduler, tmp_path):
    # the uniform current from a fix a day: every cell with a fix has it, and a note says the segments' limit;
    # from a fix every two days there is no velocity to map: one error, nothing written
    archive, out = tmp_path / "daily.nc", tmp_path / "map.nc"
    write_archive(archive, -40.0, 30.0, size=3.0, days=16, n=14, every_h=24.0)
    said = []
    summary = map_archive(archive, out, settings(-40.0, 30.0, size=3.0), scheduler=map_scheduler, progress=False,
                          say=said.append)
    assert summary["inverted"] == summary["tiles"]
    assert any("14 of 14 drifters have fixes further apart than 6 h (median step 24 h)" in s for s in said)
    assert any("fitted to 24-h velocities" in s for s in said), said
    with xr.open_dataset(out) as ds:
        fixed = ds.n_fixes.values > 0
        assert fixed.sum() > 50
        np.testing.assert_allclose(ds.u.values[fixed], U, atol=0.01)
        np.testing.assert_allclose(ds.v.values[fixed], V, atol=0.01)
    sparse = tmp_path / "two_days.nc"
    write_archive(sparse, -40.0, 30.0, size=3.0, days=16, n=14, every_h=48.0)
    with pytest.raises(ValueError, match="none of the .* fixes the cleaning kept in the region and period lies in a "
                                         "drifter segment"):
        map_archive(sparse, tmp_path / "none.nc", settings(-40.0, 30.0, size=3.0), scheduler=map_scheduler,
                    progress=False, say=said.append)
    assert not any(p.name.startswith("none.nc") for p in tmp_path.iterdir())


def test_a_tile_that_cannot_be_inverted_is_said_with_why(map_scheduler, tmp_path):
    """Drifters that never move (no velocity variance to choose a prior from): the tile is left NaN and the note
    says why, not that it lacked drifters."""
    s, scheduler = small_settings(method="basis"), map_scheduler  # what the tile basis does
    hours = np.datetime64("2025-01-01T00", "ns") + np.arange(3 * 24) * np.timedelta64(1, "h")
    rows = [f"{k},{str(h)[:19]}Z,{-39.0 + 0.5 * k},{31.0 + 0.4 * k}" for k in range(4) for h in hours]
    (tmp_path / "still.csv").write_text("id,time,lon,lat\n" + "\n".join(rows) + "\n")
    said = []
    summary = map_archive(tmp_path / "still.csv", tmp_path / "m.nc", s, scheduler=scheduler, progress=False,
                          say=said.append)
    assert summary["inverted"] == 0
    line = [x for x in said if "tiles mapped from their drifters" in x][0]
    assert "without a drifter" not in line and "whose tracks could not be inverted" in line
    assert "no drifter moves between its fixes (every velocity is zero)" in line
    warning = [x for x in said if x.startswith("warning: no tile was inverted, so the map holds no velocity")]
    assert len(warning) == 1 and "no drifter moves" in warning[0] and "segments" not in warning[0]
    # still for 8 days: out of the water (aground), every fix cleaned away, and the refusal says so
    days = np.datetime64("2025-01-01T00", "ns") + np.arange(8 * 24) * np.timedelta64(1, "h")
    rows = [f"{k},{str(h)[:19]}Z,{-39.0 + 0.5 * k},{31.0 + 0.4 * k}" for k in range(4) for h in days]
    (tmp_path / "ashore.csv").write_text("id,time,lon,lat\n" + "\n".join(rows) + "\n")
    with pytest.raises(ValueError, match=r"the cleaning kept none of the fixes in the region and period \(768 "
                                         "fixes aground dropped"):
        map_archive(tmp_path / "ashore.csv", tmp_path / "a.nc", s, scheduler=scheduler, progress=False,
                    say=lambda _: None)


def write_years(path, shift_end_days=0.0, lives=True):
    """Writes a ragged archive of 40 drifters over four years, 6-hourly, ordered by their start date as clouddrift
    writes the GDP's ragged files, with the GDP's per-drifter start_date and end_date (the end moved by
    `shift_end_days`)."""
    rng = np.random.default_rng(3)
    starts = np.round(np.sort(rng.uniform(0, 4 * 365, 40)) * 86400.0) + parse_time("2020-01-01T00:00:00Z")
    days = rng.integers(30, 200, 40)
    order = np.arange(40)  # starts are sorted
    times = [starts[k] + 21600.0 * np.arange(4 * days[k]) for k in order]
    lon = np.concatenate([-40.0 + rng.uniform(0, 4) + 0.01 * np.arange(len(t)) % 3 for t in times])
    lat = np.concatenate([30.0 + rng.uniform(0, 4) + 0.005 * np.arange(len(t)) % 2 for t in times])
    since = {"units": "seconds since 1970-01-01 00:00:00"}
    variables = {"rowsize": ("traj", np.array([len(t) for t in times])), "id": ("traj", 1000 + order),
                 "lon": ("obs", lon), "lat": ("obs", lat), "time": ("obs", np.concatenate(times), since)}
    if lives:
        variables["start_date"] = ("traj", np.array([t[0] for t in times]), since)
        variables["end_date"] = ("traj", np.array([t[-1] for t in times]) + shift_end_days * 86400.0, since)
    xr.Dataset(variables).to_netcdf(path)
    return np.concatenate(times), lon, lat


def test_a_year_of_a_longer_archive_is_read_by_the_drifters_that_live_in_it(tmp_path):
    """Of a four-year archive whose drifters state their lives (the GDP's start_date, end_date), the selection of
    one year reads the positions of only the drifters alive in it, and selects the same fixes as a reading of
    every fix; the extent in that year is the same too. Lives that disagree with the fixes (every end_date 20 days
    early) are found out: every fix is read again, and a note says so."""
    from lagda.mapping.archive import archive_extent, select_fixes

    times, lon, lat = write_years(tmp_path / "years.nc")
    write_years(tmp_path / "plain.nc", lives=False)
    write_years(tmp_path / "wrong.nc", shift_end_days=-20.0)
    year = (parse_time("2021-03-01T00:00:00Z"), parse_time("2022-03-01T00:00:00Z"))
    region = (-45.0, -30.0, 25.0, 40.0)  # every fix
    inside = (times >= year[0]) & (times <= year[1])
    selected = {name: select_fixes(tmp_path / name, region, year, chunk_fixes=400)
                for name in ("years.nc", "plain.nc", "wrong.nc")}
    for fixes in selected.values():
        assert len(fixes) == inside.sum()
        for name in ("traj", "time", "lon", "lat"):
            np.testing.assert_array_equal(getattr(fixes, name), getattr(selected["plain.nc"], name))
    np.testing.assert_array_equal(np.sort(selected["plain.nc"].time), np.sort(times[inside]))
    def read(name):  # (times, positions) read, from the note
        note = next(n for n in selected[name].notes if n.startswith("read the times of"))
        return int(note.split("times of ")[1].split(" ")[0]), int(note.split("positions of ")[1].split(" ")[0])

    assert inside.sum() <= read("years.nc")[1] <= read("years.nc")[0] < 0.5 * len(times)
    assert read("wrong.nc")[0] == read("plain.nc")[0] == len(times)
    assert "start_date and end_date" in " ".join(selected["years.nc"].notes)
    assert any("drifter lives were not used: drifter" in n for n in selected["wrong.nc"].notes)
    assert not any("lives were not used" in n for n in selected["years.nc"].notes)
    extents = [archive_extent(tmp_path / name, 0.5, 86400.0, period=year, chunk_fixes=400)
               for name in ("years.nc", "plain.nc", "wrong.nc")]
    assert extents[0] == extents[1] == extents[2]


def test_a_year_of_a_folder_of_drifter_files_reads_the_files_of_the_drifters_that_live_in_it(tmp_path):
    """Of a folder of four years of GDP hourly files (a file per drifter, stating its deploy_date and end_date),
    the selection of one year reads only the files of the drifters alive in it, and selects the same fixes as the
    ragged file of the same drifters; a file whose end_date is 20 days early is found out when read: every file
    is read again, and a note says so."""
    import netCDF4

    from lagda.mapping.archive import select_fixes
    from lagda.testing import write_gdp_hourly_files

    times, _, _ = write_years(tmp_path / "years.nc")
    files = write_gdp_hourly_files(tmp_path / "years.nc", tmp_path / "gdp")
    year = (parse_time("2021-03-01T00:00:00Z"), parse_time("2022-03-01T00:00:00Z"))
    region = (-45.0, -30.0, 25.0, 40.0)  # every fix
    reference = select_fixes(tmp_path / "years.nc", region, year)
    folder = select_fixes(tmp_path / "gdp", region, year, chunk_fixes=400)
    for name in ("time", "lon", "lat"):
        np.testing.assert_array_equal(getattr(folder, name), getattr(reference, name))
    with xr.open_dataset(tmp_path / "years.nc", decode_times=False) as ds:
        lives = (ds.end_date.values + 86400.0 >= year[0]) & (ds.start_date.values - 86400.0 <= year[1])
    alive = int(np.sum(lives))
    assert 0 < alive < len(files) // 2
    assert f"read {alive} of the {len(files)} files: the other {len(files) - alive} state lives of their drifters " \
           "(deploy_date and end_date, widened by 1 day) that miss the period" in folder.notes
    assert any(n.startswith(f"assumed: {alive} of {len(files)} files in ") and "(each): no featureType" in n
               for n in folder.notes)
    inside = files[int(np.flatnonzero(lives)[0])]
    with netCDF4.Dataset(inside, "a") as ds:
        ds["end_date"][:] = ds["end_date"][:] - 20 * 86400.0
    wrong = select_fixes(tmp_path / "gdp", region, year, chunk_fixes=400)
    for name in ("time", "lon", "lat"):
        np.testing.assert_array_equal(getattr(wrong, name), getattr(reference, name))
    assert any(n.startswith("the archive's drifter lives were not used: ") and inside in n for n in wrong.notes)
    assert not any(n.startswith("read ") and " of the " in n and "files" in n for n in wrong.notes)


def test_a_files_stated_life_is_read_alike_from_netcdf4_netcdf3_and_zarr(tmp_path):
    """The span of the lives a file states (`_file_life`: start_date or deploy_date, end_date, widened by a day)
    is the same read through h5py (netCDF-4), netCDF4 (netCDF-3) and xarray (Zarr); a missing end (-1e34, the
    GDP's fill) is no end; a CSV, or a file that states no dates, states no life."""
    from lagda.io.archive import LIFE_SLACK_S, _file_life

    since = {"units": "hours since 2020-01-01 00:00:00"}
    ds = xr.Dataset({"ID": ("traj", [7, 8]), "rowsize": ("traj", [2, 2]),
                     "deploy_date": ("traj", [24.0, 48.0], since), "end_date": ("traj", [72.0, -1e34], since),
                     "time": ("obs", [24.0, 25.0, 48.0, 49.0], since), "lon": ("obs", np.zeros(4)),
                     "lat": ("obs", np.zeros(4))})
    ds.to_netcdf(tmp_path / "four.nc", format="NETCDF4", encoding={n: {"_FillValue": None} for n in ds.variables})
    ds.to_netcdf(tmp_path / "three.nc", format="NETCDF3_64BIT")
    ds.to_zarr(tmp_path / "store.zarr", zarr_format=2)
    start = parse_time("2020-01-02T00:00:00Z") - LIFE_SLACK_S
    for name in ("four.nc", "three.nc", "store.zarr"):
        assert _file_life(str(tmp_path / name)) == (start, np.inf, "deploy_date and end_date"), name
    ds.drop_vars(["deploy_date", "end_date"]).to_netcdf(tmp_path / "none.nc")
    (tmp_path / "fixes.csv").write_text("id,time,lon,lat\na,2020-01-01T00:00:00Z,0,0\n")
    assert _file_life(str(tmp_path / "none.nc")) is None and _file_life(str(tmp_path / "fixes.csv")) is None


def test_map_reads_other_track_files_as_the_ragged_archive(tmp_path):
    """The archive's fixes as ERDDAP writes a CSV (a row of units under the header), as a two-dimensional
    (trajectory, obs) CF netCDF, as the GDP's hourly files (a file per drifter: their folder, or the files listed,
    read a group of files at a time) and as two CSV files of the first and last days of every drifter (read one
    at a time): the extent and the selected fixes are the ragged file's. Tracks in model units are refused in one
    line."""
    from lagda.mapping.archive import archive_extent, select_fixes
    from lagda.testing import write_gdp_hourly_files

    ragged, table, grid = tmp_path / "gdp.nc", tmp_path / "erddap.csv", tmp_path / "grid.nc"
    write_archive(ragged, -40.0, 30.0, size=2.0, days=3, n=4)
    with xr.open_dataset(ragged) as ds:
        ds = ds.load()
    n, m = len(ds.rowsize), int(ds.rowsize[0])
    stamps = np.datetime_as_string(ds.time.values, unit="s")
    rows = [f"{i},{t}Z,{float(lat)!r},{float(lon)!r}" for i, t, lat, lon in
            zip(np.repeat(ds.id.values, ds.rowsize.values), stamps, ds.lat.values, ds.lon.values)]
    table.write_text("\n".join(["ID,time,latitude,longitude", ",UTC,degrees_north,degrees_east", *rows]) + "\n")
    xr.Dataset({"id": ("trajectory", ds.id.values, {"cf_role": "trajectory_id"}),
                "lon": (("trajectory", "obs"), ds.lon.values.reshape(n, m), {"units": "degrees_east"}),
                "lat": (("trajectory", "obs"), ds.lat.values.reshape(n, m), {"units": "degrees_north"}),
                "time": (("trajectory", "obs"), ds.time.values.reshape(n, m))},
               attrs={"featureType": "trajectory"}).to_netcdf(grid)
    files = write_gdp_hourly_files(ragged, tmp_path / "gdp")  # a file per drifter, as NCEI serves the GDP
    halves = [tmp_path / "months" / f"{k}.csv" for k in (1, 2)]  # every drifter in two files (two downloads)
    halves[0].parent.mkdir()
    half = [[row for row, stamp in zip(rows, stamps) if (stamp < stamps[m // 2]) == first] for first in (True, False)]
    for path, part in zip(halves, half):
        path.write_text("\n".join(["ID,time,latitude,longitude", ",UTC,degrees_north,degrees_east", *part]) + "\n")
    region, period, notes = archive_extent(ragged, 0.5, 86400.0)
    reference = select_fixes(ragged, region, period)
    # several files are read a group of about chunk_fixes at a time: groups of 2 drifter files, or 1 half each
    for other, chunk in ((table, None), (grid, None), (tmp_path / "gdp", None), (files, 2 * m - 1),
                         (halves[0].parent, m)):
        chunked = {} if chunk is None else {"chunk_fixes": chunk}
        assert archive_extent(other, 0.5, 86400.0, **chunked) == (region, period, notes)
        fixes = select_fixes(other, region, period, **chunked)
        for name in ("traj", "time", "lon", "lat"):
            np.testing.assert_array_equal(getattr(fixes, name), getattr(reference, name))
    padded = tmp_path / "padded.nc"  # a (trajectory, obs) file padded past each track's end: the slots are no fixes
    pad = lambda values, fill: np.concatenate([values.reshape(n, m), np.full((n, 5), fill, values.dtype)], axis=1)
    xr.Dataset({"id": ("trajectory", ds.id.values, {"cf_role": "trajectory_id"}),
                "lon": (("trajectory", "obs"), pad(ds.lon.values, np.nan), {"units": "degrees_east"}),
                "lat": (("trajectory", "obs"), pad(ds.lat.values, np.nan), {"units": "degrees_north"}),
                "time": (("trajectory", "obs"), pad(ds.time.values, np.datetime64("NaT")))},
               attrs={"featureType": "trajectory"}).to_netcdf(padded)
    fixes = select_fixes(padded, region, period)
    np.testing.assert_array_equal(fixes.time, reference.time)
    assert f": {len(reference)} of {n * m} fixes in the region and period" in fixes.notes[-1]  # not of n (m + 5)
    one = select_fixes(files[0], region, period)  # one GDP file alone: it has a rowsize, its positions are 2-D
    for name in ("time", "lon", "lat"):
        np.testing.assert_array_equal(getattr(one, name), getattr(reference, name)[reference.traj == 0])
    from lagda.mapping.resume import archive_identity  # what a resume checks: the same files however they are given

    assert archive_identity(tmp_path / "gdp") == archive_identity(files[::-1]) != archive_identity(files[1:])
    model = tmp_path / "model.csv"
    model.write_text("id,time,x,y\n" + "".join(f"a,{0.01 * k},{0.1 + 0.01 * k},0.5\n" for k in range(5)))
    with pytest.raises(ValueError, match="lagda map maps longitude/latitude fixes") as info:
        archive_extent(model, 0.5, 86400.0)
    assert "\n" not in str(info.value)


def test_a_file_of_unsorted_fixes_is_mapped_sorted_and_says_so(tmp_path):
    """A CSV whose rows are shuffled: its fixes are grouped by drifter in the file's order, and the cleaning sorts
    each drifter's times and counts them in a note, as `lagda assimilate` says it (the map sorted them silently)."""
    from lagda.mapping.archive import archive_extent, clean, select_fixes

    ragged, shuffled = tmp_path / "gdp.nc", tmp_path / "shuffled.csv"
    write_archive(ragged, -40.0, 30.0, size=2.0, days=3, n=4)
    with xr.open_dataset(ragged) as ds:
        ds = ds.load()
    stamps = np.datetime_as_string(ds.time.values, unit="s")
    rows = [f"{i},{t}Z,{float(lon)!r},{float(lat)!r}" for i, t, lon, lat in
            zip(np.repeat(ds.id.values, ds.rowsize.values), stamps, ds.lon.values, ds.lat.values)]
    np.random.default_rng(0).shuffle(rows)
    shuffled.write_text("\n".join(["id,time,lon,lat", *rows]) + "\n")
    region, period, _ = archive_extent(ragged, 0.5, 86400.0)
    reference = clean(select_fixes(ragged, region, period))
    fixes = clean(select_fixes(shuffled, region, period))
    by_drifter = lambda f: np.lexsort((f.time, f.ids[f.traj].astype(str)))  # the CSV numbers drifters as they come
    for name in ("time", "lon", "lat"):
        np.testing.assert_array_equal(getattr(fixes, name)[by_drifter(fixes)],
                                      getattr(reference, name)[by_drifter(reference)])
    assert all(np.all(np.diff(fixes.time[fixes.traj == k]) > 0) for k in range(4))
    assert "clean: times sorted in 4 trajectories" in fixes.notes and fixes.clean["clean_trajectories_sorted"] == 4
    assert reference.clean["clean_trajectories_sorted"] == 0


def test_a_ragged_file_that_does_not_declare_its_layout_is_read_and_says_how(tmp_path):
    """A ragged file whose count has no CF sample_dimension (clouddrift's adapters, or a hand-made file): read from
    its dimensions, and a note says so; a declared one says nothing of it."""
    from lagda.mapping.archive import archive_extent, select_fixes

    bare, declared = tmp_path / "bare.nc", tmp_path / "declared.nc"
    write_archive(bare, -40.0, 30.0, size=2.0, days=3, n=4)
    with xr.open_dataset(bare) as ds:
        ds = ds.load()
    ds["rowsize"].attrs["sample_dimension"] = "obs"
    ds.to_netcdf(declared)
    region, period, _ = archive_extent(bare, 0.5, 86400.0)
    line = ("bare.nc: no CF sample_dimension attribute; assumed a contiguous ragged array (clouddrift layout): "
            "rowsize(traj) counts the observations along 'obs'")
    assert any(note.endswith(line) for note in select_fixes(bare, region, period).notes)
    assert not any("assumed" in note for note in select_fixes(declared, region, period).notes)


@pytest.fixture
def http_folder(tmp_path):
    """(a folder, the URL it is served at) by a local HTTP server, as a Zarr store in the cloud is."""
    import functools
    import http.server
    import threading

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    folder = tmp_path / "served"
    folder.mkdir()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield folder, f"http://127.0.0.1:{server.server_port}"
    server.shutdown()


def test_map_reads_a_ragged_zarr_store_at_a_url_as_the_local_file(tmp_path, http_folder):
    """The GDP's hourly collection is served as a ragged Zarr store (clouddrift's gdp1h opens it by URL): read over
    HTTP in slices, it gives the local file's extent and fixes; a resume knows the store by URL, sizes and
    attributes; a URL that is no store is refused in one line."""
    from lagda.mapping.archive import archive_extent, select_fixes
    from lagda.mapping.resume import archive_identity

    folder, server = http_folder
    local = tmp_path / "gdp.nc"
    write_archive(local, -40.0, 30.0, size=2.0, days=3, n=4)
    with xr.open_dataset(local) as ds:
        ds.to_zarr(folder / "gdp.zarr", zarr_format=2, consolidated=True)
    url = f"{server}/gdp.zarr"
    region, period, notes = archive_extent(local, 0.5, 86400.0)
    assert archive_extent(url, 0.5, 86400.0, chunk_fixes=100)[:2] == (region, period)
    reference, fixes = select_fixes(local, region, period), select_fixes(url, region, period, chunk_fixes=100)
    for name in ("traj", "time", "lon", "lat"):
        np.testing.assert_array_equal(getattr(fixes, name), getattr(reference, name))
    known = archive_identity(url)
    assert known["archive"] == url and known == archive_identity(url)
    with xr.open_zarr(folder / "gdp.zarr") as ds:  # a new version of the store
        ds.load().assign_attrs(date_modified="2026-01-01").to_zarr(folder / "new.zarr", zarr_format=2,
                                                                   consolidated=True)
    assert archive_identity(f"{server}/new.zarr")["archive_sha256"] != known["archive_sha256"]
    with pytest.raises(ValueError, match="cannot be opened as a Zarr store") as error:
        archive_extent(f"{server}/missing.zarr", 0.5, 86400.0)
    assert "\n" not in str(error.value)
