"""The assimilation methods on twin tracks of known truth: the benchmark, the position noise, the posterior's
geometry, and a learned proposal."""
