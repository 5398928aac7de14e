"""lagda.io.readers: one module per format behind one registry; a new format is one `Reader` and one line in
`registry.READERS`, read by `lagda.io` like every other (a toy JSON format here), and a file no reader knows is
refused in today's one line."""

import json

import numpy as np
import pytest

from lagda.io.cf_time import seconds_since_1970
from lagda.io.formats import read_raw, read_tracks
from lagda.io.readers import registry
from lagda.io.readers.reader import NOT_TRACKS, FileHead, Reader, group_rows
from lagda.io.sources import track_files
from lagda.io.tracks import RawTracks

# two drifters, six hourly fixes each, in the North Atlantic
FIXES = [(drifter, f"2025-03-01T{hour:02d}:00:00", -40.0 + 0.5 * k + 0.01 * hour, 33.0 + 0.02 * hour)
         for k, drifter in enumerate(("a", "b")) for hour in range(6)]


def read_json(head: FileHead) -> RawTracks:
    """The toy format's reader: `{"id": [...], "time": [ISO 8601...], "lon": [...], "lat": [...]}`, a fix a row."""
    with open(head.path) as handle:
        table = json.load(handle)
    seconds = seconds_since_1970(np.array(table["time"], dtype="datetime64[s]"))
    ids, times, positions, field, per_fix = group_rows(np.array(table["id"], str), seconds, table["lon"],
                                                       table["lat"])
    return RawTracks(times, positions, ids, field, "lonlat", True, per_fix=per_fix)


JSON = Reader("JSON", (".json",), lambda head: head.text.lstrip().startswith(b"{"), read_json)


def with_json(readers: list) -> list:
    """Returns the registry with the toy JSON reader in one line, before CSV (which recognises any file)."""
    return [*readers[:-1], JSON, readers[-1]]


@pytest.fixture
def json_file(tmp_path):
    path = tmp_path / "drifters.json"
    drifter, time, lon, lat = zip(*FIXES)
    path.write_text(json.dumps({"id": drifter, "time": time, "lon": lon, "lat": lat}))
    return path


def test_a_format_of_one_reader_and_one_registry_line_is_read_by_read_tracks(json_file, tmp_path, monkeypatch):
    """The toy format, registered in one line, reads into the same `Tracks` as the same fixes written as CSV: the
    dispatch, the cleaning and the mapping onto the model are the registry's, not the format's."""
    csv = tmp_path / "drifters.csv"
    csv.write_text("id,time,lon,lat\n" + "".join(f"{d},{t}Z,{x},{y}\n" for d, t, x, y in FIXES))
    monkeypatch.setattr(registry, "READERS", with_json(registry.READERS))
    tracks, expected = read_tracks(json_file), read_tracks(csv)
    assert tracks.n_trajectory == 2 and tracks.mapping.coordinates == "lonlat"
    assert list(tracks.trajectory_id) == ["a", "b"]
    np.testing.assert_array_equal(tracks.positions, expected.positions)
    np.testing.assert_array_equal(tracks.times, expected.times)
    assert tracks.notes == expected.notes


def test_a_folder_reads_the_files_of_every_registered_suffix(json_file, tmp_path, monkeypatch):
    """A folder's track files are those whose names end in a registered reader's suffix: the toy format's files
    join the folder once its line is in the registry, and are left out before."""
    (tmp_path / "notes.txt").write_text("not a track file\n")
    with pytest.raises(ValueError, match=r"a folder with no track file \(names ending in .nc, "):
        track_files(tmp_path)
    monkeypatch.setattr(registry, "READERS", with_json(registry.READERS))
    assert ".json" in registry.track_suffixes()
    assert track_files(tmp_path) == [str(json_file)]


def test_a_file_no_reader_knows_is_refused_in_todays_one_line(json_file, tmp_path, monkeypatch):
    """Without its registry line the toy file is refused as every unknown file is: CSV, the last reader, reads any
    file and says in one line what lagda reads; with no reader that recognises a file (a registry without CSV), the
    dispatch says the same line."""
    junk = tmp_path / "junk.bin"
    junk.write_bytes(bytes(range(256)) * 4)
    for path in (json_file, junk):
        with pytest.raises(ValueError) as refused:
            read_raw(path)
        assert str(refused.value) == f"{path} {NOT_TRACKS}"
    monkeypatch.setattr(registry, "READERS", [JSON])
    csv = tmp_path / "drifters.csv"
    csv.write_text("id,time,lon,lat\n")
    with pytest.raises(ValueError) as refused:
        registry.read_file(str(csv))
    assert str(refused.value) == f"{csv} {NOT_TRACKS}" and "\n" not in str(refused.value)


def test_each_format_goes_to_its_reader_by_its_content_not_its_name(tmp_path):
    """The first reader whose `recognises` holds reads a file, whatever its name: a gzip-compressed GDP 6-hourly
    file named .csv goes to the 6-hourly reader (decompressed first), a netCDF file named .dat to netCDF, a folder
    to Zarr, and a text file of no other format to CSV."""
    import gzip

    line = "  12345  3  1.000 2025  33.000  320.000  20.0  1.0  2.0  3.0  0.1D-04  0.2E-04  1.0\n"
    with gzip.open(tmp_path / "six_hourly.csv", "wt") as handle:
        handle.write(line)
    (tmp_path / "netcdf.dat").write_bytes(b"\x89HDF\r\n\x1a\n" + bytes(100))
    (tmp_path / "store").mkdir()
    (tmp_path / "table.nc").write_text("id,time,lon,lat\n")
    chosen = {name: next(r.name for r in registry.READERS if r.recognises(FileHead.of(str(tmp_path / name))))
              for name in ("six_hourly.csv", "netcdf.dat", "store", "table.nc")}
    assert chosen == {"six_hourly.csv": "GDP 6-hourly text", "netcdf.dat": "netCDF", "store": "Zarr",
                      "table.nc": "CSV"}
    assert FileHead.of(str(tmp_path / "six_hourly.csv")).compression == "gzip"
