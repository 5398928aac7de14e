"""`lagda assimilate` on pyqg-jax QG flows, a model lagda was not built from: the basis, the defaults, the window
case, the learned methods, and drifters advected by Parcels."""
