#!/usr/bin/env bash
# The training objectives compared at the paper's scale, on one GPU machine, in one call of at most LIMIT seconds:
#   1. the paper's data: `lagda simulate --preset paper`, seeds 1 (train) and 2 (test), N fields each (32,268);
#   2. experiments/learning/objectives.py on it: cond, joint, sigmoid, kernel_set, sogclr and nuclr train the same encoder
#      (the `learned` preset with its ridge head, as in the objectives table of docs/results/training-objectives.md) for
#      EPOCHS epochs on all N training fields, one seed; each is scored by R@1/5/10 in both directions against the
#      whole N-field test set; FIELDS=8 adds the downstream field errors of embed and hybrid on 8 held-out flows per
#      regime (the other columns of that table; off by default, as their cost on a GPU is not measured yet).
# A row is written as soon as its objective is scored, and `timeout` stops the study at the deadline; the same call
# again (same WORK and OUT) keeps the rows it has and goes on with the next objective.
# Writes objectives.csv, objectives_summary.csv, objectives_paper.png and the log under $OUT.
#
#     OUT=DIR LIMIT=560 bash experiments/learning/objectives_gpu.sh
#     N=256 EPOCHS=1 FIELDS=2 BANK=256 bash experiments/learning/objectives_gpu.sh    # a smoke test on a CPU
set -u
OUT=${OUT:-runs/objectives_gpu_out}
LIMIT=${LIMIT:-560}
WORK=${WORK:-/tmp/lagda_gpu}
N=${N:-32268}
EPOCHS=${EPOCHS:-20}
FIELDS=${FIELDS:-0}
BANK=${BANK:-100000}
source "$(dirname "$0")/paper_data.sh"  # OUT, WORK, say; the paper's data in WORK

budget=$(( LIMIT - $(elapsed) - 20 ))
batches=$(( N / 128 ))
say "objectives, $EPOCHS epochs of $batches batches each, at most $budget s"
timeout "$budget" python3 -m experiments.learning.objectives --train "$WORK/paper_${N}_1.nc" --test "$WORK/paper_${N}_2.nc" \
    --n-train "$N" --library "$N" --steps $(( EPOCHS * batches )) --seeds 0 --fields "$FIELDS" --bank-size "$BANK" \
    --skip-gaussian --resume --work "$WORK/objectives" --out-dir "$OUT" --figure "$OUT/objectives_paper.png"
say "objectives exit $?"
