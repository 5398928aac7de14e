"""The readers of track files, one module per format, behind one interface (`reader.Reader`) and one ordered list
(`registry.READERS`): CF trajectory netCDF and Zarr with the GDP's fields and lagda datasets (`cf_dataset`, with
`cf_trajectory`, `cf_variables`, `gdp_fields`), Parquet as Parcels v4 writes it (`parquet`), the GDP's 6-hourly text
files (`gdp_text`) and CSV, ERDDAP's too (`csv`). `lagda.io.formats.read_tracks` is their entry."""
