"""Files: track files (`tracks`: readers for CF trajectory, ragged and CSV layouts, the writer),
assimilation results (`results`) and the shared netCDF helpers (`netcdf`)."""
