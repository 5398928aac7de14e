"""The optimiser of contrastive training (its state is part of every checkpoint)."""

from __future__ import annotations

import optax

from lagda.learning.config import TrainConfig


def make_optimizer(config: TrainConfig, total_steps: int) -> optax.GradientTransformation:
    """Returns the optax chain: optional global-norm clipping, then Adam(W) on a warm-up(+cosine) lr."""
    if config.cosine_decay:
        lr = optax.warmup_cosine_decay_schedule(0.0, config.lr, config.warmup, max(total_steps, config.warmup + 1))
    elif config.warmup:
        lr = optax.join_schedules([optax.linear_schedule(0.0, config.lr, config.warmup),
                                   optax.constant_schedule(config.lr)],
                                  [config.warmup])
    else:
        lr = config.lr
    parts = [optax.clip_by_global_norm(config.grad_clip)] if config.grad_clip > 0 else []
    if config.optimiser == "adamw":
        parts.append(optax.adamw(lr, weight_decay=config.weight_decay))
    else:
        parts.append(optax.adam(lr))
    return optax.chain(*parts)
