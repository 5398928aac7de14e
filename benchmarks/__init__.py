"""Speed measurements of lagda's parts, each run from the checkout's root as ``python -m benchmarks.<name>``
(for example ``python -m benchmarks.bench_simulate --quick``)."""
