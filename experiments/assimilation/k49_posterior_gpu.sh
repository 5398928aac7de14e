#!/usr/bin/env bash
# The K = 49 posterior mean (posterior-mean:var, 512 particles x 2 runs) of the assimilation benchmark's flows on one
# GPU machine: one process per flow (`experiments.assimilation.benchmark --shard F/16`), PARALLEL at a time on the one GPU,
# waves until LIMIT seconds; a flow that does not finish in time writes nothing. Per-field files go to $OUT/pm,
# packed as $OUT/pm.tgz with each flow's log (a device call returns at most 8 files). On an H200, sparse100-noisy-4
# took 124-170 s a field with four at a time (against 35-43 minutes on a 2-core CPU). METHOD picks the sampler row
# (posterior-mean:var by default; posterior-mean starts from the prior, the check of the var start's spread), PARTICLES
# its particles per run, SAMPLE_SET its other settings, space-separated NAME=VALUE pairs (none: `sample`'s defaults;
# SAMPLE_SET="final_moves=1 target_acceptance=0.65 max_leapfrog_steps=16" is the earlier kernel, whose sample a 2-core
# CPU measured 0.86x and 0.73x as wide as the Laplace Gaussian on flows 5 and 12, the defaults' 0.94x and 0.90x at
# 2.6-2.8x the HMC gradients; the H200 times above are the earlier kernel's).
#
#     OUT=DIR REGIME=sparse100-noisy-4 FLOWS="4 8 9 10" PARALLEL=4 LIMIT=540 bash experiments/assimilation/k49_posterior_gpu.sh
#     python -m experiments.assimilation.benchmark --merge results/assimilation_benchmark.fields.csv \
#         results/k49/hybrid_est.fields.csv results/k49/pm_*.fields.csv --yardstick posterior-mean:var \
#         --yardstick-flows --out results/assimilation_benchmark_posterior_k49.csv
set -u
OUT=${OUT:-runs/k49_gpu}
REGIME=${REGIME:-sparse100-noisy-4}
FLOWS=${FLOWS:-$(seq 0 15)}
PARALLEL=${PARALLEL:-4}
LIMIT=${LIMIT:-540}
METHOD=${METHOD:-posterior-mean:var}
PARTICLES=${PARTICLES:-512}
SAMPLE_SET=${SAMPLE_SET:-}
SET_OPTIONS=()
for pair in $SAMPLE_SET; do SET_OPTIONS+=(--sample-set "$pair"); done
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1  # several processes share the GPU's memory
start=$(date +%s)
elapsed() { echo $(( $(date +%s) - start )); }
mkdir -p "$OUT/pm"
set -- $FLOWS
while [ $# -gt 0 ]; do
    left=$(( LIMIT - $(elapsed) ))
    [ $left -lt 60 ] && { echo "[$(elapsed) s] stopping: flows $* not started"; break; }
    echo "[$(elapsed) s] flows$(printf ' %s' "${@:1:$PARALLEL}"), at most $left s"
    for f in "${@:1:$PARALLEL}"; do
        timeout $left python -m experiments.assimilation.benchmark --fields 16 --shard "$f/16" --regimes "$REGIME" \
            --methods "$METHOD" --sample-particles "$PARTICLES" \
            "${SET_OPTIONS[@]}" --out "$OUT/pm/pm_${REGIME}_f$f.csv" \
            > "$OUT/pm/log_f$f.txt" 2>&1 &
    done
    wait
    shift $(( $# < PARALLEL ? $# : PARALLEL ))
done
ls "$OUT"/pm/*.fields.csv 2>/dev/null
(cd "$OUT" && tar czf pm.tgz pm)
