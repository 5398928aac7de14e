"""Time stepping: one generic explicit Runge-Kutta step driven by a Butcher tableau, a
stochastic variant for Brownian forcing, and a record loop ("step `stride` times, record").

A vector field has the signature `field(z, t, args) -> dz/dt` for a state `z` of any shape.
A step has the signature `step(z, t, dt, args, key) -> z_next`; deterministic steps ignore
`key`, so the record loop is the same for every scheme.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import jax
import jax.numpy as jnp


@dataclasses.dataclass(frozen=True)
class ButcherTableau:
    """An explicit Runge-Kutta scheme: nodes c, matrix a (lower triangular), weights b."""

    a: tuple[tuple[float, ...], ...]
    b: tuple[float, ...]
    c: tuple[float, ...]
    order: int


RK4 = ButcherTableau(
    a=((), (0.5,), (0.0, 0.5), (0.0, 0.0, 1.0)),
    b=(1 / 6, 1 / 3, 1 / 3, 1 / 6),
    c=(0.0, 0.5, 0.5, 1.0),
    order=4,
)
EULER = ButcherTableau(a=((),), b=(1.0,), c=(0.0,), order=1)


def explicit_rk_step(field: Callable, tableau: ButcherTableau = RK4) -> Callable:
    """Returns `step(z, t, dt, args, key) -> z_next` for the tableau; `key` is unused."""

    def step(z, t, dt, args, key=None):
        del key
        stages = []
        for a_row, c_i in zip(tableau.a, tableau.c):
            z_i = z
            for a_ij, k_j in zip(a_row, stages):
                if a_ij != 0.0:
                    z_i = z_i + (dt * a_ij) * k_j
            stages.append(field(z_i, t + c_i * dt, args))
        increment = sum(b_i * k_i for b_i, k_i in zip(tableau.b, stages) if b_i != 0.0)
        return z + dt * increment

    step.order = tableau.order
    return step


def stochastic_rk_step(field: Callable, diffusivity: float, tableau: ButcherTableau = RK4) -> Callable:
    """Returns a step for dz = w(z, t) dt + sqrt(2 kappa) dW (additive Brownian forcing).

    The drift advances with the deterministic tableau and the Brownian increment
    sqrt(2 kappa dt) xi, xi ~ N(0, I), is added once per step. For additive noise this is
    strong order 1 (like Euler-Maruyama) and reduces exactly to the tableau when kappa = 0.
    """
    drift_step = explicit_rk_step(field, tableau)
    if diffusivity == 0.0:
        return drift_step

    def step(z, t, dt, args, key):
        noise = jax.random.normal(key, z.shape, z.dtype)
        return drift_step(z, t, dt, args) + jnp.sqrt(2.0 * diffusivity * dt).astype(z.dtype) * noise

    step.order = 1
    return step


def record(step: Callable, z0, t0, dt, n_obs: int, stride: int, args, key=None):
    """Returns the states after every `stride` steps: `(obs, *z0.shape)`.

    Observation j (j = 1..n_obs) is the state at t0 + j * stride * dt; z0 itself is not
    recorded. Time is computed as t0 + n dt from the integer step count n (no drift from
    summing dt). `key` (a PRNG key) feeds stochastic steps; step n uses fold_in(key, n).
    """
    dtype = z0.dtype
    dt = jnp.asarray(dt, dtype)
    t0 = jnp.asarray(t0, dtype)
    if key is None:
        key = jax.random.key(0)

    def one_step(n, z):
        return step(z, t0 + n.astype(dtype) * dt, dt, args, jax.random.fold_in(key, n))

    def one_obs(z, j):
        # Static trip count (0..stride) so that reverse-mode differentiation works (4D-Var).
        z = jax.lax.fori_loop(0, stride, lambda i, z: one_step(j * stride + i, z), z)
        return z, z

    _, states = jax.lax.scan(one_obs, z0, jnp.arange(n_obs))
    return states
