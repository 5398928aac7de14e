"""lagda map across the dateline and at high latitude: a known current mapped, land left NaN, and the archive's extent
the shortest arc."""

import json

import numpy as np
import pytest
import xarray as xr

from lagda.mapping.run import map_archive
from tests.map_archives import U, V, settings, write_archive


@pytest.mark.parametrize("lon0, lat0", [(176.0, -20.0), (-20.0, 64.0)], ids=["dateline", "65N-iceland"])
def test_a_current_across_the_dateline_or_at_high_latitude(map_scheduler, tmp_path, lon0, lat0):
    """The high-latitude box holds Iceland's north coast: its land cells are NaN, its sea cells mapped. Eight days:
    one window of tiles. On a scheduler that is already running (--scheduler ADDRESS), as a cluster of machines
    would be."""
    archive, out = tmp_path / "tracks.nc", tmp_path / "map.zarr"
    write_archive(archive, lon0, lat0, n=10, days=9)
    map_archive(archive, out, settings(lon0, lat0, days=8.0), scheduler=map_scheduler, progress=False,
                say=lambda _: None)
    with xr.open_zarr(out) as ds:
        lon = ds.lon.values
        assert np.all(np.diff(lon) > 0) and lon[0] == pytest.approx(lon0 + 0.25)
        assert lon[-1] == pytest.approx(lon0 + 5.75)  # 176 .. -178 is given as 176.25 .. 181.75: increasing
        where = ds.n_fixes > 0
        assert int(where.sum()) > 50
        speed = np.hypot(U, V)
        # at 64-70 N the tangent plane's east-west scale varies by up to 20% across a tile's box, a trend the
        # periodic basis fits only in part: the typical cell is off by a few per cent there
        worst, typical = (0.1, 0.03) if lat0 < 60 else (0.2, 0.05)
        for c, true in (("u", U), ("v", V)):
            error = np.abs(ds[c].where(where).values - true)
            assert np.nanmax(error) < worst * speed and np.nanmedian(error) < typical * speed
        land = ds.sea_area_fraction.values == 0
        assert ds.sea_area_fraction.attrs["standard_name"] == "sea_area_fraction"
        (note,) = [n for n in json.loads(ds.attrs["notes"]) if n.startswith("land:")]
        if lat0 > 60:  # these drifters, made without land, cross Iceland: the note counts their fixes there
            assert land.sum() == 32 and "left NaN" in note and "fixes lie in them" in note
            for name in ("u", "v", "u_std", "v_std"):
                assert np.isnan(ds[name].values[:, land]).all() and np.isfinite(ds[name].values[:, ~land]).all()
        else:
            assert not land.any() and note.startswith("land: 0 of 144 cells")
        if lat0 < 60:  # the figure of a map across the dateline: one piece, its longitudes continued past 180
            from lagda.mapping.plot import busiest_day, map_figure

            figure = map_figure(ds, busiest_day(ds))
            assert all(ax.get_xlim() == pytest.approx((176.0, 182.0), abs=0.3) for ax in figure.axes[:3])


def test_archive_extent_is_the_shortest_arc_across_the_dateline_rounded_out_to_the_cells(tmp_path):
    """Drifters from 176 E to 178 W and 77 N to 83 N: the region crosses the dateline (east < west), rounded out to
    0.5-degree cells, clipped at 80 N with the fixes beyond counted; the period runs over the fixes' map days."""
    from lagda.mapping.archive import _shortest_arc, archive_extent

    archive = tmp_path / "gdp.nc"
    write_archive(archive, 176.0, 77.0, days=3, n=6)
    with xr.open_dataset(archive) as ds:
        lon, lat = ds.lon.values, ds.lat.values
        seconds = (ds.time.values - np.datetime64("1970-01-01", "ns")) / np.timedelta64(1, "s")
    assert lon.min() < -170 and lon.max() > 170 and lat.max() > 80  # the archive crosses the dateline and 80 N
    east_of_176 = lon % 360.0  # the drifters' arc, unbroken
    kept = lat <= 80.0
    region, period, notes = archive_extent(archive, 0.5, 86400.0)
    expected = (np.floor(east_of_176[kept].min() / 0.5) * 0.5,
                np.floor(east_of_176[kept].max() / 0.5) * 0.5 + 0.5 - 360,
                np.floor(lat.min() / 0.5) * 0.5, min(80.0, np.floor(lat[kept].max() / 0.5) * 0.5 + 0.5))
    np.testing.assert_allclose(region, expected)
    assert region[1] < region[0]  # across the dateline
    assert period == (np.floor(seconds.min() / 86400) * 86400, np.floor(seconds.max() / 86400) * 86400)
    assert f"{int(np.sum(~kept))} fixes poleward of 80 degrees left out" in notes[0]
    assert notes[1].startswith("--period not given") and len(notes) == 2
    assert _shortest_arc(np.ones(720, bool), 0.5) == (-180.0, 180.0)  # fixes all round: the whole band
    # a region given: the period of its fixes only, and the note says so
    _, within, (note,) = archive_extent(archive, 0.5, 86400.0, region=(170.0, 179.0, 70.0, 80.0))
    assert within == period and note.startswith("--period not given") and "in the region" in note
