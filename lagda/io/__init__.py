"""Files: track files (`tracks`: the `Tracks` container, the CF writer and the model check; `readers`: one reader
per format the ecosystem writes, behind one registry; `formats`: `read_tracks`, their entry; `sources`: the files of
a source, several read as one; `cf_time`: CF times; `archive`: an archive read lazily a chunk at a time), the
physical-units mapping (`physical`), the quality control of fixes (`clean`), inertial oscillations and tides taken
out of them (`lowpass`), `export` (`lagda export-tracks`), the assimilation result file (`results`) and the shared
netCDF helpers (`netcdf`). The public functions are re-exported here and loaded on first use."""

from lagda._lazy import lazy_getattr

_LAZY = {"Tracks": "tracks", "write_tracks": "tracks", "read_tracks": "formats", "Mapping": "physical",
         "Result": "results", "read_result": "results", "write_result": "results", "export_tracks": "export"}

__all__ = sorted(_LAZY)

__getattr__ = lazy_getattr(__name__, _LAZY)
