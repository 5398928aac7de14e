"""NUCLR and SogCLR: contrastive objectives with per-sample state kept across mini-batches.

Wang et al., "On discriminative probabilistic modeling for self-supervised representation
learning", section 3.4, Algorithm 1. One direction has anchors x_i and candidates y_j with
E_ij = s(x_i, y_j) (here the similarity of lagda.learning.losses at tau = 1, cosine by
default). Each candidate j carries a learned weight zeta_j; the objectives are

    Phi(zeta) = n^-1 sum_i tau log sum_j exp((E_ij - E_ii - zeta_j) / tau) + n^-1 sum_j zeta_j   (eq. 8/10)
    Psi(w)    = n^-1 sum_i tau log(eps_i + phi_i),  eps_i = exp(-zeta_i / tau),
                phi_i = sum_{j != i} exp((E_ij - E_ii - zeta_j) / tau)                            (eq. 11)

Theorem 2: the minimisers of Phi differ by a constant, and q = exp(zeta* / tau) solves eq. 9
(every column of the row-softmax of (E - zeta) / tau sums to 1). A uniform zeta gives the
global contrastive loss over all n negatives (L_cond^N of the main paper's eq. 12).

Per direction and training sample (indexed by its position in the training set) the state
holds log u (moving average of the mini-batch estimate of phi_i, kept in logs: at tau = 0.01
the exponents reach e^200), a "seen" mask, zeta with its momentum buffer, and the scalar xi.
One step on a batch B of distinct indices (c = (n - 1) / (B - 1)):

1. phi_i = c sum_{j in B \\ i} exp((E_ij - E_ii - zeta_j) / tau);
2. u_i <- (1 - gamma) u_i + gamma phi_i (u_i = phi_i at the first visit);
3. eq. 14: G(zeta_j) = -B^-1 [eps_j / (eps_j + u_j) + c sum_{i in B \\ j} exp((E_ij - E_ii - zeta_j) / tau)
   / (eps_i + u_i)] + 1/n,
   then zeta_j moves (j in B only) by SGD with momentum, m_j <- mu m_j + G_j, zeta_j <- zeta_j - lr m_j,
   lr on a cosine schedule; zeta is frozen for the first `nuclr_freeze` fraction of training;
4. eq. 15: the encoder's gradient is that of the surrogate
   B^-1 sum_i sum_{j != i} stop_gradient[c exp((E_ij - E_ii - zeta_j) / tau) / (eps~ + u_i)] (E_ij - E_ii),
   with the pre-update zeta and eps~ = exp(-xi / tau);
5. xi <- max(xi, |zeta|_inf).

zeta = 0, xi = 0 (never updated) is SogCLR (loss = "sogclr"). The symmetric objective runs
both directions, each with its own state: anchors g_u(c) (candidates the tracks, weight
lambda_v) and anchors g_v(v) (candidates the coefficients, weight lambda_u), averaged as in
L_cond. Settings reproduce the authors' public code instead of the paper: nuclr_xi_rule
"code" (xi = max(xi_0, max zeta), signed, once per epoch), nuclr_zeta_step "code"
(m <- 0.1 m + 0.9 n G; lr divided by 10 at 50% and by 100 at 75% of training) and
nuclr_offdiag_c = False (no factor c on the off-diagonal terms of eq. 14).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import optax

DIRECTIONS = ("coef_anchor", "traj_anchor")  # anchors g_u(c) / g_v(v), each with its own state


def init_direction(n: int, zeta_init: float, xi_init: float, dtype=jnp.float32) -> dict:
    """Returns one direction's state for n training samples: log_u, seen, zeta, momentum `(n,)`, xi `()`."""
    return {"log_u": jnp.zeros((n,), dtype), "seen": jnp.zeros((n,), bool), "zeta": jnp.full((n,), zeta_init, dtype),
            "momentum": jnp.zeros((n,), dtype), "xi": jnp.asarray(xi_init, dtype)}


def learns_zeta(config) -> bool:
    """Returns whether the candidate weights zeta are learned (loss "nuclr") or held at 0 (loss "sogclr").

    Examples
    --------
    >>> from lagda.learning.config import tiny
    >>> learns_zeta(tiny(loss="nuclr")), learns_zeta(tiny(loss="sogclr"))
    (True, False)
    """
    return config.loss == "nuclr"


def init_state(n: int, config) -> dict:
    """Returns the per-sample state of both directions and the step counter (SogCLR: zeta = xi = 0)."""
    zeta0, xi0 = (config.nuclr_zeta_init, config.nuclr_xi_init) if learns_zeta(config) else (0.0, 0.0)
    return {**{d: init_direction(n, zeta0, xi0) for d in DIRECTIONS}, "step": jnp.zeros((), jnp.int32)}


def _off_diagonal(b: int):
    return ~jnp.eye(b, dtype=bool)


def relative_logits(sim, zeta, tau):
    """Returns (E_ij - E_ii - zeta_j) / tau `(B, B)` for similarities E `(B, B)` and zeta `(B,)`."""
    return (sim - jnp.diagonal(sim)[:, None] - zeta[None, :]) / tau


def zeta_objective(sim, zeta, tau):
    """Returns Phi(zeta) of eq. 8/10 over a full similarity matrix E `(n, n)` (anchors in rows)."""
    return weight_objective(sim, zeta, tau) + jnp.mean(zeta)


def weight_objective(sim, zeta, tau):
    """Returns Psi(w) of eq. 11, n^-1 sum_i tau log(eps_i + phi_i), over E `(n, n)`."""
    return jnp.mean(tau * jax.nn.logsumexp(relative_logits(sim, zeta, tau), axis=1))


def popularity_residual(sim, zeta, tau):
    """Returns the relative residual of eq. 9 `(n,)` at q = exp(zeta / tau) (0 at a minimiser of Phi).

    q_j = sum_j' exp(E_j'j / tau) / sum_i' exp(E_j'i' / tau) / q_i', in logs.
    """
    log_q = zeta / tau
    log_rows = jax.nn.logsumexp(sim / tau - log_q[None, :], axis=1)  # (n,) over i'
    log_rhs = jax.nn.logsumexp(sim / tau - log_rows[:, None], axis=0)  # (n,) over j'
    return jnp.expm1(log_rhs - log_q)


def zeta_gradient(logits, zeta, log_u, tau, n: int, c_off: float):
    """Returns eq. 14's G(zeta_j) `(B,)` from logits (E_ij - E_ii - zeta_j) / tau `(B, B)` and log u `(B,)`.

    `c_off`: the factor of the off-diagonal terms (c in the paper, 1 in the public code).
    """
    b = logits.shape[0]
    log_den = jnp.logaddexp(-zeta / tau, log_u)  # log(eps_i + u_i)
    diagonal = jnp.exp(-zeta / tau - log_den)  # eps_j / (eps_j + u_j)
    scaled = jnp.where(_off_diagonal(b), logits - log_den[:, None], -jnp.inf)
    off = c_off * jnp.exp(jax.nn.logsumexp(scaled, axis=0))  # sum over anchors i != j
    return -(diagonal + off) / b + 1.0 / n


def weight_surrogate(sim, logits, log_u, xi, tau, c: float):
    """Returns eq. 15's surrogate B^-1 sum_{i != j} sg[c exp(logits_ij) / (eps~ + u_i)] (E_ij - E_ii).

    Its gradient in the encoder is G(w); `logits` and `log_u` are treated as constants.
    """
    b = sim.shape[0]
    log_den = jnp.logaddexp(-xi / tau, log_u)
    weights = jnp.where(_off_diagonal(b), c * jnp.exp(logits - log_den[:, None]), 0.0)
    return jnp.sum(jax.lax.stop_gradient(weights) * (sim - jnp.diagonal(sim)[:, None])) / b


def zeta_schedule(config, total_steps: int):
    """Returns the zeta learning rate as a function of the step: cosine (paper) or the public code's steps."""
    if config.nuclr_zeta_step == "code":
        return optax.piecewise_constant_schedule(config.nuclr_zeta_lr,
                                                 {total_steps // 2: 0.1, (3 * total_steps) // 4: 0.1})
    return optax.cosine_decay_schedule(config.nuclr_zeta_lr, max(total_steps, 1))


def update_direction(sim, state: dict, index, tau, n: int, config, frozen, lr, epoch_end):
    """Returns (surrogate, batch estimate of Psi, new state) of one direction: steps 1-5 above.

    Parameters
    ----------
    sim
        `(B, B)` similarities E_ij (anchors in rows), differentiable
    index
        `(B,)` distinct sample indices
    state
        this direction's state (`init_direction`)
    n
        training samples.
    frozen
        bool, zeta is not updated (warm-up)
    lr
        zeta learning rate of this step
    epoch_end
        bool, last step of an epoch (the public code's xi rule).
    """
    b = sim.shape[0]
    c = (n - 1) / (b - 1)
    zeta, xi = state["zeta"][index], state["xi"]
    logits = relative_logits(jax.lax.stop_gradient(sim), zeta, tau)
    log_phi = math.log(c) + jax.nn.logsumexp(jnp.where(_off_diagonal(b), logits, -jnp.inf), axis=1)
    gamma = config.nuclr_gamma
    previous = state["log_u"][index]
    moved = jnp.logaddexp(math.log1p(-gamma) + previous, math.log(gamma) + log_phi) if gamma < 1 else log_phi
    log_u = jnp.where(state["seen"][index], moved, log_phi)
    surrogate = weight_surrogate(sim, logits, log_u, xi, tau, c)
    objective = jnp.mean(tau * jnp.logaddexp(-zeta / tau, log_phi))
    dtype = state["zeta"].dtype
    new = {**state, "log_u": state["log_u"].at[index].set(log_u.astype(dtype)),
           "seen": state["seen"].at[index].set(True)}
    if not learns_zeta(config):  # SogCLR: zeta = xi = 0 throughout
        return surrogate, objective, new
    grad = zeta_gradient(logits, zeta, log_u, tau, n, c if config.nuclr_offdiag_c else 1.0)
    if config.nuclr_zeta_step == "code":
        momentum = 0.1 * state["momentum"][index] + 0.9 * n * grad
    else:
        momentum = config.nuclr_zeta_momentum * state["momentum"][index] + grad
    momentum = jnp.where(frozen, state["momentum"][index], momentum)
    moved_zeta = jnp.where(frozen, zeta, zeta - lr * momentum)
    new["momentum"] = state["momentum"].at[index].set(momentum.astype(dtype))
    new["zeta"] = state["zeta"].at[index].set(moved_zeta.astype(dtype))
    if config.nuclr_xi_rule == "code":
        new["xi"] = jnp.where(epoch_end, jnp.maximum(config.nuclr_xi_init, jnp.max(new["zeta"])), xi).astype(dtype)
    else:
        new["xi"] = jnp.maximum(xi, jnp.max(jnp.abs(new["zeta"]))).astype(dtype)
    return surrogate, objective, new


def nuclr_objective(sim, state: dict, index, tau, n: int, config, total_steps: int, steps_per_epoch: int):
    """Returns (surrogate, (Psi estimate, new state)) of both directions for one batch (value_and_grad, has_aux).

    Parameters
    ----------
    sim
        `(B, B)` similarities s(g_u(c_i), g_v(v_j)) at tau = 1, differentiable.
    state
        `init_state(n, config)`
    index
        `(B,)` distinct training-sample indices of the batch.
    total_steps, steps_per_epoch
        the run's length (freeze warm-up, schedules, epoch ends).
    """
    step = state["step"]
    frozen = step < round(config.nuclr_freeze * total_steps)
    lr = zeta_schedule(config, total_steps)(step)
    epoch_end = (step + 1) % steps_per_epoch == 0
    weights = {"coef_anchor": config.lambda_v, "traj_anchor": config.lambda_u}
    surrogate, objective, new = 0.0, 0.0, {"step": step + 1}
    for direction, matrix in zip(DIRECTIONS, (sim, sim.T)):
        s, o, new[direction] = update_direction(matrix, state[direction], index, tau, n, config, frozen, lr, epoch_end)
        surrogate = surrogate + 0.5 * weights[direction] * s
        objective = objective + 0.5 * weights[direction] * o
    return surrogate, (objective, new)
