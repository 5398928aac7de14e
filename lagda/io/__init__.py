"""Files: track files (`tracks`: the `Tracks` container and the CF writer; `formats`: readers of every
layout the ecosystem writes), the physical-units mapping (`physical`), `export` (`lagda export-tracks`),
assimilation results (`results`) and the shared netCDF helpers (`netcdf`)."""
