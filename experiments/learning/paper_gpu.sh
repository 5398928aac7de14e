#!/usr/bin/env bash
# The paper preset (section 6.3) on one GPU machine, in one call of at most LIMIT seconds:
#   1. the paper's data: `lagda simulate --preset paper`, seeds 1 (train) and 2 (test), 32,268 fields each;
#   2. the training step's speed per precision and attention kernel (benchmarks/bench_train.py);
#   3. `lagda train --preset paper` for its 20 epochs with the fastest variant that ran, R@1/5/10 of
#      4,096-field libraries after every epoch (metrics.jsonl), stopped by `timeout` at the deadline
#      (then `--resume` continues it);
#   4. the last checkpoint's R@k against the whole 32,268-field sets and averaged over the 252
#      disjoint 128-field libraries (the training batch), train and test.
# Writes the log, run config, metrics and evaluations under $OUT (default runs/paper_gpu_out).
#
#     OUT=DIR LIMIT=580 bash experiments/learning/paper_gpu.sh
set -u
OUT=${OUT:-runs/paper_gpu_out}
LIMIT=${LIMIT:-580}
WORK=${WORK:-/tmp/lagda_gpu}
export XLA_PYTHON_CLIENT_MEM_FRACTION=${XLA_PYTHON_CLIENT_MEM_FRACTION:-0.92}  # float32 steps need ~97 GB
mkdir -p "$OUT" "$WORK"
start=$(date +%s)
elapsed() { echo $(( $(date +%s) - start )); }
say() { echo "[$(elapsed) s] $*"; }

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -c "import jax, flax, optax, orbax.checkpoint, netCDF4; print('jax', jax.__version__, 'flax', flax.__version__, \
'optax', optax.__version__, 'netCDF4', netCDF4.__version__, jax.devices())"

for seed in 1 2; do
    say "simulate --preset paper --seed $seed"
    [ -f "$WORK/paper_$seed.nc" ] || python3 -m lagda simulate --preset paper --seed $seed \
        --out "$WORK/paper_$seed.nc" --chunk-size 32768 || exit 1
done

say "bench_train (at most 150 s)"
timeout 150 python -m benchmarks.bench_train --data "$WORK/paper_1.nc" --steps 10 --json "$OUT/bench_train.json"
variant=$(python3 -c "
import json
try:
    rows = json.load(open('$OUT/bench_train.json'))
    best = max(rows, key=lambda r: r['samples_per_s'])
    print(best['compute_dtype'], best['attention'])
except Exception:
    print('bfloat16 xla')")
read -r dtype attention <<< "$variant"

budget=$(( LIMIT - $(elapsed) - 120 ))
say "train --preset paper --compute-dtype $dtype --attention $attention, at most $budget s"
resume=""
[ -d "$WORK/run/checkpoints" ] && resume="--resume"
timeout "$budget" python3 -m lagda train --preset paper --epochs 20 --compute-dtype "$dtype" --attention "$attention" \
    --train "$WORK/paper_1.nc" --test "$WORK/paper_2.nc" --run-dir "$WORK/run" --eval-library 4096 \
    --keep-checkpoints 1 --no-progress $resume
say "train exit $?"
cp "$WORK/run/metrics.jsonl" "$WORK/run/config.json" "$OUT/"

say "evaluate: the whole sets, then 128-field libraries"
bash experiments/learning/evaluate_whole_sets.sh "$WORK/run" "$OUT" "$WORK/paper_1.nc" "$WORK/paper_2.nc"
say "done"
