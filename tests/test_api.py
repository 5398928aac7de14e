"""lagda's Python API (lagda.api: `lagda.map`, `lagda.assimilate`): Datasets returned lazily from `out` or in memory
with nothing left behind, dates in every form, errors naming the Python arguments (and the command line's flags on
the command line, through one mechanism: lagda.arguments), the region across the dateline read only when
plausible, and a plain script without a `__main__` guard that maps on worker processes."""

import datetime
import json
import os
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest

import lagda
from lagda.arguments import on_command_line
from lagda.cli import main
from lagda.mapping.settings import MapSettings

GDP_LIKE = lagda.examples.path("gdp_like")
MARCH = (1740787200.0, 1743379200.0)  # 2025-03-01 and 2025-03-31, seconds since 1970-01-01T00:00:00Z
SMALL = dict(period=("2025-03-01", "2025-03-04"), resolution=1.0, progress=False)  # one tile of the example


@pytest.mark.parametrize("period", [
    ("2025-03-01", "2025-03-31"),
    ("2025-03-01T00:00:00Z", "2025-03-31T01:00:00+01:00"),
    (np.datetime64("2025-03-01"), np.datetime64("2025-03-31T00:00:00.000000000")),
    (pd.Timestamp("2025-03-01"), pd.Timestamp("2025-03-31", tz="UTC")),
    (datetime.datetime(2025, 3, 1), datetime.date(2025, 3, 31)),
    (datetime.datetime(2025, 3, 1, 1, tzinfo=datetime.timezone(datetime.timedelta(hours=1))), "2025-03-31"),
    MARCH,
    (int(MARCH[0]), np.float32(MARCH[1])),
], ids=["iso", "iso-zoned", "datetime64", "timestamp", "datetime-date", "datetime-zoned", "seconds",
        "int-float32"])
def test_a_period_takes_dates_in_every_form(period):
    assert MapSettings(period=period).period == MARCH


@pytest.mark.parametrize("period, refused", [
    (("2025-03-01", "2025-13-01"), "period=('2025-03-01', '2025-13-01'): '2025-13-01' is not a date (ISO 8601 "
                                   "such as '2025-03-01', a numpy.datetime64, a pandas.Timestamp, a datetime, or "
                                   "seconds since 1970)"),
    (("2025-03-01", None), "period=('2025-03-01', None): 'None' is not a date (ISO 8601 such"),
    (("2025-03-01", float("nan")), "period=('2025-03-01', nan): 'nan' is not a date (ISO 8601 such"),
    (("March", "2025-03-01"), "period=('March', '2025-03-01'): 'March' is not a date (ISO 8601 such"),
    ("2025-03-01", "period='2025-03-01': two dates, the first and last map time (e.g. period=('2025-03-01', "
                   "'2025-03-31'))"),
    (("2025-03-31", "2025-03-01"), "period=('2025-03-31T00:00:00Z', '2025-03-01T00:00:00Z'): the end must be after "
                                   "the start"),
], ids=["month-13", "none", "nan", "month-name", "one-string", "backwards"])
def test_a_bad_period_is_one_error_naming_the_argument_and_value(period, refused):
    with pytest.raises(ValueError) as error:
        MapSettings(period=period)
    assert str(error.value).startswith(refused) and "\n" not in str(error.value)


@pytest.mark.parametrize("settings, python, flags", [
    (dict(resolution=0), "resolution=0: must be positive", "--resolution 0: must be positive"),
    (dict(k_max=0.5), "k_max=0.5: must be at least 1", "--k-max 0.5: must be at least 1"),
    (dict(withhold=1), "withhold=1: the fraction", "--withhold 1: the fraction"),
    (dict(step_days=40), "step_days=40: must be positive and at most the window, 30 days",
     "--window-step 40: must be positive and at most the window, 30 days"),
    (dict(method="kriging"), "method='kriging': one of objective, basis", "--tile-method kriging: one of"),
    (dict(region=(0, 1, 85, 86)), "region=(0, 1, 85, 86): latitudes must satisfy", "--region 0 1 85 86: latitudes"),
    (dict(period=("2025-03-01", "March")), "period=('2025-03-01', 'March'): 'March' is not a date",
     "--period 2025-03-01 March: 'March' is not a date"),
], ids=["resolution", "k_max", "withhold", "window-step", "method", "latitudes", "date"])
def test_errors_name_the_python_argument_or_the_flag_as_the_user_gave_it(settings, python, flags):
    with pytest.raises(ValueError) as from_python:
        MapSettings(**settings)
    with on_command_line(), pytest.raises(ValueError) as from_command_line:
        MapSettings(**settings)
    assert str(from_python.value).startswith(python)
    assert str(from_command_line.value).startswith(flags)
    assert str(from_python.value).split(": ", 1)[1] == str(from_command_line.value).split(": ", 1)[1]  # one message


def test_the_command_line_names_its_flags(tmp_path, capsys):
    out = tmp_path / "m.nc"
    assert main(["map", "--tracks", str(GDP_LIKE), "--out", str(out), "--resolution", "0"]) == 2
    assert capsys.readouterr().err.strip() == "lagda map: error: --resolution 0: must be positive"
    out.write_text("")  # an existing output: refused before the archive is read
    assert main(["map", "--tracks", str(GDP_LIKE), "--out", str(out), "--period", "2025-03-01", "2025-03-04",
                 "--region", "-41", "-37", "32", "37", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"lagda map: error: {out} exists; pass --overwrite to replace it, or --resume to finish")
    assert "=True" not in err and len(err.splitlines()) == 1


def test_an_existing_output_names_resume_and_overwrite_as_python_arguments(tmp_path):
    out = tmp_path / "m.nc"
    out.write_text("")
    with pytest.raises(ValueError, match=r"exists; pass overwrite=True to replace it, or resume=True to finish an "
                                         r"interrupted run \(on a complete map, resume=True changes nothing\)$"):
        lagda.map(GDP_LIKE, out=out, **SMALL)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.nc"]
    with pytest.raises(ValueError, match="^resume=True needs out=STORE"):
        lagda.map(GDP_LIKE, resume=True, **SMALL)
    with pytest.raises(TypeError, match=r"unknown setting tile_size=3; the settings are .*tile_deg"):
        lagda.map(GDP_LIKE, tile_size=3, **SMALL)


def test_a_region_whose_west_lies_east_of_its_east_is_read_across_the_dateline_only_when_plausible():
    """170 to -170 is the 20-degree band across the dateline, said in a note; -37 to -41 would be 356 degrees
    (lon0 and lon1 swapped): refused, the message writing both readings."""
    across = MapSettings(region=(170, -170, 30, 40), period=MARCH)
    assert across.grid().lon.size == 80 and across.grid().lon[0] == 170.125  # 20 degrees of 0.25-degree cells
    assert across.region_note().startswith("region: west 170 > east -170, read as the 20-degree band eastward from "
                                            "170 across the dateline to -170 (the 340-degree band from -170 to 170 "
                                            "is region=(-170, 170, 30, 40))")
    assert MapSettings(region=(-41, -37, 30, 40)).region_note() == ""
    with pytest.raises(ValueError) as swapped:
        MapSettings(region=(-37, -41, 32, 37))
    assert str(swapped.value) == ("region=(-37, -41, 32, 37): west -37 lies east of east -41; across the dateline "
                                  "that is a 356-degree band: for the 4-degree band between them give "
                                  "region=(-41, -37, 32, 37), for the wide band region=(-37, 319, 32, 37)")
    with on_command_line(), pytest.raises(ValueError, match=r"^--region -37 -41 32 37: .* give --region -41 -37 32 "
                                                            r"37, for the wide band --region -37 319 32 37$"):
        MapSettings(region=(-37, -41, 32, 37))
    with pytest.raises(ValueError, match=r"^region=\(1, 2, 3\): four numbers"):
        MapSettings(region=(1, 2, 3))


@pytest.fixture(scope="module")
def threads():
    """A Dask cluster of threads in this process (the tiles of these tests' maps; the script test starts
    processes)."""
    from dask.distributed import LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster:
        yield cluster.scheduler_address


def test_a_map_without_out_is_returned_in_memory_and_leaves_nothing(threads, tmp_path, monkeypatch):
    """The 4-degree band of the example written 319 to -37 (a west east of its east) is read eastward from 319 and
    said in a note, kept in the Dataset's notes; the temporary store is removed."""
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    said = []
    maps = lagda.map(GDP_LIKE, region=(319, -37, 32.5, 36.5), scheduler=threads, say=said.append, **SMALL)
    assert list(tmp_path.iterdir()) == []
    assert dict(maps.sizes) == {"time": 4, "lat": 4, "lon": 4}
    assert all(maps[name].variable._in_memory for name in maps.variables)
    np.testing.assert_allclose(maps.lon.values, [319.5, 320.5, 321.5, 322.5])
    assert str(maps.time.values[0])[:10] == "2025-03-01" and str(maps.time.values[-1])[:10] == "2025-03-04"
    assert np.isfinite(maps.u.values[maps.n_fixes.values > 0]).all() and (maps.n_fixes.values > 0).any()
    notes = json.loads(maps.attrs["notes"])
    assert notes == [line.removeprefix("note: ") for line in said if line.startswith("note: ")]
    assert any(note.startswith("region: west 319 > east -37, read as the 4-degree band eastward from 319 to -37")
               for note in notes)


def test_a_map_with_out_is_opened_lazily_from_the_store(threads, tmp_path):
    out = tmp_path / "maps.zarr"
    maps = lagda.map(GDP_LIKE, out=out, scheduler=threads, say=None, **SMALL)
    assert maps.u.chunks is not None  # dask: read from the store when computed
    assert json.loads(maps.attrs["manifest"])["settings"]["period"] == [1740787200.0, 1741046400.0]
    again = lagda.map(GDP_LIKE, out=out, resume=True, scheduler=threads, say=None, **SMALL)  # complete: as it is
    np.testing.assert_array_equal(again.u.values, maps.u.values)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["maps.zarr"]


def test_a_plain_script_without_a_main_guard_maps_on_worker_processes(tmp_path):
    """Each Dask worker process used to run the unguarded script again, find the output locked and fail ("Nanny
    failed to start"), leaving a .partial folder; the workers now start without the script. One worker process
    shows it as well as several (each starts the same way) and costs one start of lagda less."""
    script = tmp_path / "plain.py"
    script.write_text(textwrap.dedent("""\
        import json
        import lagda

        maps = lagda.map(lagda.examples.path("gdp_like"), period=("2025-03-01", "2025-03-04"), resolution=1.0,
                         workers=1, progress=False, say=None)
        print(json.dumps({"sizes": dict(maps.sizes), "mapped": int((maps.n_fixes > 0).sum()),
                          "finite": bool(maps.u.where(maps.n_fixes > 0).notnull().sum() == (maps.n_fixes > 0).sum()),
                          "notes": json.loads(maps.attrs["notes"])}))
        print("after the map")
        """))
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    done = subprocess.run([sys.executable, script.name], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "TMPDIR": str(temporary)})
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.strip().splitlines()
    assert lines[-1] == "after the map" and len(lines) == 2  # the script ran once: no worker ran it again
    got = json.loads(lines[0])
    assert got["sizes"]["time"] == 4 and got["mapped"] > 0 and got["finite"]
    assert any("tile" in note for note in got["notes"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plain.py", "tmp"]  # no store, no .partial
    assert not list(temporary.glob("lagda-*"))  # the temporary store removed (Dask keeps its dask-scratch-space)


@pytest.fixture(scope="module")
def small_assimilation():
    """The options of a quick assimilation of the example: a small basis on a coarse grid."""
    return dict(k_max=3, degree=1, n_grid=8, say=None)


def test_assimilate_returns_the_result_in_memory_or_lazily_from_out(small_assimilation, tmp_path, monkeypatch):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    said = []
    result = lagda.assimilate(GDP_LIKE, **{**small_assimilation, "say": said.append})
    assert list(tmp_path.iterdir()) == []
    assert all(result[name].variable._in_memory for name in result.variables)
    assert result.u.dims == ("time", "lat", "lon") and result.u.attrs["units"] in ("m s-1", "m/s")
    assert np.isfinite(result.u.values).all() and result.attrs["diagnostics"].startswith("linear")
    assert said and all(line.startswith(("note: ", "warning: ")) for line in said)
    out = tmp_path / "result.nc"
    lazy = lagda.assimilate(GDP_LIKE, out=out, **small_assimilation)
    assert not lazy.u.variable._in_memory
    np.testing.assert_allclose(lazy.u.values, result.u.values, rtol=1e-6, atol=1e-9)
    with pytest.raises(ValueError, match=f"{out} exists; pass overwrite=True to replace it"):
        lagda.assimilate(GDP_LIKE, out=out, **small_assimilation)
    with pytest.raises(ValueError, match="option top_k does not apply to method linear"):
        lagda.assimilate(GDP_LIKE, method="linear", top_k=4, **small_assimilation)


def test_importing_lagda_loads_none_of_its_modules():
    code = ("import sys, lagda; loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('lagda', 'numpy', "
            "'xarray', 'jax')); print(loaded); print(lagda.map.__module__, lagda.examples.__name__)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=pathlib.Path.home())
    # lagda.version: the version string alone (lagda.__version__)
    assert done.stdout.splitlines() == ["['lagda', 'lagda._lazy', 'lagda.version']", "lagda.api lagda.examples"], \
        done.stderr


def test_learned_methods_read_the_shipped_encoder_unless_given_a_run_from_python_as_on_the_command_line():
    from lagda.assimilation.assimilate import encoder_for
    from lagda.examples import DEFAULT_MODEL, shipped

    assert encoder_for("hybrid", None, None, None) == str(shipped(DEFAULT_MODEL))
    assert encoder_for("hybrid", None, None, "my_run") == "my_run"
    assert encoder_for("linear", None, None, None) is None  # linear reads no encoder
    assert encoder_for("sample", {"start": "hybrid"}, None, None) == str(shipped(DEFAULT_MODEL))
    assert encoder_for("sample", {}, None, None) is None
    with pytest.raises(ValueError, match="needs a trained run"):
        encoder_for("hybrid", None, "circular", None)


def test_assimilate_errors_name_the_python_argument_or_the_flag(tmp_path, capsys):
    """One message, in the caller's words: `plot_day='2025-03-10' needs plot='FIG.png'` from Python, `--plot-day
    2025-03-10 needs --plot FIG.png` from `lagda assimilate`; nothing written either way."""
    out = tmp_path / "r.nc"
    with pytest.raises(ValueError, match=r"^plot_day='2025-03-10' needs plot='FIG.png'$"):
        lagda.assimilate(GDP_LIKE, out=out, plot_day="2025-03-10", say=None)
    with pytest.raises(ValueError, match=r"^n_grid=1: must be at least 2$"):
        lagda.assimilate(GDP_LIKE, out=out, n_grid=1, say=None)
    assert main(["assimilate", "--tracks", str(GDP_LIKE), "--out", str(out), "--plot-day", "2025-03-10"]) == 2
    assert main(["assimilate", "--tracks", str(GDP_LIKE), "--out", str(out), "--n-grid", "1"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "lagda assimilate: error: --plot-day 2025-03-10 needs --plot FIG.png",
        "lagda assimilate: error: --n-grid 1: must be at least 2"]
    assert not out.exists()
