"""Every kind of netCDF file lagda writes passes the IOOS compliance checker for CF-1.11 with no errors.

The files are made by the commands a user runs (`lagda simulate`, `lagda export-tracks`, `lagda
assimilate`, `lagda map`), in model units and in physical units, and checked as `compliance-checker
--test=cf:1.11 FILE` checks them. Errors are the checker's high-priority failures (its
"Errors" section).
"""

import pathlib

import pytest

from lagda import cli
from lagda.examples import shipped

ROOT = pathlib.Path(__file__).resolve().parent.parent

BOX = ["-45", "-35", "30", "38"]
# A check that raises inside compliance-checker 6.1.0 itself (reported as "possibly indicate compliance
# checker issues", not as an error): check_domain_variables unpacks two values from
# resolve_ragged_array_dimension, which returns one, on every valid contiguous ragged file.
CHECKER_BUGS = {"check_domain_variables"}


@pytest.fixture(scope="module")
def checker():
    from compliance_checker.runner import CheckSuite

    suite = CheckSuite()
    suite.load_all_available_checkers()
    return suite


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Every kind of file lagda writes, made by its commands: {kind: path}."""
    d = tmp_path_factory.mktemp("cf")
    run = lambda *argv: cli.main([str(a) for a in argv])
    out = {"dataset": d / "dataset.nc"}
    assert run("simulate", "--preset", "small", "--steady", "--n-samples", "2", "--k1-range", "-1", "1", "--k2-range",
               "-1", "1",
               "--t-final", "0.01", "--seed", "3", "--out", out["dataset"]) == 0
    for layout in ("multidimensional", "ragged"):
        out[f"tracks-model-{layout}"] = d / f"model_{layout}.nc"
        assert run("export-tracks", "--tracks", out["dataset"], "--out", out[f"tracks-model-{layout}"], "--layout",
                   layout) == 0
        out[f"tracks-physical-{layout}"] = d / f"physical_{layout}.nc"
        assert run("export-tracks", "--tracks", out["dataset"], "--out", out[f"tracks-physical-{layout}"], "--layout",
                   layout,
                   "--box", *BOX, "--start", "2025-03-01T00:00:00Z", "--time-scale", "1e6", "--gaps", "2", "5") == 0
    out["result-model"] = d / "result_model.nc"
    assert run("assimilate", "--tracks", out["tracks-model-multidimensional"], "--method", "linear", "--n-grid", "8",
               "--out", out["result-model"]) == 0
    out["result-physical"] = d / "result_physical.nc"
    assert run("assimilate", "--tracks", out["tracks-physical-ragged"], "--method", "linear", "--n-grid", "8",
               "--out", out["result-physical"]) == 0
    out["map"] = d / "map.nc"
    assert run("map", "--tracks", SHIPPED["shipped-gdp-like-ragged"], "--out", out["map"], "--resolution", "0.5",
               "--workers", "1", "--no-progress") == 0
    return {**out, **SHIPPED}


KINDS = ["dataset", "tracks-model-multidimensional", "tracks-model-ragged", "tracks-physical-multidimensional",
         "tracks-physical-ragged", "result-model", "result-physical", "map"]
# the files the project ships, as they are (package data and data/)
SHIPPED = {"shipped-example-tracks": shipped("example_tracks.nc"), "shipped-gdp-like-ragged": shipped("gdp_like.nc"),
           "data-example-small": ROOT / "data" / "example_small.nc", "data-small-test": ROOT / "data" / "small_test.nc"}


@pytest.mark.parametrize("kind", KINDS + list(SHIPPED))
def test_no_cf_errors(checker, files, kind):
    path = str(files[kind])
    # the checker leaves its netCDF4.Dataset open; a shipped file left open here and opened again by a later
    # test crashed the HDF5 library (segfault, or "NetCDF: HDF error" on the next open): close it
    with checker.load_dataset(path) as dataset:
        groups, exceptions = checker.run_all(dataset, ["cf:1.11"])["cf:1.11"]
    report = checker.build_structure("cf:1.11", groups, path)
    errors = [f"{r.name}: {m}" for r in report["high_priorities"] for m in r.msgs]
    assert report["high_count"] == 0 and not errors, errors
    assert set(exceptions) <= (CHECKER_BUGS if "ragged" in kind else set()), exceptions
    # a check that passed is a check that ran: the checker saw the file's variables
    assert report["scored_points"] > 0


def test_files_declare_cf_1_11_and_physical_units(files):
    import netCDF4

    for kind in KINDS:
        with netCDF4.Dataset(files[kind]) as nc:
            assert nc.getncattr("Conventions") == "CF-1.11", kind
    with netCDF4.Dataset(files["result-physical"]) as nc:
        assert nc["u_mean"].units == "m s-1" and nc["psi_mean"].units == "m2 s-1" and nc["lon"].units == "degrees_east"
        assert nc["time"].units.startswith("seconds since") and nc["model_time"].units == "1"
    with netCDF4.Dataset(files["tracks-model-ragged"]) as nc:
        assert nc["rowsize"].sample_dimension == "obs" and nc.getncattr("featureType") == "trajectory"
        assert not hasattr(nc["time"], "axis") and nc["time"].units == "1"  # model time is not a CF time
