"""Drifter files as a user has them, through `lagda assimilate` and `lagda map` with every default: a lone eddy,
inertial oscillations and tides, the shipped GDP-like file and its spikes, and real GDP drifters."""
