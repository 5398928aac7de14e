#!/usr/bin/env bash
# The `learned` preset (its misfit head) on the paper's data, on one GPU machine, in one call of at most LIMIT
# seconds:
#   1. the paper's data: `lagda simulate --preset paper`, seeds 1 (train) and 2 (test), N fields each (32,268);
#   2. `lagda train --preset learned` for EPOCHS epochs, R@1/5/10 of 4,096-field libraries every EVAL_EVERY epochs
#      (metrics.jsonl, with the training seconds), stopped by `timeout` at the deadline (`--resume` continues it);
#   3. the last checkpoint's R@k against the whole test and train sets (what the paper's text names) and
#      averaged over the disjoint 128-field libraries (the training batch).
# Writes the log, run config, metrics and evaluations under $OUT (default runs/learned_gpu_out). The retrieval
# ceiling on the same test set is experiments/learning/retrieval_ceiling_gpu.sh. The same script ran on the 2-core CPU
# with EPOCHS=30 before the coefficient negatives (results/learned_paper_cpu/log.txt) and with EPOCHS=10 and 20
# after (results/learned_paper_negatives_cpu*/log.txt).
#
#     OUT=DIR LIMIT=420 bash experiments/learning/learned_gpu.sh
#     N=256 EPOCHS=1 EVAL_LIBRARY=128 NEGATIVES=64 bash experiments/learning/learned_gpu.sh    # a smoke test on a CPU
set -u
OUT=${OUT:-runs/learned_gpu_out}
LIMIT=${LIMIT:-420}
WORK=${WORK:-/tmp/lagda_gpu}
N=${N:-32268}
EPOCHS=${EPOCHS:-20}  # on a CPU, whole-test-set R@1 98.6 / 99.2 after 10, 98.9 / 99.5 after 20, 98.8 / 99.5 after 40
NEGATIVES=${NEGATIVES:-2048}  # the preset's; at most N - 128
EVAL_EVERY=${EVAL_EVERY:-5}
EVAL_LIBRARY=${EVAL_LIBRARY:-4096}
source "$(dirname "$0")/paper_data.sh"  # OUT, WORK, say; the paper's data in WORK

budget=$(( LIMIT - $(elapsed) - 120 ))
say "train --preset learned, $EPOCHS epochs, at most $budget s"
resume=""
[ -d "$WORK/learned/checkpoints" ] && resume="--resume"
timeout "$budget" python3 -m lagda train --preset learned --epochs "$EPOCHS" --eval-every "$EVAL_EVERY" \
    --eval-library "$EVAL_LIBRARY" --negatives "$NEGATIVES" --train "$WORK/paper_${N}_1.nc" --test "$WORK/paper_${N}_2.nc" \
    --run-dir "$WORK/learned" --keep-checkpoints 1 --no-progress $resume
say "train exit $?"
cp "$WORK/learned/metrics.jsonl" "$WORK/learned/config.json" "$OUT/"

say "evaluate: the whole sets, then 128-field libraries"
bash experiments/learning/evaluate_whole_sets.sh "$WORK/learned" "$OUT" "$WORK/paper_${N}_1.nc" "$WORK/paper_${N}_2.nc"
say "done"
