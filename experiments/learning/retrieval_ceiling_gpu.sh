#!/usr/bin/env bash
# The retrieval ceiling against the whole 32,268-field test set of the paper's data, on one GPU machine, in one
# call of at most LIMIT seconds (experiments/learning/retrieval_ceiling.py; the 4,096-field CPU run is in
# docs/results/training-ceiling.md):
#   1. the paper's data: `lagda simulate --preset paper`, seed 2 (test, 32,268 fields) and the first NOISE_FIELDS
#      fields of seed 1 (train: the velocity-error estimate), unless WORK already holds them (paper_gpu.sh's
#      paper_1.nc / paper_2.nc are used as they are);
#   2. the likelihood ranking and the posterior mean's cosine ranking at STRIDES, and the `cpu` preset's physics
#      estimate, R@1/5/10 in both directions against the whole test set, with the misfit margins.
# Writes the log and retrieval_ceiling_paper.csv under $OUT (default runs/ceiling_gpu_out).
#
#     OUT=DIR LIMIT=420 STRIDES=1 bash experiments/learning/retrieval_ceiling_gpu.sh
set -u
OUT=${OUT:-runs/ceiling_gpu_out}
LIMIT=${LIMIT:-420}
WORK=${WORK:-/tmp/lagda_gpu}
STRIDES=${STRIDES:-1}
NOISE_FIELDS=${NOISE_FIELDS:-1024}
mkdir -p "$OUT" "$WORK"
start=$(date +%s)
elapsed() { echo $(( $(date +%s) - start )); }
say() { echo "[$(elapsed) s] $*" | tee -a "$OUT/log"; }

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee -a "$OUT/log"
python3 -c "import jax, numpy, netCDF4; print('jax', jax.__version__, 'numpy', numpy.__version__, jax.devices())" \
    | tee -a "$OUT/log" || exit 1

test_file="$WORK/paper_2.nc"
if [ ! -f "$test_file" ]; then
    say "simulate --preset paper --seed 2"
    python3 -m lagda simulate --preset paper --seed 2 --out "$test_file" --chunk-size 32768 2>&1 | tail -1 \
        | tee -a "$OUT/log"
fi
train_file="$WORK/paper_1.nc"
if [ ! -f "$train_file" ]; then
    train_file="$WORK/paper_1_first$NOISE_FIELDS.nc"  # a seed's first fields do not depend on --n-samples
    if [ ! -f "$train_file" ]; then
        say "simulate --preset paper --seed 1 --n-samples $NOISE_FIELDS"
        python3 -m lagda simulate --preset paper --seed 1 --n-samples "$NOISE_FIELDS" --out "$train_file" 2>&1 \
            | tail -1 | tee -a "$OUT/log"
    fi
fi
[ -f "$test_file" ] && [ -f "$train_file" ] || { say "simulation failed"; exit 1; }

budget=$(( LIMIT - $(elapsed) - 10 ))
say "retrieval_ceiling against the whole test set, strides $STRIDES, at most $budget s"
timeout "$budget" python3 -m experiments.learning.retrieval_ceiling --train "$train_file" --test "$test_file" --library 0 \
    --strides "$STRIDES" --noise-fields "$NOISE_FIELDS" --out "$OUT/retrieval_ceiling_paper.csv" 2>&1 \
    | tee -a "$OUT/log"
say "retrieval_ceiling exit ${PIPESTATUS[0]}"
