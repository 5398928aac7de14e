"""The dataset schema: to_dataset follows VARIABLES, files round-trip, bad files are refused."""

import dataclasses

import numpy as np
import pytest
import xarray as xr

from simulate import schema
from simulate.config import small

CONFIG = small(n_samples=3, n_drifters=2, k1_min=-1, k1_max=1, k2_min=-1, k2_max=1, t_final=0.001, steady=True,
               release="random", obs_noise=0.01)


def make_dataset(config=CONFIG, precision_dtype=np.float32):
    """Returns a schema dataset with hand-made arrays of the right shapes."""
    rng = np.random.default_rng(0)
    n_modes, shape = 9, (config.n_samples, config.n_drifters)
    return schema.to_dataset(
        config, k1=np.repeat(np.arange(-1, 2), 3), k2=np.tile(np.arange(-1, 2), 3),
        omega=np.zeros(n_modes), prior_scale=np.ones(n_modes),
        coef=rng.normal(size=(config.n_samples, n_modes)) + 1j * rng.normal(size=(config.n_samples, n_modes)),
        release=rng.uniform(size=(*shape, 2)),
        positions=rng.uniform(size=(*shape, config.n_obs, 2)).astype(precision_dtype), history="test")


@pytest.fixture(scope="module")
def dataset():
    return make_dataset()


def test_dataset_follows_the_declared_schema(dataset):
    assert dataset.attrs["Conventions"] == "CF-1.11"
    assert dataset.attrs["lagda_schema_version"] == "1"
    assert "featureType" not in dataset.attrs
    assert set(schema.VARIABLES) <= set(dataset.variables)
    for name, spec in schema.VARIABLES.items():
        var = dataset[name]
        assert var.dims == spec.dims, name
        assert var.attrs["units"] == "1" and var.attrs["long_name"] == spec.long_name, name
    assert dataset["x"].dtype == np.float32 and dataset["coef_re"].dtype == np.float64
    np.testing.assert_allclose(dataset["time"].values, 1e-4 * np.arange(1, 11))


def test_config_round_trips_through_attributes(dataset):
    assert schema.config_from_attrs(dataset) == CONFIG
    assert dataset.attrs["steady"] == 1  # netCDF has no booleans


def test_file_round_trips(dataset, tmp_path):
    path = tmp_path / "d.nc"
    dataset.to_netcdf(path, encoding=schema.encoding(dataset))
    with schema.open_dataset(path, load=True) as read:
        xr.testing.assert_identical(read, dataset)
        assert schema.config_from_attrs(read) == CONFIG


def test_float64_positions_are_accepted():
    ds = make_dataset(dataclasses.replace(CONFIG, precision="float64"), np.float64)
    assert ds["y"].dtype == np.float64


@pytest.mark.parametrize("break_it, message", [
    (lambda ds: ds.drop_vars("omega"), "missing variable 'omega'"),
    (lambda ds: ds.assign(k1=("sample", np.zeros(3, np.int32))), "'k1' has dims"),
    (lambda ds: ds.assign(x=ds["x"].astype(np.float64)), "'x' has dtype float64"),
    (lambda ds: ds.drop_attrs(deep=False), "missing global attribute 'Conventions'"),
    (lambda ds: ds.assign_attrs(n_samples=4), "'sample' has size 3"),
    (lambda ds: ds.assign_attrs(lagda_schema_version="0"), "schema version"),
    (lambda ds: ds.assign_attrs(featureType="trajectory"), "featureType"),
], ids=["missing-variable", "wrong-dims", "wrong-dtype", "missing-attrs", "wrong-size", "version", "dsg-file"])
def test_validate_names_the_problem(dataset, break_it, message):
    with pytest.raises(ValueError, match=message):
        schema.validate_dataset(break_it(dataset))


def test_units_are_required(dataset):
    broken = dataset.copy()
    broken["y0"].attrs = {"long_name": "no units"}
    with pytest.raises(ValueError, match="'y0' has no 'units'"):
        schema.validate_dataset(broken)


def test_open_dataset_refuses_missing_corrupt_and_foreign_files(dataset, tmp_path):
    with pytest.raises(FileNotFoundError):
        schema.open_dataset(tmp_path / "absent.nc")
    garbage = tmp_path / "garbage.nc"
    garbage.write_bytes(b"not netCDF at all")
    with pytest.raises(ValueError, match="not a lagda dataset: .*cannot be read"):
        schema.open_dataset(garbage)
    truncated = tmp_path / "truncated.nc"
    dataset.to_netcdf(truncated, encoding=schema.encoding(dataset))
    truncated.write_bytes(truncated.read_bytes()[:2000])
    with pytest.raises(ValueError, match="not a lagda dataset"):
        schema.open_dataset(truncated)
    foreign = tmp_path / "foreign.nc"
    xr.Dataset({"temperature": ("t", np.zeros(3))}).to_netcdf(foreign)
    with pytest.raises(ValueError, match="not a lagda dataset: .*missing global attribute"):
        schema.open_dataset(foreign)


def test_data_readme_documents_this_schema():
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "data" / "README.md").read_text()
    assert schema.markdown_table() in readme


def test_shipped_example_is_a_valid_dataset():
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "data" / "example_small.nc"
    with schema.open_dataset(path) as ds:
        config = schema.config_from_attrs(ds)
        assert (config.n_samples, config.seed, config.dt, ds.sizes["mode"]) == (16, 7, 1e-4, 49)
