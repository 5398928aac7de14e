"""`lagda map` over the whole ocean: a global synthetic GDP-like archive in a known flow (`flow`, `archive`).

`global` is a Python keyword, so these modules are run as `python -m experiments.global.archive` and imported
with `importlib.import_module("experiments.global.archive")`; inside the family they import each other relatively.
"""
