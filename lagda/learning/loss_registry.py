"""The contrastive losses by name (`LOSSES`): what `lagda train --loss NAME` minimises, one class per loss.

A loss is called on one batch of the trained model (lagda.learning.model.Contrastive) and returns the value the
optimiser minimises:

    loss = LOSSES[config.loss]
    value = loss(model, coef, positions, config)  # a stateless loss: the batch loss, a scalar

Its class attributes tell training what else it needs, so that no part of training asks for a loss by name:

* `stateful`: the loss keeps a state per training pair across steps (SogCLR, NUCLR: lagda/learning/nuclr.py);
  it is called with that state and returns the new one, and `init_state` makes the first.
* `set_kernel`: the loss scores a pair by the kernel between point sets (lagda/learning/kernel_set.py) on random
  Fourier features: training draws new features every step, the model keeps one draw for evaluation, and
  retrieval embeds track sets.

A new loss is one class here, one entry in `LOSSES` and its name in `lagda.learning.config.LossKind` (the values
`TrainConfig` accepts and the command line offers; a test keeps the two equal).
"""

from __future__ import annotations

from typing import ClassVar

import jax.numpy as jnp

from lagda.learning import kernel_set, losses, nuclr
from lagda.learning.encoders import embed_coefficients, encode_track_points, encode_tracks


def masked_coefficients(model, coef):
    """Returns the masked coefficient embedding g_u(c) of a batch.

    Parameters
    ----------
    model : lagda.learning.model.Contrastive
        The trained model: its `coef_embedding` and similarity `mask` `(n_e,)`.
    coef : complex array `(batch, mode)`
        The flows' Fourier coefficients.

    Returns
    -------
    array `(batch, n_e)`
    """
    return embed_coefficients(coef, model.coef_embedding) * model.mask[...][None]


def embeddings(model, coef, positions, estimate=None, mask=None):
    """Returns the masked embeddings (g_u(c), g_v(v)) of a batch, each `(batch, n_e)`.

    Parameters
    ----------
    model : lagda.learning.model.Contrastive
        The trained model.
    coef : complex array `(batch, mode)`
        The flows' Fourier coefficients.
    positions : array `(batch, drifter, obs, 2)`
        The tracks.
    estimate : array `(batch, drifter, n_e)`, optional
        The precomputed physics feature (None: the model has none).
    mask : bool array `(batch, drifter, obs)`, optional
        The observations the set encoder reads (None: all).
    """
    v_emb = encode_tracks(model.encoder, positions, estimate, mask=mask) * model.mask[...][None]
    return masked_coefficients(model, coef), v_emb


def similarity_logits(model, coef, positions, config, estimate=None, mask=None):
    """Returns (logits s(g_u(c), g_v(v)) / tau `(batch, batch)`, g_v(v) `(batch, n_e)`, tau) of a batch.

    The similarity is `config.similarity` at the model's temperature tau = exp(log_tau); rows index the
    coefficients, columns the tracks (lagda.learning.losses).
    """
    tau = jnp.exp(model.log_tau[...])
    u_emb, v_emb = embeddings(model, coef, positions, estimate, mask)
    return losses.similarity(u_emb, v_emb, config.similarity, tau), v_emb, tau


class Loss:
    """A contrastive loss of lagda's training: its name and what training needs for it.

    Attributes
    ----------
    name : str
        The value of `TrainConfig.loss` (and `lagda train --loss`).
    stateful : bool
        The loss keeps a state per training pair (then `__call__` takes it and `init_state` makes it).
    set_kernel : bool
        The loss scores pairs by the kernel set similarity on random Fourier features.
    """

    name: ClassVar[str]
    stateful: ClassVar[bool] = False
    set_kernel: ClassVar[bool] = False

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class Cond(Loss):
    """L_cond (eq. 12): the weighted sum of the two conditional InfoNCE halves, with optional extra negatives."""

    name = "cond"

    def __call__(self, model, coef, positions, config, estimate=None, mask=None, rff=None, negatives=None):
        """Returns the batch loss, a scalar.

        Parameters
        ----------
        model, coef, positions, estimate, mask
            As for `embeddings`.
        config : lagda.learning.config.TrainConfig
            `similarity`, `lambda_u`, `lambda_v`.
        rff : ignored
            The step's random features (read by the set-kernel loss only).
        negatives : complex array `(K, mode)`, optional
            Coefficients of other training pairs added to each track's softmax over coefficients
            (`config.negatives`).
        """
        logits, v_emb, tau = similarity_logits(model, coef, positions, config, estimate, mask)
        extra = None
        if negatives is not None:
            extra = losses.similarity(masked_coefficients(model, negatives), v_emb, config.similarity, tau)
        return losses.conditional_loss(logits, config.lambda_u, config.lambda_v, extra)


class Joint(Loss):
    """L_joint (Optimization Problem 3.7, lagda.learning.losses.joint_loss) on the similarity logits."""

    name = "joint"

    def __call__(self, model, coef, positions, config, estimate=None, mask=None, rff=None, negatives=None):
        """Returns the batch loss, a scalar (arguments as for `Cond`; `rff` and `negatives` are ignored)."""
        return losses.joint_loss(similarity_logits(model, coef, positions, config, estimate, mask)[0])


class Sigmoid(Loss):
    """The pairwise sigmoid loss (SigLIP, lagda.learning.losses.sigmoid_loss) on the similarity logits, with the
    model's trained bias."""

    name = "sigmoid"

    def __call__(self, model, coef, positions, config, estimate=None, mask=None, rff=None, negatives=None):
        """Returns the batch loss, a scalar (arguments as for `Cond`; `rff` and `negatives` are ignored)."""
        return losses.sigmoid_loss(similarity_logits(model, coef, positions, config, estimate, mask)[0],
                                   model.bias[...])


class KernelSet(Loss):
    """L_cond on the kernel between the coefficient's and the track's point sets (lagda/learning/kernel_set.py)."""

    name = "kernel_set"
    set_kernel = True

    def __call__(self, model, coef, positions, config, estimate=None, mask=None, rff=None, negatives=None):
        """Returns the batch loss, a scalar (arguments as for `Cond`; `negatives` is ignored).

        Parameters
        ----------
        rff : (omega, beta), optional
            The step's random-feature draw (lagda.learning.kernel_set.draw_frequencies); None: the model's
            stored evaluation draw.
        """
        tau = jnp.exp(model.log_tau[...])
        u_emb = masked_coefficients(model, coef)
        v_points = encode_track_points(model.encoder, positions, estimate, mask=mask) * model.mask[...][None, None]
        omega, beta = (model.rff_omega[...], model.rff_beta[...]) if rff is None else rff
        logits = kernel_set.kernel_set_logits(model.coefficient_points(u_emb), v_points, omega, beta,
                                              config.kernel_alpha1, config.kernel_alpha2, tau)
        return losses.conditional_loss(logits, config.lambda_u, config.lambda_v)


class PerPairState(Loss):
    """A loss with a state per training pair, moved on by every step (lagda/learning/nuclr.py); tau is fixed."""

    stateful = True

    def __call__(self, model, coef, positions, config, loss_state, index, run_length, estimate=None, mask=None):
        """Returns (eq. 15 surrogate, (Psi estimate, new per-pair state)) of a batch.

        Parameters
        ----------
        model, coef, positions, config, estimate, mask
            As for `Cond`; `config.tau` is the fixed temperature.
        loss_state : dict
            The state of every training pair (`init_state`).
        index : int array `(batch,)`
            The batch's training-pair indices.
        run_length : (int, int, int)
            (training pairs, total steps, steps per epoch).
        """
        u_emb, v_emb = embeddings(model, coef, positions, estimate, mask)
        sim = losses.similarity(u_emb, v_emb, config.similarity, 1.0)
        n, total_steps, steps_per_epoch = run_length
        return nuclr.nuclr_objective(sim, loss_state, index, config.tau, n, config, total_steps, steps_per_epoch)

    def init_state(self, n: int, config) -> dict:
        """Returns the first state of `n` training pairs (lagda.learning.nuclr.init_state)."""
        return nuclr.init_state(n, config)


class SogCLR(PerPairState):
    """SogCLR: the global contrastive loss over all training pairs (nuclr.py with zeta = xi = 0 throughout)."""

    name = "sogclr"


class NUCLR(PerPairState):
    """NUCLR (Wang et al., Algorithm 1): SogCLR with a learned weight zeta_j per candidate (nuclr.py)."""

    name = "nuclr"


LOSSES: dict[str, Loss] = {loss.name: loss for loss in (Cond(), Joint(), Sigmoid(), KernelSet(), SogCLR(), NUCLR())}
