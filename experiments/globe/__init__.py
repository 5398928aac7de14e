"""`lagda map` over the whole ocean: a global synthetic GDP-like archive in a known flow (`flow`, `archive`), run as
`python -m experiments.globe.archive`."""
