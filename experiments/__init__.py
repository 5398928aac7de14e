"""The studies behind docs/results: one module per paper figure or study, each run from the checkout's root as
``python -m experiments.<name>`` (for example ``python -m experiments.qg.benchmark --quick``)."""
