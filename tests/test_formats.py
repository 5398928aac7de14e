"""lagda.io.formats: physical track files as the ecosystem writes them, read into model units."""

import dataclasses

import numpy as np
import pytest
import xarray as xr

from lagda import cli
from lagda.assimilation.model import resolve_dt
from lagda.io.export import cut_gaps
from lagda.io.formats import read_tracks
from lagda.io.physical import Mapping, iso_time, parse_time
from lagda.io.tracks import Tracks, check_fits_model, pack_tracks, write_tracks

BOX = (-45.0, -35.0, 30.0, 38.0)
ORIGIN = parse_time("2025-03-01T00:00:00Z")
HOUR = 3600.0


def _physical(n_traj=3, n_obs=30, spacing_h=(1.0, 6.0, 1.0)) -> Tracks:
    """Returns tracks with a mapping: hourly or 6-hourly fixes (times multiples of one hour)."""
    mapping = Mapping(BOX, "lonlat", ORIGIN, 3.6e7)
    rng = np.random.default_rng(3)
    times = np.full((n_traj, n_obs), np.nan)
    pos = np.full((n_traj, n_obs, 2), np.nan)
    for i in range(n_traj):
        times[i] = mapping.time_to_model(ORIGIN + HOUR * spacing_h[i] * np.arange(1, n_obs + 1))
        pos[i] = rng.uniform(0.2, 0.8, 2) + np.cumsum(rng.normal(scale=0.01, size=(n_obs, 2)), axis=0)
    return Tracks(pos, times, np.zeros(n_traj, np.int64), np.array([f"drifter{i}" for i in range(n_traj)]),
                  mapping=mapping)


def assert_close(a: Tracks, b: Tracks):
    np.testing.assert_allclose(a.positions, b.positions, rtol=0, atol=1e-12)
    np.testing.assert_allclose(a.times, b.times, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(a.field, b.field)
    assert list(a.trajectory_id) == list(b.trajectory_id)


@pytest.mark.parametrize("layout", ["multidimensional", "ragged"])
def test_physical_export_round_trips_with_its_mapping(tmp_path, layout):
    tracks = cut_gaps(_physical(), 2, 4, seed=1)
    write_tracks(tracks, tmp_path / "t.nc", layout=layout)
    back = read_tracks(tmp_path / "t.nc")
    assert_close(back, tracks)
    assert dataclasses.replace(back.mapping, notes=()) == tracks.mapping
    assert any("lagda_mapping_" in note for note in back.notes)
    with xr.open_dataset(tmp_path / "t.nc") as ds:  # decoded by xarray as a user would
        assert ds["lon"].attrs["units"] == "degrees_east" and ds["lat"].attrs["standard_name"] == "latitude"
        assert ds["time"].dtype.kind == "M" and ds.attrs["featureType"] == "trajectory"
        first = ds["time"].values.ravel()[0]
        assert str(first)[:19] == iso_time(tracks.mapping.time_from_model(tracks.times[0, 0]))[:19]


def test_a_trajectory_array_stored_obs_first_reads_as_trajectory_first(tmp_path):
    """Positions over (obs, trajectory), as numpy's column order can write them: the cf_role id's dimension says
    which is the trajectory, and a note says the file was read transposed."""
    from lagda.io.formats import read_raw

    tracks = _physical()
    write_tracks(tracks, tmp_path / "t.nc", layout="multidimensional")
    with xr.open_dataset(tmp_path / "t.nc") as ds:
        ds.load().transpose(*reversed(ds["lon"].dims), ...).to_netcdf(tmp_path / "obs_first.nc")
    with xr.open_dataset(tmp_path / "obs_first.nc") as ds:
        assert ds["lon"].dims[1] == [v.dims[0] for v in ds.variables.values() if "cf_role" in v.attrs][0]
    plain, flipped = read_raw(tmp_path / "t.nc"), read_raw(tmp_path / "obs_first.nc")
    assert flipped.ids.tolist() == plain.ids.tolist() and any("read over" in note for note in flipped.notes)
    for got, want in zip(flipped.positions + flipped.times, plain.positions + plain.times):
        np.testing.assert_array_equal(got, want)


def test_gaps_remove_fixes_of_the_asked_lengths():
    tracks = _physical(n_traj=1, n_obs=60, spacing_h=(1.0,))
    cut = cut_gaps(tracks, 3, 5, seed=0)
    hours = np.diff(cut.mapping.time_from_model(cut.times[0][np.isfinite(cut.times[0])])) / HOUR
    steps = np.round(hours).astype(int)
    assert np.all(np.isclose(hours, steps)) and np.sum(steps > 1) <= 3 and 2 <= steps.max() <= 6
    assert np.sum(steps - 1) == 60 - np.isfinite(cut.times[0]).sum()  # every removed fix is in a gap
    with pytest.raises(ValueError, match="too few"):
        cut_gaps(tracks, 10, 12)


def _ragged_dataset(tracks: Tracks, with_attributes: bool) -> xr.Dataset:
    """Returns a clouddrift-style ragged array (rowsize, id, time(obs), lon/lat(obs)) of `tracks`."""
    keep = np.isfinite(tracks.times)
    lon, lat = tracks.mapping.from_model(tracks.positions[..., 0][keep], tracks.positions[..., 1][keep])
    seconds = tracks.mapping.time_from_model(tracks.times[keep])
    time = (seconds * 1e9).astype("datetime64[ns]")
    attrs = lambda **a: a if with_attributes else {}
    ds = xr.Dataset(
        {"rowsize": ("traj", keep.sum(axis=1), attrs(sample_dimension="obs")),
         "lon": ("obs", lon, attrs(units="degrees_east")), "lat": ("obs", lat, attrs(units="degrees_north"))},
        coords={"id": ("traj", tracks.trajectory_id.astype(object), attrs(cf_role="trajectory_id")),
                "time": ("obs", time)},
        attrs={"featureType": "trajectory"} if with_attributes else {})
    return ds


def test_ragged_array_without_attributes_is_read_from_its_dimensions_with_a_warning(tmp_path):
    tracks = _physical()
    _ragged_dataset(tracks, with_attributes=False).to_netcdf(tmp_path / "r.nc")
    with pytest.warns(UserWarning, match=r"assumed a contiguous ragged array .*rowsize\(traj\)"):
        back = read_tracks(tmp_path / "r.nc", box=BOX, time_scale=3.6e7)
    # the time origin is inferred (the first fix) so model times shift by it; positions are exact
    np.testing.assert_allclose(back.positions, tracks.positions, atol=1e-12)
    shift = tracks.times[0, 0]
    np.testing.assert_allclose(back.times, tracks.times - shift, atol=1e-12)
    assert back.n_field == 1 and any("time from the first fix" in note for note in back.notes)
    assert not any("--box sets it" in note for note in back.notes)  # given


def test_time_longitude_latitude_in_capitals_without_cf_attributes_are_read(tmp_path):
    """Copernicus and OceanSITES name them TIME, LONGITUDE, LATITUDE; written without `axis` or `standard_name`
    (only the time's units), TIME was not found ("no 'time' variable")."""
    tracks = _physical()
    ds = _ragged_dataset(tracks, with_attributes=True)
    ds = ds.rename({"time": "TIME", "lon": "LONGITUDE", "lat": "LATITUDE"})
    ds.to_netcdf(tmp_path / "caps.nc")
    back = read_tracks(tmp_path / "caps.nc", box=BOX, time_scale=3.6e7)
    plain = _ragged_dataset(tracks, with_attributes=True)
    plain.to_netcdf(tmp_path / "plain.nc")
    same = read_tracks(tmp_path / "plain.nc", box=BOX, time_scale=3.6e7)
    np.testing.assert_array_equal(back.positions, same.positions)
    np.testing.assert_array_equal(back.times, same.times)


def test_a_model_calendar_reads_its_dates_as_the_standard_calendars_and_a_date_it_lacks_is_refused(tmp_path):
    """A model's drifters written in its noleap calendar (days since 1950 in 2025: the elapsed time differs from the
    standard calendar's by 18 leap days) were refused; their dates are now the same dates of the standard calendar,
    with a warning, so the file reads as the same file written in the standard calendar. A 360_day date the
    standard calendar lacks (30 February) is refused in one line."""
    import cftime

    tracks = _physical()
    plain = _ragged_dataset(tracks, with_attributes=True)
    plain.to_netcdf(tmp_path / "standard.nc")
    dates = [cftime.DatetimeNoLeap(*d.timetuple()[:6]) for d in plain.time.to_index().to_pydatetime()]
    model = plain.copy()
    model["time"] = ("obs", cftime.date2num(dates, "days since 1950-01-01", "noleap"),
                     {"units": "days since 1950-01-01", "calendar": "noleap"})
    model.to_netcdf(tmp_path / "noleap.nc")
    same = read_tracks(tmp_path / "standard.nc", box=BOX, time_scale=3.6e7)
    with pytest.warns(UserWarning, match="time calendar 'noleap': its dates read as the same dates"):
        back = read_tracks(tmp_path / "noleap.nc", box=BOX, time_scale=3.6e7)
    np.testing.assert_allclose(back.times, same.times, atol=1e-9)
    model["time"] = ("obs", np.full(model.sizes["obs"], 59.5), {"units": "days since 2001-01-01",
                                                                 "calendar": "360_day"})
    model.to_netcdf(tmp_path / "360.nc")
    with pytest.raises(ValueError, match=r"time calendar '360_day' has dates the standard calendar lacks \(2001-02-30"):
        read_tracks(tmp_path / "360.nc", box=BOX, time_scale=3.6e7)


def test_inferred_mapping_contains_every_fix_and_is_noted(tmp_path):
    tracks = _physical()
    _ragged_dataset(tracks, with_attributes=True).to_netcdf(tmp_path / "r.nc")
    back = read_tracks(tmp_path / "r.nc")
    # the extent's larger side spans the middle 1 / (1 + 2 * 0.1) of the box, the other side less
    lo, hi = np.nanmin(back.positions, axis=(0, 1)), np.nanmax(back.positions, axis=(0, 1))
    assert np.all(lo >= 1 / 12 - 1e-12) and np.all(hi <= 11 / 12 + 1e-12)
    assert np.isclose(lo, 1 / 12).any() and np.isclose(hi, 11 / 12).any()
    assert back.times[0, 0] == 0.0 and np.nanmax(back.times) == pytest.approx(0.1)  # the window maps onto 0.1
    assert (any("--box sets it" in note for note in back.notes)
            and any("--time-scale sets it" in note for note in back.notes))


def test_csv_with_iso_datetimes_irregular_times_and_gaps(tmp_path):
    lines = ["id,time,lon,lat"]
    stamps = ["2025-03-01T00:00:00Z", "2025-03-01T01:00:00Z", "2025-03-01T07:00:00Z", "2025-03-01T13:00:00Z",
              "2025-03-02T01:00:00Z"]
    for k, stamp in enumerate(stamps):
        lines.append(f"a,{stamp},{-40 + 0.1 * k},{34 + 0.05 * k}")
        lines.append(f"b,{stamp},{-38 - 0.1 * k},{33},")  # a trailing empty column is ignored
    (tmp_path / "t.csv").write_text("\n".join(lines) + "\n")
    tracks = read_tracks(tmp_path / "t.csv", box=BOX, time_scale=3.6e7)
    np.testing.assert_allclose(tracks.times[0] * 3.6e7 / HOUR, [0, 1, 7, 13, 25], atol=1e-9)
    np.testing.assert_allclose(tracks.positions[0, :, 0], (np.array([-40 + 0.1 * k for k in range(5)]) + 45) / 10)
    assert tracks.n_field == 1 and tracks.trajectory_id.tolist() == ["a", "b"]


def test_fixes_at_irregular_seconds_get_a_step_that_divides_every_time(tmp_path):
    """Argos-like fixes (5-20 a day at random whole seconds) fit the model: the guessed dt is their common step."""
    rng = np.random.default_rng(5)
    seconds = np.sort(rng.choice(10 * 86400, size=120, replace=False)) + 7  # the first fix sets t = 0
    lines = ["id,time,lon,lat"] + [f"{'ab'[k % 2]},{iso_time(ORIGIN + s)},{-40 + 1e-6 * s},{34 + 5e-7 * s}"
                                   for k, s in enumerate(seconds)]
    (tmp_path / "argos.csv").write_text("\n".join(lines) + "\n")
    tracks = read_tracks(tmp_path / "argos.csv")
    dt, notes = resolve_dt(tracks, None)
    check_fits_model(tracks, dt)  # raised "is not a multiple of the model's dt" before
    second = 1.0 / tracks.mapping.time_scale_s
    assert dt <= second * (1 + 1e-9) and "the greatest common step of the fixes' times, 1 s, in equal steps" in notes[0]
    hourly = _physical()  # regular fixes keep the smallest spacing's steps
    assert resolve_dt(hourly, None)[0] == pytest.approx(HOUR / 3.6e7 / np.ceil(HOUR / 3.6e7 / 1e-4))


def test_a_spreadsheets_date_and_time_columns_are_one_time_and_an_ambiguous_date_is_named(tmp_path):
    """A date column and a time-of-day column (as spreadsheets export them) make each fix's time, said in a note;
    a `Date (UTC)` column alone is the time; a day/month date is refused naming the first such value."""
    from lagda.io.formats import read_raw

    rows = [("a", "2025-03-01", "00:00:00", -40.0, 34.0), ("a", "2025-03-01", "06:00:00", -40.1, 34.1),
            ("a", "2025-03-02", "00:00", -40.2, 34.2)]
    (tmp_path / "two.csv").write_text("drifter_id,date,time,lon,lat\n" + "".join(
        f"{i},{d},{t},{x},{y}\n" for i, d, t, x, y in rows))
    with pytest.warns(UserWarning, match="no id column; assumed drifter_id"):
        raw = read_raw(tmp_path / "two.csv")
    np.testing.assert_array_equal(raw.times[0] - raw.times[0][0], [0.0, 6 * HOUR, 24 * HOUR])
    assert "times from the date and time columns together" in raw.notes
    assert "3 times without a time zone read as UTC" in raw.notes  # said, where a Z or an offset is not
    (tmp_path / "one.csv").write_text("id,Date (UTC),lon,lat\n" + "".join(
        f"{i},{d}T{t},{x},{y}\n" for i, d, t, x, y in rows))
    with pytest.warns(UserWarning, match="no time column; assumed date"):
        np.testing.assert_array_equal(read_raw(tmp_path / "one.csv").times[0], raw.times[0])
    (tmp_path / "dmy.csv").write_text("id,time,lon,lat\na,2025-03-01T00:00:00Z,-40,34\na,01/03/2025 06:00,-40,34\n")
    with pytest.raises(ValueError, match="the first that is neither: '01/03/2025 06:00' \\(a day and month in"):
        read_raw(tmp_path / "dmy.csv")


def test_erddap_csv_and_csvp_read_as_the_plain_csv(tmp_path):
    """ERDDAP tabledap downloads of the GDP: .csv has a row of units under the header, .csvp the units in the
    column names; ID upper case, other columns (WMO, ve, vn) and another column order. Both read as the plain
    id,time,lon,lat file of the same fixes."""
    fixes = [(300234060000000 + i, f"2025-03-01T{h:02d}:00:00Z", -40 + 0.01 * h + i, 34 + 0.02 * h)
             for i in range(2) for h in range(6)]
    fixes[3] = (*fixes[3][:3], "NaN")  # a missing latitude, as ERDDAP writes it
    plain = ["id,time,lon,lat"] + [f"{i},{t},{lon},{'nan' if lat == 'NaN' else lat}" for i, t, lon, lat in fixes]
    erddap = ["ID,WMO,time,latitude,longitude,ve,vn", ",,UTC,degrees_north,degrees_east,m s-1,m s-1"] + [
        f"{i},4401,{t},{lat},{lon},0.1,NaN" for i, t, lon, lat in fixes]
    csvp = ["ID,time (UTC),latitude (degrees_north),longitude (degrees_east),ve (m s-1)"] + [
        f"{i},{t},{lat},{lon},0.1" for i, t, lon, lat in fixes]
    read = {}
    for name, lines in (("plain", plain), ("erddap", erddap), ("csvp", csvp)):
        (tmp_path / f"{name}.csv").write_text("\n".join(lines) + "\n")
        read[name] = read_tracks(tmp_path / f"{name}.csv", box=BOX, time_scale=3.6e7)
    for name in ("erddap", "csvp"):
        np.testing.assert_array_equal(read[name].positions, read["plain"].positions)
        np.testing.assert_array_equal(read[name].times, read["plain"].times)
        assert read[name].trajectory_id.tolist() == read["plain"].trajectory_id.tolist()
    assert np.isfinite(read["plain"].times).sum(axis=1).tolist() == [5, 6]  # the row without a latitude left out
    assert all("1 rows with no position or time left out" in read[name].notes for name in read)


def test_csv_numeric_times_in_stated_cf_units_read_as_the_iso_file(tmp_path):
    """Times as numbers in the CF units ERDDAP's units row or a .csvp column name states (seconds since 1970, days
    since 1950, the GDP's) read as the same fixes with ISO datetimes, said in a note, and so does a one-drifter file's
    units row (no id cell to tell it by); numbers without units are refused, the line saying how to state them."""
    from lagda.io.formats import read_raw

    hours = np.arange(6)
    seconds = 1740787200.0 + 3600.0 * hours  # 2025-03-01T00:00:00Z on
    iso = ["id,time,lon,lat"] + [f"a,2025-03-01T{h:02d}:00:00Z,{-40 + 0.01 * h},{34 + 0.02 * h}" for h in hours]
    units_row = ["ID,time,longitude,latitude", ",seconds since 1970-01-01T00:00:00Z,degrees_east,degrees_north"] + [
        f"a,{t:.0f},{-40 + 0.01 * h},{34 + 0.02 * h}" for h, t in zip(hours, seconds)]
    days = (seconds + 631152000.0) / 86400.0  # 1950-01-01 is 631,152,000 s before 1970
    csvp = ["ID,time (days since 1950-01-01),longitude (degrees_east),latitude (degrees_north)"] + [
        f"a,{float(d)!r},{-40 + 0.01 * h},{34 + 0.02 * h}" for h, d in zip(hours, days)]
    read = {}
    for name, lines in (("iso", iso), ("units_row", units_row), ("csvp", csvp)):
        (tmp_path / f"{name}.csv").write_text("\n".join(lines) + "\n")
        read[name] = read_raw(tmp_path / f"{name}.csv")
    assert read["iso"].physical_time and read["iso"].times[0].tolist() == seconds.tolist()
    for name, units in (("units_row", "seconds since 1970-01-01T00:00:00Z"), ("csvp", "days since 1950-01-01")):
        assert read[name].physical_time and f"times read as {units}" in read[name].notes
        np.testing.assert_allclose(read[name].times[0], seconds, rtol=0, atol=1e-3)
        np.testing.assert_array_equal(read[name].positions[0], read["iso"].positions[0])
    one = ["time,latitude,longitude", "UTC,degrees_north,degrees_east"] + [  # one drifter: no id column
        f"{t},{lat},{lon}" for _, t, lon, lat in (line.split(",") for line in iso[1:])]
    (tmp_path / "one.csv").write_text("\n".join(one) + "\n")
    with pytest.warns(UserWarning, match="read as one drifter"):
        np.testing.assert_array_equal(read_raw(tmp_path / "one.csv").times[0], seconds)
    (tmp_path / "bare.csv").write_text("\n".join(["id,time,lon,lat"] + units_row[2:]) + "\n")
    with pytest.raises(ValueError, match=r"or numbers with their CF units under the header or in the column's name, "
                                         r"such as 'time \(seconds since 1970-01-01T00:00:00Z\)'$"):
        read_raw(tmp_path / "bare.csv")


def test_a_csv_without_an_id_column_takes_the_drifter_from_a_platform_column_and_says_so(tmp_path):
    """OSMC's ERDDAP names a drifter by platform_code (beside a platform_id of another numbering): read as the
    plain id column, with a warning naming the column taken; a CSV with no column naming the drifter is refused
    in one line that lists its columns."""
    from lagda.io.formats import read_raw

    rows = [(f"30023406000000{i}", 900 + i, f"2025-03-01T{h:02d}:00:00Z", -40 + 0.01 * h + i, 34 + 0.02 * h)
            for i in range(2) for h in range(6)]
    (tmp_path / "plain.csv").write_text("id,time,lon,lat\n" + "".join(
        f"{code},{t},{lon},{lat}\n" for code, _, t, lon, lat in rows))
    (tmp_path / "osmc.csv").write_text(
        "platform_id,platform_type,platform_code,time,latitude,longitude\n,,,UTC,degrees_north,degrees_east\n" +
        "".join(f"{pid},DRIFTING BUOYS,{code},{t},{lat},{lon}\n" for code, pid, t, lon, lat in rows))
    plain = read_raw(tmp_path / "plain.csv")
    with pytest.warns(UserWarning, match="osmc.csv: no id column; assumed platform_code names each fix's drifter"):
        osmc = read_raw(tmp_path / "osmc.csv")
    assert osmc.ids.tolist() == plain.ids.tolist() == ["300234060000000", "300234060000001"]
    for got, want in zip(osmc.positions + osmc.times, plain.positions + plain.times):
        np.testing.assert_array_equal(got, want)
    (tmp_path / "anonymous.csv").write_text("name,time,lon,lat\na,2025-03-01T00:00:00Z,-40,34\n")
    with pytest.raises(ValueError, match=r"anonymous.csv: a CSV of fixes needs a column naming each fix's drifter "
                                         r"\(id, or one of platform_code, .*\); its columns are name,time,lon,lat$"):
        read_raw(tmp_path / "anonymous.csv")
    # a file of time and positions alone is one drifter (a drifter per file, as some programs export them)
    (tmp_path / "buoy_17.csv").write_text("time,lon,lat\n2025-03-01T00:00:00Z,-40,34\n2025-03-01T01:00:00Z,-40,34\n")
    with pytest.warns(UserWarning, match="no column names the drifters .*: read as one drifter, named by the file's"):
        alone = read_raw(tmp_path / "buoy_17.csv")
    assert alone.ids.tolist() == ["buoy_17"] and len(alone.times[0]) == 2


def _fixes_csv(delimiter=",", decimal=".", header="id,time,lon,lat") -> str:
    """Returns a CSV of two drifters' six hourly fixes with `header` (names joined by commas), its values written
    with `delimiter` and `decimal`."""
    rows = [header.replace(",", delimiter)]
    for i in range(2):
        for h in range(6):
            lon, lat = f"{-40 + 0.01 * h + i:.4f}", f"{34 + 0.02 * h:.4f}"
            rows.append(delimiter.join([f"30023406000000{i}", f"2025-03-01T{h:02d}:00:00Z",
                                        lon.replace(".", decimal), lat.replace(".", decimal)]))
    return "\n".join(rows) + "\n"


def _same_fixes(raw, plain):
    assert raw.ids.tolist() == plain.ids.tolist() and raw.coordinates == "lonlat" and raw.physical_time
    for got, want in zip(raw.positions + raw.times, plain.positions + plain.times):
        np.testing.assert_array_equal(got, want)


def test_spreadsheet_csvs_read_as_the_plain_csv_and_say_their_delimiter(tmp_path):
    """What spreadsheets write: Excel's "CSV UTF-8" starts with a byte-order mark (ignored, compressed too), R's
    write.csv quotes its header and strings, European Excel separates by semicolons with decimal commas, others by
    tabs (a .tsv is a track file of a folder): each reads as the plain CSV of the same fixes, a note naming a
    delimiter other than the comma."""
    import gzip

    from lagda.io.formats import read_raw
    from lagda.io.sources import track_files

    (tmp_path / "plain.csv").write_text(_fixes_csv())
    plain = read_raw(tmp_path / "plain.csv")
    assert plain.notes == ()
    (tmp_path / "bom.csv").write_bytes(_fixes_csv().encode("utf-8-sig"))
    (tmp_path / "bom.csv.gz").write_bytes(gzip.compress(_fixes_csv().encode("utf-8-sig")))
    (tmp_path / "europe.csv").write_text(_fixes_csv(";", ","))
    (tmp_path / "tabs.tsv").write_text(_fixes_csv("\t"))
    lines = _fixes_csv().splitlines()  # R's write.csv: the header and the strings quoted
    (tmp_path / "r.csv").write_text("\n".join(['"id","time","lon","lat"'] + [
        '"{}","{}",{},{}'.format(*line.split(",")) for line in lines[1:]]) + "\n")
    for name, notes in (("bom.csv", ()), ("bom.csv.gz", ()), ("r.csv", ()),
                        ("europe.csv", ("columns separated by semicolons, a comma in a number read as its decimal "
                                        "point",)),
                        ("tabs.tsv", ("columns separated by tabs",))):
        raw = read_raw(tmp_path / name)
        _same_fixes(raw, plain)
        assert raw.notes == notes, name
    assert str(tmp_path / "tabs.tsv") in track_files(tmp_path)


def test_a_csv_time_column_of_another_common_name_is_read_and_said(tmp_path):
    """A time column named datetime, date_time or timestamp (any case, with ERDDAP's units) is the time column,
    said in a warning; a CSV with none is refused in one line that lists its columns."""
    from lagda.io.formats import read_raw

    (tmp_path / "plain.csv").write_text(_fixes_csv())
    plain = read_raw(tmp_path / "plain.csv")
    for column in ("datetime", "Date_Time", "timestamp (UTC)"):
        (tmp_path / "t.csv").write_text(_fixes_csv(header=f"id,{column},lon,lat"))
        with pytest.warns(UserWarning, match=rf"t.csv: no time column; assumed {column.split(' ')[0].lower()} "
                                             "names each fix's time"):
            _same_fixes(read_raw(tmp_path / "t.csv"), plain)
    (tmp_path / "when.csv").write_text(_fixes_csv(header="id,when,lon,lat"))
    with pytest.raises(ValueError, match=r"when.csv: a CSV of fixes needs a column naming each fix's time \(time, or "
                                         r"one of datetime, .*\); its columns are id,when,lon,lat$"):
        read_raw(tmp_path / "when.csv")


def test_a_csv_without_fixes_is_refused_and_rows_without_a_position_or_time_are_counted(tmp_path):
    """A CSV of a header alone (or of ERDDAP's header and units rows) holds no fixes, and says so; rows with a
    blank or NaN longitude, latitude or time are left out and counted in a note (a -999 is a value: the cleaning
    judges it)."""
    from lagda.io.formats import read_raw

    for name, text in (("empty.csv", "id,time,lon,lat\n"),
                       ("erddap.csv", "ID,time,longitude,latitude\n,UTC,degrees_east,degrees_north\n")):
        (tmp_path / name).write_text(text)
        with pytest.raises(ValueError, match=rf"{name}: holds no fixes \(a header line and no rows\)$"):
            read_raw(tmp_path / name)
    lines = _fixes_csv().splitlines()
    lines[2] = "300234060000000,2025-03-01T01:00:00Z,,34.02"
    lines[3] = "300234060000000,2025-03-01T02:00:00Z,-39.98,NaN"
    lines[8] = "300234060000001,,-38.99,34.02"
    lines[9] = "300234060000001,2025-03-01T02:00:00Z,-999,34.04"
    (tmp_path / "gaps.csv").write_text("\n".join(lines) + "\n")
    raw = read_raw(tmp_path / "gaps.csv")
    assert raw.notes == ("3 rows with no position or time left out",)
    assert [len(t) for t in raw.times] == [4, 5] and raw.positions[1][1, 0] == -999
    assert np.all(np.isfinite(np.concatenate(raw.positions))) and np.all(np.isfinite(np.concatenate(raw.times)))


def test_lonlat_netcdf_with_model_times_is_refused_by_the_reader(tmp_path):
    """Positions in degrees with a time without CF units are refused as the file is read (read_raw, which
    lagda map reads through), in the words lagda assimilate gives, not at the mapping."""
    from lagda.io.formats import read_raw

    tracks = _physical()
    xr.Dataset({"lon": (("trajectory", "obs"), tracks.positions[..., 0] * 10 - 40, {"units": "degrees_east"}),
                "lat": (("trajectory", "obs"), tracks.positions[..., 1] * 8 + 30, {"units": "degrees_north"}),
                "time": (("trajectory", "obs"), tracks.times)},
               attrs={"featureType": "trajectory"}).to_netcdf(tmp_path / "no_units.nc")
    with pytest.raises(ValueError, match=r'no_units.nc: positions are lon/lat but time has no CF units \("seconds '
                                         r'since \.\.\.", or ISO datetimes in CSV\)$'):
        read_raw(tmp_path / "no_units.nc")


@pytest.mark.parametrize("content,message", [
    ("id,time,lon,lat\na,0.5,-40,34\na,0.6,-40,34\n", "ISO 8601"),
    ("id,time,x,y\na,2025-03-01T00:00:00,0.1,0.2\n", "model times"),
    ("id,time,lon,lat\na,not-a-date,-40,34\n", "neither numbers nor ISO 8601"),
])
def test_csv_refusals_are_one_line(tmp_path, content, message):
    (tmp_path / "t.csv").write_text(content)
    with pytest.raises(ValueError, match=message) as info:
        read_tracks(tmp_path / "t.csv")
    assert "\n" not in str(info.value)


def test_netcdf_refusals_are_one_line(tmp_path):
    tracks = _physical()
    ds = _ragged_dataset(tracks, with_attributes=True)
    ds["time"] = ("obs", np.arange(ds.sizes["obs"], dtype=float), {"units": "1"})
    ds.to_netcdf(tmp_path / "lonlat_model_time.nc")
    with pytest.raises(ValueError, match="no CF units"):
        read_tracks(tmp_path / "lonlat_model_time.nc")
    ds["time"] = ("obs", np.arange(ds.sizes["obs"], dtype=float),
                  {"units": "days since 2000-01-01", "calendar": "360_day"})
    ds.to_netcdf(tmp_path / "calendar.nc")
    with pytest.raises(ValueError, match="calendar '360_day'"):
        read_tracks(tmp_path / "calendar.nc")
    with pytest.raises(ValueError, match="apply to physical tracks"):
        read_tracks("lagda/shipped/example_tracks.nc", box=BOX)


def test_old_files_are_still_read():
    old = read_tracks("lagda/shipped/example_tracks.nc")  # format 1: model units, time with axis T
    assert old.mapping is None and old.n_field == 8 and old.true_coef.shape[0] == 8
    data = read_tracks("data/example_small.nc")
    assert data.mapping is None and data.n_field == 16


def test_cli_learned_method_on_physical_tracks_is_one_line(tmp_path, capsys):
    write_tracks(_physical(), tmp_path / "t.nc")
    code = cli.main(["assimilate", "--tracks", str(tmp_path / "t.nc"), "--out", str(tmp_path / "r.nc"), "--method",
                     "hybrid"])  # the default on such a file is the ocean path; a learned method is asked for
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "steady model" in err and "--method linear" in err
    assert not (tmp_path / "r.nc").exists()


def test_cli_export_places_a_dataset_in_the_world_and_refuses_half_a_mapping(tmp_path, capsys):
    out = tmp_path / "e.nc"
    code = cli.main(["export-tracks", "--tracks", "data/example_small.nc", "--out", str(out), "--n-fields", "2",
                     "--box", *map(str, BOX), "--start", "2025-03-01", "--time-scale", "3.6e7", "--layout", "ragged"])
    assert code == 0 and "2 trajectories, 2000 fixes, ragged layout" in capsys.readouterr().out
    back = read_tracks(out)
    assert back.mapping.box == BOX and back.true_coef.shape[0] == 2 and back.n_field == 2
    code = cli.main(["export-tracks", "--tracks", "data/example_small.nc", "--out", str(tmp_path / "f.nc"), "--box",
                     *map(str, BOX)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "--box, --start and --time-scale together" in err and not (tmp_path / "f.nc").exists()


def test_shipped_gdp_like_example_is_what_data_readme_says():
    import netCDF4

    tracks = read_tracks("lagda/shipped/gdp_like.nc")
    mapping = tracks.mapping
    # written as another tool would: no lagda mapping (box and time scale inferred), no release points, no truth
    assert {"box", "time_scale"} <= set(mapping.inferred) and tracks.release is None and tracks.true_coef is None
    assert tracks.n_trajectory == 8 and tracks.n_field == 1 and mapping.coordinates == "lonlat"
    for i in range(8):
        hours = np.diff(mapping.time_from_model(tracks.times[i][np.isfinite(tracks.times[i])])) / HOUR
        steps = np.round(hours)
        assert np.allclose(hours, steps, atol=1e-6) and steps.min() == 1  # hourly fixes ...
        gaps = steps[steps > 1] - 1
        assert len(gaps) == 6 and 1 <= gaps.min() and gaps.max() <= 12  # ... with 6 gaps of 1-12 missing fixes
    window = (np.nanmax(tracks.times) - np.nanmin(tracks.times)) * mapping.time_scale_s / 86400
    assert 29 < window <= 30 and iso_time(mapping.time_origin).startswith("2025-03-01T")
    lon, lat = mapping.from_model(tracks.positions[..., 0], tracks.positions[..., 1])
    assert -45 < np.nanmin(lon) and np.nanmax(lon) < -35 and 30 < np.nanmin(lat) and np.nanmax(lat) < 38
    with netCDF4.Dataset("lagda/shipped/gdp_like.nc") as nc:  # clouddrift's layout
        assert (nc["rowsize"].dimensions == ("traj",) and nc["lon"].dimensions == ("obs",)
                and nc["id"].cf_role == "trajectory_id")
        assert not [name for name in nc.ncattrs() if name.startswith("lagda_mapping")]


def test_projected_metres_round_trip(tmp_path):
    tracks = _physical()
    projected = dataclasses.replace(tracks, mapping=Mapping((-2e5, 3e5, 1e5, 6e5), "projected", ORIGIN, 3.6e7))
    write_tracks(projected, tmp_path / "m.nc")
    with xr.open_dataset(tmp_path / "m.nc") as ds:
        assert ds["x"].attrs["units"] == "m" and ds["x"].attrs["standard_name"] == "projection_x_coordinate"
        np.testing.assert_allclose(ds["x"].values[0, 0], -2e5 + 5e5 * tracks.positions[0, 0, 0])
    back = read_tracks(tmp_path / "m.nc")
    assert_close(back, projected)
    assert back.mapping.coordinates == "projected" and back.mapping.lengths_m == (5e5, 5e5)


def test_featuretype_trajectory_without_ragged_attributes_is_read_from_its_dimensions(tmp_path):
    tracks = _physical()
    ds = _ragged_dataset(tracks, with_attributes=False)
    ds.attrs["featureType"] = "trajectory"  # as clouddrift's adapters write: no sample_dimension, no cf_role
    ds.to_netcdf(tmp_path / "r.nc")
    with pytest.warns(UserWarning, match=r"without CF ragged attributes .*rowsize\(traj\)"):
        back = read_tracks(tmp_path / "r.nc", box=BOX, time_scale=3.6e7)
    np.testing.assert_allclose(back.positions, tracks.positions, atol=1e-12)
    assert back.trajectory_id.tolist() == tracks.trajectory_id.tolist()


def test_duplicated_and_unsorted_times_are_cleaned_not_refused_and_ids_print_as_written(tmp_path):
    lines = ["id,time,lon,lat"]
    for k in (0, 2, 1, 3, 3, 4):  # hour 2 before hour 1, hour 3 twice (an exact duplicate)
        lines.append(f"300234060000000,2025-03-01T0{k}:00:00Z,{-40 + 0.01 * k},34")
    (tmp_path / "t.csv").write_text("\n".join(lines) + "\n")
    tracks = read_tracks(tmp_path / "t.csv")
    np.testing.assert_allclose(np.diff(tracks.times[0]) * tracks.mapping.time_scale_s / HOUR, [1, 1, 1, 1])
    assert tracks.clean.exact_duplicates_dropped == 1 and tracks.clean.trajectories_sorted == 1
    assert any("times sorted in 1 trajectory" in note for note in tracks.notes)
    with pytest.raises(ValueError, match=r"^trajectory 300234060000000: times are not strictly increasing$"):
        pack_tracks([np.array([0.0, 0.0])], [np.zeros((2, 2))], np.array([300234060000000]), [0])


def test_gdp_hourly_files_of_a_folder_read_as_the_one_ragged_file(tmp_path):
    """The GDP's hourly collection as NCEI serves it, a file per drifter (ID, positions over (traj, obs), no
    featureType, -1e34 stored for missing values, a drogue_lost_date per drifter), read from its folder or as a
    list of files: the ragged file's fixes, the missing ones as missing, undrogued from each drogue's loss; the
    layout assumption is said once for all the files, not once per file."""
    from lagda.examples import shipped
    from lagda.io.clean import clean_fixes
    from lagda.io.formats import read_raw
    from lagda.testing import write_gdp_hourly_files

    reference = read_raw(shipped("gdp_like.nc"))
    lost = reference.times[2][100]
    paths = write_gdp_hourly_files(shipped("gdp_like.nc"), tmp_path / "gdp", lost={2: lost}, missing={0: [5, 6]})
    with pytest.warns(UserWarning) as caught:
        folder = read_raw(tmp_path / "gdp")
    assert [str(w.message).split(" (each): ", 1)[1] for w in caught] == [
        "no featureType attribute; assumed a trajectory array longitude('traj', 'obs') (incomplete multidimensional "
        "layout)"]
    with pytest.warns(UserWarning):
        listed = read_raw(paths[::-1])  # given in another order: drifters in the order given
    assert folder.ids.tolist() == [300234010000000 + i for i in range(8)] == listed.ids.tolist()[::-1]
    for i in range(8):
        times, positions = reference.times[i].copy(), reference.positions[i].copy()
        if i == 0:
            times[[5, 6]], positions[[5, 6]] = np.nan, np.nan
        np.testing.assert_array_equal(folder.times[i], times)
        np.testing.assert_array_equal(folder.positions[i], positions)
        np.testing.assert_array_equal(folder.per_fix["drogue_status"][i], (reference.times[i] < lost) | (i != 2))
    cleaned, report = clean_fixes(folder)
    assert report.missing_times_dropped == 2 and report.undrogued_dropped == len(reference.times[2]) - 100
    assert folder.notes == ("read 8 files: 8 drifters", "drogue_status from each drifter's drogue_lost_date "
                            "(drogued before it) (8 of the files)")
    tracks = read_tracks(tmp_path / "gdp")  # the notes reach the user
    assert tracks.notes[:2] == folder.notes and tracks.clean.undrogued_dropped == report.undrogued_dropped


def test_a_drifter_in_several_files_is_one_drifter_and_bad_sets_of_files_are_refused(tmp_path):
    """Monthly downloads of one drifter (the same id in two CSV files, one time in both) join into one track whose
    shared time is one fix; files without ids keep theirs apart; a folder without track files, a missing file and
    tracks in model units among several files are refused in one line."""
    from lagda.examples import shipped
    from lagda.io.formats import read_raw
    from lagda.io.sources import track_files

    rows = [f"300234060000000,2025-03-01T{h:02d}:00:00Z,{-40 + 0.01 * h},34" for h in range(8)]
    (tmp_path / "march_a.csv").write_text("\n".join(["id,time,lon,lat", *rows[:5]]) + "\n")
    (tmp_path / "march_b.csv").write_text("\n".join(["id,time,lon,lat", *rows[4:]]) + "\n")
    (tmp_path / "notes.txt").write_text("not a track file\n")
    tracks = read_tracks(tmp_path)
    assert tracks.n_trajectory == 1 and np.isfinite(tracks.times[0]).sum() == 8
    assert tracks.clean.exact_duplicates_dropped == 1
    assert tracks.notes[0] == "read 2 files: 1 drifters, 1 of them named in more than one file (their fixes joined)"
    grid = _physical(n_traj=1)
    for name in ("a.nc", "b.nc"):  # no id variable: the file names the trajectory
        xr.Dataset({"lon": (("trajectory", "obs"), grid.positions[..., 0] * 10 - 40, {"units": "degrees_east"}),
                    "lat": (("trajectory", "obs"), grid.positions[..., 1] * 8 + 30, {"units": "degrees_north"}),
                    "time": (("trajectory", "obs"), grid.times * 3.6e4, {"units": "seconds since 2025-03-01"})},
                   attrs={"featureType": "trajectory"}).to_netcdf(tmp_path / name)
    assert read_raw([tmp_path / "a.nc", tmp_path / "b.nc"]).ids.tolist() == ["a.nc", "b.nc"]
    (tmp_path / "empty").mkdir()
    for source, error, message in [
            (tmp_path / "empty", ValueError, r"empty: a folder with no track file \(names ending in .nc, "),
            ([tmp_path / "a.nc", tmp_path / "gone.nc"], FileNotFoundError, r"^no such track file: .*gone.nc$"),
            ([tmp_path / "a.nc", shipped("example_tracks.nc")], ValueError,
             r"example_tracks.nc: several files are read together only as physical .*this one is in model units$")]:
        with pytest.raises(error, match=message) as info:
            read_raw(source)
        assert "\n" not in str(info.value)
    assert track_files(tmp_path) == [str(tmp_path / n) for n in ("a.nc", "b.nc", "march_a.csv", "march_b.csv")]


def test_single_trajectory_files_with_quality_flags_read_as_their_drifters(tmp_path):
    """A file per drifter without a trajectory dimension, as SOCIB writes one (CF single trajectory: a char id
    with cf_role, LAT/LON over time with QC_LAT/QC_LON flags linked by ancillary_variables) and as the Copernicus
    in-situ files lay one out (TIME over TIME, LATITUDE/LONGITUDE over POSITION, days since 1950, the id in
    platform_code, no featureType, POSITION_QC and TIME_QC linked by their names only): each is one drifter with
    its fixes; the fixes their flags call bad or spike are missing, and a note counts them."""
    from lagda.examples import shipped
    from lagda.io.formats import read_raw

    reference = read_raw(shipped("gdp_like.nc"))
    t, p = reference.times[0], reference.positions[0]
    flags = np.ones(len(t), np.int8)
    flags[[10, 20, 30]], flags[40] = 6, 4  # three spikes and a bad fix
    meanings = {"flag_values": np.array([0, 1, 2, 3, 4, 6, 9], np.int8),
                "flag_meanings": "no_qc_performed good_data probably_good_data probably_bad_data bad_data spike "
                                 "missing_value"}
    xr.Dataset({"trajectory": ((), "svp067_scb-svp030", {"cf_role": "trajectory_id"}),
                "time": ("time", t, {"units": "seconds since 1970-01-01 00:00:00", "standard_name": "time"}),
                "LAT": ("time", p[:, 1], {"standard_name": "latitude", "units": "degrees_north",
                                          "ancillary_variables": "QC_LAT"}),
                "LON": ("time", p[:, 0], {"standard_name": "longitude", "units": "degrees_east",
                                          "ancillary_variables": "QC_LON"}),
                "QC_LAT": ("time", flags, meanings), "QC_LON": ("time", flags, meanings)},
               attrs={"featureType": "trajectory"}).to_netcdf(tmp_path / "socib.nc")
    t1, p1 = reference.times[1], reference.positions[1]
    xr.Dataset({"TIME": ("TIME", (t1 - parse_time("1950-01-01T00:00:00Z")) / 86400.0,
                         {"units": "days since 1950-01-01T00:00:00Z", "standard_name": "time", "axis": "T"}),
                "LATITUDE": ("POSITION", p1[:, 1], {"standard_name": "latitude", "units": "degrees_north"}),
                "LONGITUDE": ("POSITION", p1[:, 0], {"standard_name": "longitude", "units": "degrees_east"}),
                # the Copernicus flags, linked by their names only (reference table 2; 4 bad_data)
                "POSITION_QC": ("POSITION", np.where(np.isin(np.arange(len(t1)), [5, 6]), 4, 1).astype(np.int8),
                                {"flag_values": np.array([0, 1, 2, 3, 4, 5, 7, 8, 9], np.int8),
                                 "flag_meanings": "no_qc_performed good_data probably_good_data "
                                                  "bad_data_that_are_potentially_correctable bad_data value_changed "
                                                  "nominal_value interpolated_value missing_value"}),
                "TIME_QC": ("TIME", np.full(len(t1), 1, np.int8))},  # no meanings: the table's, all good
               attrs={"platform_code": "6101234"}).to_netcdf(tmp_path / "GL_TS_DB_6101234.nc")
    with pytest.warns(UserWarning, match=r"no featureType attribute; assumed a single trajectory LONGITUDE"):
        raw = read_raw(tmp_path)
    assert raw.ids.tolist() == ["6101234", "svp067_scb-svp030"]
    expected = p.copy()
    expected[[10, 20, 30, 40]] = np.nan
    np.testing.assert_array_equal(raw.positions[1], expected)
    np.testing.assert_array_equal(raw.times[1], t)
    np.testing.assert_allclose(raw.times[0], t1, rtol=0, atol=1e-4)
    expected1 = p1.copy()
    expected1[[5, 6]] = np.nan
    np.testing.assert_array_equal(raw.positions[0], expected1)
    # TIME_QC, all 1 (good) over as many entries as the fixes, is no ragged count either
    assert raw.notes[1] == ("quality flags: 2 fixes flagged bad by POSITION_QC (bad_data_that_are_potentially_"
                            "correctable, bad_data, missing_value, by its name), TIME_QC (probably_bad, bad, missing, "
                            "by its name) read as missing (1 of the files)")
    assert raw.notes[2] == ("quality flags: 4 fixes flagged bad by QC_LON (probably_bad_data, bad_data, spike, "
                            "missing_value), QC_LAT (probably_bad_data, bad_data, spike, missing_value) read as "
                            "missing (1 of the files)")


def write_erddap_netcdf(path, raw, layout: str, feature: bool = True, cf_role: bool = True, lost=None) -> None:
    """Writes the fixes of `raw` as ERDDAP's tabledap serves a trajectory dataset in netCDF-3: `.nc`, a flat table
    over `row` (ID a char array over (row, ID_strlen), each fix a row), or `.ncCF`, a contiguous ragged array
    (ID over (trajectory, ID_strlen), rowSize with sample_dimension); with or without featureType and cf_role;
    with `lost` (seconds since 1970 per drifter, NaN: never), a table's drogue_lost_date on every row."""
    import netCDF4

    ids = [str(i) for i in raw.ids]
    width = max(map(len, ids))
    sizes = [len(t) for t in raw.times]
    with netCDF4.Dataset(path, "w", format="NETCDF3_CLASSIC") as nc:
        nc.createDimension("ID_strlen", width)
        rows = "row" if layout == "nc" else "obs"
        nc.createDimension(rows, sum(sizes))
        owner = rows if layout == "nc" else "trajectory"
        if layout == "ncCF":
            nc.createDimension("trajectory", len(ids))
            count = nc.createVariable("rowSize", "i4", ("trajectory",))
            count.sample_dimension = "obs"
            count[:] = sizes
        id_var = nc.createVariable("ID", "S1", (owner, "ID_strlen"))
        id_var.long_name = "Global Drifter Program Buoy ID"
        if cf_role:
            id_var.cf_role = "trajectory_id"
        id_var[:] = netCDF4.stringtochar(np.array(np.repeat(ids, sizes) if layout == "nc" else ids, f"S{width}"))
        for name, values, units in (("time", np.concatenate(raw.times), "seconds since 1970-01-01T00:00:00Z"),
                                    ("latitude", np.concatenate(raw.positions)[:, 1], "degrees_north"),
                                    ("longitude", np.concatenate(raw.positions)[:, 0], "degrees_east")):
            var = nc.createVariable(name, "f8", (rows,))
            var.units, var.standard_name = units, name
            var[:] = values
        if lost is not None:
            var = nc.createVariable("drogue_lost_date", "f8", (rows,), fill_value=np.nan)
            var.units = "seconds since 1970-01-01T00:00:00Z"
            var[:] = np.repeat(lost, sizes)
        nc.cdm_data_type, nc.cdm_trajectory_variables = "Trajectory", "ID"
        if feature:
            nc.featureType = "Trajectory"


def test_erddap_netcdf_tables_read_as_their_drifters(tmp_path):
    """ERDDAP's tabledap netCDF downloads of a trajectory dataset: `.nc` (a flat table, a row per fix, the drifter
    id a char array per row) and `.ncCF` (a contiguous ragged array) read as the drifters of the same fixes; a
    table without featureType and cf_role is read the same, with a warning naming the id variable; a table's
    drogue_lost_date on each row makes its fixes from that time undrogued. A table of one drifter is that
    drifter, its id the one value of ID (not its rows' ids joined)."""
    from lagda.examples import shipped
    from lagda.io.formats import read_raw
    from lagda.io.tracks import id_text

    reference = read_raw(shipped("gdp_like.nc"))
    cases = {"table.nc": ("nc", True, True), "cf.nc": ("ncCF", True, True), "bare.nc": ("nc", False, False)}
    for name, (layout, feature, cf_role) in cases.items():
        write_erddap_netcdf(tmp_path / name, reference, layout, feature, cf_role)
    with pytest.warns(UserWarning, match=r"bare.nc: no featureType attribute; assumed a table of fixes, one a row, "
                                         r"8 trajectories told apart by ID\('row',\)"):
        bare = read_raw(tmp_path / "bare.nc")
    for raw in (read_raw(tmp_path / "table.nc"), read_raw(tmp_path / "cf.nc"), bare):
        assert [id_text(i) for i in raw.ids] == [id_text(i) for i in reference.ids]
        assert raw.coordinates == "lonlat" and raw.physical_time
        for got, want in zip(raw.times + raw.positions, reference.times + reference.positions):
            np.testing.assert_array_equal(got, want)
    lost = np.full(len(reference.ids), np.nan)
    lost[2] = reference.times[2][40]  # the third drifter loses its drogue at its 41st fix
    write_erddap_netcdf(tmp_path / "lost.nc", reference, "nc", lost=lost)
    raw = read_raw(tmp_path / "lost.nc")
    status = raw.per_fix["drogue_status"]
    assert status[2][:40].min() == 1 and status[2][40:].max() == 0
    assert all(s.min() == 1 for k, s in enumerate(status) if k != 2)
    assert "drogue_status from each drifter's drogue_lost_date (drogued before it)" in raw.notes
    one = dataclasses.replace(reference, ids=reference.ids[:1], times=reference.times[:1],
                              positions=reference.positions[:1])
    for cf_role in (True, False):  # named by its cf_role variable, or by ID without one
        write_erddap_netcdf(tmp_path / f"one_{cf_role}.nc", one, "nc", cf_role=cf_role)
        raw = read_raw(tmp_path / f"one_{cf_role}.nc")
        assert [id_text(i) for i in raw.ids] == [id_text(reference.ids[0])] and raw.ids_given
        np.testing.assert_array_equal(raw.positions[0], reference.positions[0])


def test_a_csv_drogue_lost_date_or_drogue_status_column_leaves_undrogued_fixes_out(tmp_path):
    """ERDDAP's GDP tables repeat each drifter's drogue_lost_date on its rows: fixes from that time on are
    undrogued, left out and counted; an empty date is a drogue never lost. A drogue_status column is read as is."""
    lost = {"300234060000000": "2025-03-01T05:00:00Z", "300234060000001": ""}
    rows = [f"{i},2025-03-01T{h:02d}:00:00Z,{-40 + 0.01 * h},34,{lost[i]}" for i in lost for h in range(8)]
    (tmp_path / "erddap.csv").write_text("\n".join(["ID,time,longitude,latitude,drogue_lost_date",
                                                    ",UTC,degrees_east,degrees_north,UTC", *rows]) + "\n")
    tracks = read_tracks(tmp_path / "erddap.csv")
    assert tracks.clean.undrogued_dropped == 3 and np.isfinite(tracks.times).sum(axis=1).tolist() == [5, 8]
    assert tracks.notes[0] == "drogue_status from each drifter's drogue_lost_date (drogued before it)"
    # an empty column (ERDDAP writes it for drifters never undrogued) says so, not that a status was taken from it
    (tmp_path / "empty.csv").write_text("\n".join(["ID,time,longitude,latitude,drogue_lost_date", *(
        row.rsplit(",", 1)[0] + "," for row in rows)]) + "\n")
    empty = read_tracks(tmp_path / "empty.csv")
    assert empty.notes[0] == "drogue_lost_date holds no date: every fix taken as drogued"
    assert empty.clean.undrogued_dropped == 0
    status = [f"7,2025-03-01T{h:02d}:00:00Z,{-40 + 0.01 * h},34,{int(h < 6)}" for h in range(8)]
    (tmp_path / "status.csv").write_text("\n".join(["id,time,lon,lat,drogue_status", *status]) + "\n")
    assert read_tracks(tmp_path / "status.csv").clean.undrogued_dropped == 2


def test_gdp_six_hourly_text_file_reads_as_its_drifters(tmp_path):
    """The GDP's 6-hourly interpolated text files (`buoydata_*.dat`: no header, ID MM DD.ddd YYYY LAT LON(0..360)
    SST VE VN SPD VAR.LAT VAR.LON VAR.TEMP, Fortran D exponents, a drifter's rows newest first, 999.99 missing):
    each drifter its fixes at their times, a missing position missing, the variances as errors in degrees; the
    same gzip-compressed."""
    from lagda.examples import shipped
    from lagda.io.formats import read_raw

    reference = read_raw(shipped("gdp_like.nc"))
    lines, kept = [], []
    for i in range(3):
        t, p = reference.times[i], reference.positions[i]
        six = np.flatnonzero(np.mod(t, 6 * HOUR) == 0)
        kept.append(six)
        for k in six[::-1]:
            stamp = np.datetime64(int(t[k]), "s").astype(object)
            day = stamp.day + stamp.hour / 24
            lon, lat = (999.99, 999.99) if (i, k) == (1, six[3]) else (float(p[k, 0] % 360), float(p[k, 1]))
            lines.append(f"{7000 + i:8d} {stamp.month:2d} {day:6.3f} {stamp.year} {lat!r} {lon!r} 28.099 -6.728 "
                         f"0.460 6.744 0.40000D-05 0.90000E-05 0.13433D-02")
    (tmp_path / "buoydata_7001_7003.dat").write_text("\n".join(lines) + "\n")
    raw = read_raw(tmp_path / "buoydata_7001_7003.dat")
    assert raw.ids.tolist() == [7000, 7001, 7002] and raw.coordinates == "lonlat" and raw.physical_time
    for i in range(3):
        order = np.argsort(raw.times[i])  # newest first in the file: the cleaning sorts them
        np.testing.assert_array_equal(raw.times[i][order], reference.times[i][kept[i]])
        expected = reference.positions[i][kept[i]] % [360.0, 1e9]
        if i == 1:
            expected[3] = np.nan
        np.testing.assert_allclose(raw.positions[i][order], expected, rtol=0, atol=1e-12)
    np.testing.assert_allclose(raw.per_fix["err_lat"][0], 2e-3)
    np.testing.assert_allclose(raw.per_fix["err_lon"][0], 3e-3)
    import gzip  # as AOML serves them, gzip-compressed; a compressed CSV reads as the plain one too

    text = (tmp_path / "buoydata_7001_7003.dat").read_bytes()
    (tmp_path / "buoydata_7001_7003.dat.gz").write_bytes(gzip.compress(text))
    rows = ["id,time,lon,lat"] + [f"7,2025-03-01T0{h}:00:00Z,{-40 + 0.01 * h},34" for h in range(5)]
    (tmp_path / "t.csv.gz").write_bytes(gzip.compress("\n".join(rows).encode()))
    packed = read_raw(tmp_path / "buoydata_7001_7003.dat.gz")
    for name in ("times", "positions"):
        for a, b in zip(getattr(packed, name), getattr(raw, name)):
            np.testing.assert_array_equal(a, b)
    assert read_raw(tmp_path / "t.csv.gz").positions[0].shape == (5, 2)
