"""Observed drifter tracks: the `Tracks` container and track-file readers/writers.

Track files (DESIGN.md "Files") are strict CF discrete-sampling-geometry trajectory files:
`featureType = "trajectory"`, dims `trajectory`/`obs`, a `cf_role = "trajectory_id"` variable,
per-trajectory `time(trajectory, obs)` padded with `_FillValue`. Readers also accept the
orthogonal and contiguous-ragged CF layouts, a lagda dataset and CSV (id,time,x,y[,field]).
"""

from __future__ import annotations

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True)
class Tracks:
    """Observed drifter tracks, nondimensional torus units.

    Attributes:
        positions: float64 `(trajectory, obs, 2)` unwrapped x, y; NaN where missing.
        times: float64 `(trajectory, obs)`; NaN where missing (padding).
        field: int64 `(trajectory,)` which flow each track samples (0..n_field-1).
        trajectory_id: `(trajectory,)` ids as read (str or int).
        true_coef: complex128 `(field, mode)` when known (lagda dataset).
        k1, k2: int `(mode,)` wavevectors when the file says (lagda dataset).
        omega: float `(mode,)` frequencies when the file says.
        release: float64 `(trajectory, 2)` release point at t = 0 if known.
    """

    positions: np.ndarray
    times: np.ndarray
    field: np.ndarray
    trajectory_id: np.ndarray
    true_coef: np.ndarray | None = None
    k1: np.ndarray | None = None
    k2: np.ndarray | None = None
    omega: np.ndarray | None = None
    release: np.ndarray | None = None

    def __post_init__(self):
        p, t = np.shape(self.positions), np.shape(self.times)
        if len(p) != 3 or p[2] != 2 or t != p[:2] or np.shape(self.field) != p[:1] or np.shape(self.trajectory_id) != p[:1]:
            raise ValueError(
                f"Tracks: positions {p} must be (trajectory, obs, 2), times {t} (trajectory, obs), "
                f"field {np.shape(self.field)} and trajectory_id {np.shape(self.trajectory_id)} (trajectory,)"
            )

    @property
    def n_field(self) -> int:
        """Returns the number of fields (flows), max(field) + 1."""
        return int(np.max(self.field)) + 1 if len(self.field) else 0

    @property
    def n_trajectory(self) -> int:
        """Returns the number of trajectories."""
        return int(np.shape(self.positions)[0])

    def for_field(self, f: int) -> "Tracks":
        """Returns the trajectories of field `f` as a one-field `Tracks` (field index 0)."""
        sel = np.flatnonzero(np.asarray(self.field) == f)
        return dataclasses.replace(
            self,
            positions=self.positions[sel],
            times=self.times[sel],
            field=np.zeros(len(sel), dtype=np.int64),
            trajectory_id=self.trajectory_id[sel],
            true_coef=None if self.true_coef is None else self.true_coef[f : f + 1],
            release=None if self.release is None else self.release[sel],
        )
