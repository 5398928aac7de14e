#!/usr/bin/env bash
# A trained run's R@k against the whole test and train sets and averaged over their disjoint 128-field
# libraries (the training batch), written as final_{test,train}.json and blocks128_{test,train}.json in OUT.
# Called by the GPU scripts (paper_gpu.sh, learned_gpu.sh) after training.
#
#     bash experiments/learning/evaluate_whole_sets.sh RUN OUT TRAIN.nc TEST.nc
set -u
run=$1; out=$2; train=$3; test=$4
for split in test train; do
    data="$test"; [ $split = train ] && data="$train"
    echo "evaluate $split: the whole set, then 128-field libraries"
    python3 -m lagda evaluate --model "$run" --data "$data" --split $split --out "$out/final_$split.json"
    python3 -m lagda evaluate --model "$run" --data "$data" --split $split --library-size 128 --blocks \
        --out "$out/blocks128_$split.json"
done
