# Sourced by the GPU scripts that train on the paper's data (learned_gpu.sh, objectives_gpu.sh), after they set
# OUT, WORK and N: makes OUT and WORK, defines `say` (a line with the seconds since the start), prints the machine
# and the library versions, and simulates the paper's data unless WORK holds it already:
# $WORK/paper_${N}_1.nc (train, seed 1) and $WORK/paper_${N}_2.nc (test, seed 2), N fields each.
mkdir -p "$OUT" "$WORK"
start=$(date +%s)
elapsed() { echo $(( $(date +%s) - start )); }
say() { echo "[$(elapsed) s] $*"; }

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo "no nvidia-smi"
python3 -c "import jax, flax, optax, netCDF4; print('jax', jax.__version__, 'flax', flax.__version__, \
'optax', optax.__version__, 'netCDF4', netCDF4.__version__, jax.devices())"

for seed in 1 2; do
    say "simulate --preset paper --seed $seed --n-samples $N"
    [ -f "$WORK/paper_${N}_$seed.nc" ] || python3 -m lagda simulate --preset paper --seed $seed --n-samples "$N" \
        --out "$WORK/paper_${N}_$seed.nc" || exit 1
done
