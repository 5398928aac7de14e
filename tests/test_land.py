"""The sea fraction of cells (lagda.io.land) against the land mask package's own reader, pixel by pixel."""

import numpy as np
import pytest

from lagda.io.land import PIXELS_PER_DEGREE, sea_fraction


@pytest.fixture(scope="module")
def globe():
    """global-land-mask's own module (it loads the whole mask at import: 0.9 GB, about 5 s), unloaded after, so the
    worker that ran these tests does not keep the mask for the rest of the suite."""
    import gc
    import sys

    from global_land_mask import globe

    yield globe
    for name in ("global_land_mask.globe", "global_land_mask"):
        sys.modules.pop(name, None)
    del globe
    gc.collect()


def reference(globe, lon, lat, step):
    """The sea fraction of each cell from the package's `is_ocean` at every pixel centre inside it."""
    out = np.zeros((len(lat), len(lon)))
    pixel = 1.0 / PIXELS_PER_DEGREE
    for j, y in enumerate(lat):
        rows = np.arange(np.floor((y - step / 2) / pixel), np.ceil((y + step / 2) / pixel)) * pixel + pixel / 2
        rows = rows[(rows >= y - step / 2) & (rows < y + step / 2)]
        for i, x in enumerate(lon):
            cols = np.arange(np.floor((x - step / 2) / pixel), np.ceil((x + step / 2) / pixel)) * pixel + pixel / 2
            cols = cols[(cols >= x - step / 2) & (cols < x + step / 2)]
            lat2, lon2 = np.meshgrid(rows, (cols + 180.0) % 360.0 - 180.0, indexing="ij")
            out[j, i] = globe.is_ocean(lat2, lon2).mean()
    return out


@pytest.mark.parametrize("west, south, step", [(172.0, 51.0, 0.5), (-6.0, 35.5, 0.25)],
                         ids=["aleutians-across-the-dateline", "gibraltar"])
def test_sea_fraction_is_the_share_of_sea_pixels_in_each_cell(globe, west, south, step):
    lon = west + step * (np.arange(int(8 / step)) + 0.5)  # 8 degrees: across 180 E for the Aleutians
    lat = south + step * (np.arange(int(2 / step)) + 0.5)
    sea = sea_fraction(lon, lat, step)
    np.testing.assert_allclose(sea, reference(globe, lon, lat, step), atol=1e-6)
    assert sea.max() == 1.0 and ((sea > 0) & (sea < 1)).any()  # sea and coast
    # the same cells in the other longitude convention
    np.testing.assert_array_equal(sea_fraction((lon + 180.0) % 360.0 - 180.0, lat, step), sea)


def test_cells_finer_than_a_pixel_take_the_pixel_at_their_centre(globe):
    lon, lat = -5.6 + 0.001 * np.arange(3), 35.99 + 0.001 * np.arange(40)  # across the shore near Tarifa
    sea = sea_fraction(lon, lat, 0.001)
    lat2, lon2 = np.meshgrid(lat, lon, indexing="ij")
    np.testing.assert_array_equal(sea, globe.is_ocean(lat2, lon2).astype(np.float32))
    assert 0 < sea.mean() < 1


def test_latitudes_beyond_the_poles_are_refused():
    with pytest.raises(ValueError, match="within -90..90"):
        sea_fraction(np.array([0.0]), np.array([95.0]), 1.0)


def test_an_assimilation_box_over_a_coast_says_which_cells_are_land():
    """`lagda assimilate` squares its box out over a coast (drifters beside Brazil): its u, v on the land cells
    were the basis's extrapolation with no word; a warning now counts them and `land_cells` keeps the count. At sea
    nothing is said."""
    from types import SimpleNamespace

    from lagda.assimilation.assimilate import land_warning
    from lagda.io.physical import Mapping

    centres = (np.arange(32) + 0.5) / 32
    result = lambda box: SimpleNamespace(mapping=Mapping(box, "lonlat", 0.0, 1.0), x=centres, y=centres, attrs={})
    coast = result((-37.0, -33.0, -8.5, -4.5))  # Recife, Natal: land west of about 35 W
    line = land_warning(coast)
    assert line.startswith("land: ") and "extrapolation across the coast" in line
    assert 0.2 * 32 * 32 < coast.attrs["land_cells"] < 0.8 * 32 * 32
    sea = result((-42.0, -38.0, 33.0, 37.0))  # the mid-Atlantic
    assert land_warning(sea) is None and sea.attrs["land_cells"] == 0
