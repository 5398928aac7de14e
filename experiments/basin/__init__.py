"""`lagda map` on drifters of a known ocean: the basin-year benchmark (a QG year of GDP-like drifters: `ocean`,
`archive`, `methods`, `benchmark`, `run`, `year`) and the studies built on it, and a dense GLAD-like deployment."""
