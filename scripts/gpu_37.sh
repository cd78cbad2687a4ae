#!/bin/bash
# GPU checks of issues 37 (LoRA) and 36 (memory plan) on one GPU, <= ~4 minutes wall
# (HARD seconds: a step that would start later is skipped), in the repo root:
#   - the LoRA sampler, adapters merged once per rollout vs unmerged in every decode step,
#     qwen2.5-0.5b shape, bf16, rank 16 on all targets, 256 and 64 rows x (128 + 512) tokens,
#     one cache phase, no compaction (`scripts/lora_bench.py rollout`);
#   - the memory plan's GPU cross-check: the 0.5B update (64 rows x (128 + 512), 2
#     micro-batches, GRPO + reference) at 4 layers, 24 scanned and 24 unrolled (the run's
#     default) compiled on the GPU (`memory_analysis()`) and run once on zeros
#     (`memory_stats()` peak), `scripts/memory_plan.py --here --run`.
# Phase 1 compiles the four rollout programs in parallel into a persistent compilation cache
# (and plans + runs the two smaller memory points beside them); phase 2 times the rollouts
# (cache hits); phase 3 runs the 24-layer unrolled point alone (the largest). Every step runs
# under `timeout`, independently. $OUT gets 2 files: summary.txt and gpu37.tar.gz (all logs
# and JSON).
#   bash scripts/gpu_37.sh                          # on the device machine
#   SMALL=1 OUT=/tmp/g37 bash scripts/gpu_37.sh     # the same logic, tiny sizes, on a CPU
set -o pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/gpu_37_out}
mkdir -p "$OUT"
WORK=$(mktemp -d /tmp/gpu37.XXXXXX)
PY=${PY:-python}
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
export JAX_COMPILATION_CACHE_DIR=$WORK/jax_cache
HARD=${HARD:-230}

if [ "${SMALL:-0}" = 1 ]; then
  MEM="--preset tiny --prompts 4 --rows 8 --prompt-len 8 --new-tokens 8 --microbatches 2"
  L_SHALLOW="2 2"; L_FULL="2 2"
  ROLL="--preset tiny --rank 4 --prompts 4 --prompt-len 8 --new-tokens 16 --reps 2"
  R_BIG=8; R_SMALL=4; T_COMPILE=300; T_TIME=200; T_FULL=300; HARD=${HARD_SMALL:-900}
else
  MEM="--preset qwen2.5-0.5b --prompts 8 --rows 64 --prompt-len 128 --new-tokens 512 --microbatches 2"
  L_SHALLOW="4 4"; L_FULL="24 24"
  ROLL="--preset qwen2.5-0.5b --rank 16 --prompts 32 --prompt-len 128 --new-tokens 512 --reps 2"
  R_BIG=256; R_SMALL=64; T_COMPILE=120; T_TIME=45; T_FULL=75
fi

pack() { tar -czf "$OUT/gpu37.tar.gz" -C "$WORK" --exclude jax_cache . 2>/dev/null; }

step() {  # step NAME TIMEOUT CMD...: stdout -> NAME.json, stderr -> NAME.log (in $WORK)
  local name=$1 limit=$2; shift 2
  if [ $((SECONDS + 5)) -ge "$HARD" ]; then echo "--- $name SKIPPED (at ${SECONDS}s)"; return 0; fi
  [ $((SECONDS + limit)) -gt "$HARD" ] && limit=$((HARD - SECONDS))
  local start=$SECONDS
  timeout "$limit" "$@" > "$WORK/$name.json" 2> "$WORK/$name.log"
  local rc=$?
  echo "--- $name: rc=$rc in $((SECONDS - start))s (limit ${limit}s, ended at ${SECONDS}s)"
  [ $rc -ne 0 ] && tail -3 "$WORK/$name.log"
  return 0
}

{
$PY -c "import jax; print(jax.__version__, jax.devices())" 2>&1 | tail -1
echo "== phase 1: compile the rollouts (parallel) + the smaller memory points"
for r in $R_BIG $R_SMALL; do for m in merged unmerged; do
  step "compile_${r}_$m" $T_COMPILE env XLA_PYTHON_CLIENT_PREALLOCATE=false \
    $PY scripts/lora_bench.py rollout --rows $r --modes $m --compile-only $ROLL &
done; done
step mem_gpu_shallow $T_COMPILE env XLA_PYTHON_CLIENT_PREALLOCATE=false \
  $PY scripts/memory_plan.py --here --run --program update --layers $L_SHALLOW $MEM &
step mem_gpu_full_scanned $T_COMPILE env XLA_PYTHON_CLIENT_PREALLOCATE=false \
  $PY scripts/memory_plan.py --here --run --program update --layers $L_FULL --scan-unroll 1 $MEM &
wait
pack
echo "== phase 2: time the rollouts (interleaved merged / unmerged, cache hits)"
step lora_rollout_big $T_TIME $PY scripts/lora_bench.py rollout --rows $R_BIG \
  --modes merged,unmerged $ROLL
step lora_rollout_small $T_TIME $PY scripts/lora_bench.py rollout --rows $R_SMALL \
  --modes merged,unmerged $ROLL
pack
echo "== phase 3: the 24-layer unrolled update alone"
step mem_gpu_full $T_FULL $PY scripts/memory_plan.py --here --run --program update \
  --layers $L_FULL $MEM
pack

echo "=== summary (GiB; plan = arguments + temporaries + outputs - aliased)"
$PY - "$WORK" <<'EOF'
import json, os, sys
out, G = sys.argv[1], 2 ** 30
def load(name):
    try:
        with open(os.path.join(out, name + ".json")) as f:
            text = f.read().strip()
        try:
            return json.loads(text)
        except ValueError:  # Log lines before the JSON line.
            return json.loads(text.splitlines()[-1])
    except Exception as e:  # noqa: BLE001 - a step that failed, timed out or was skipped.
        return {"error": type(e).__name__}
print("| program | backend | layers (scan_unroll) | args | temp | plan peak | "
      "measured peak (before -> after run) | run s |")
print("|---|---|---|---|---|---|---|---|")
for name in ("mem_gpu_full", "mem_gpu_full_scanned", "mem_gpu_shallow"):
    r = load(name)
    if "error" in r:
        print(f"| {name} | failed ({r['error']}) | | | | | | |")
        continue
    g = lambda k: f"{r[k] / G:.2f}" if isinstance(r.get(k), (int, float)) else "-"  # noqa
    print(f"| update {r['preset']} | {r['platform']} | {r['n_layers']} ({r['scan_unroll']}) | "
          f"{g('argument_size_in_bytes')} | {g('temp_size_in_bytes')} | {g('peak_bytes')} | "
          f"{g('device_peak_bytes_in_use_before')} -> {g('device_peak_bytes_in_use_after')} | "
          f"{r.get('run_s', r.get('run_error', '-')[:60])} |")
print("| rollout | rows | merged s (tok/s) | unmerged s (tok/s) | unmerged/merged | compile s "
      "(merged, unmerged; phase 1) |")
print("|---|---|---|---|---|---|")
for name, rows in (("lora_rollout_big", "big"), ("lora_rollout_small", "small")):
    r = load(name)
    if "error" in r:
        print(f"| {name} | failed ({r['error']}) | | | | |")
        continue
    f = lambda k: (f"{r[k + '_rollout_s']:.3f} ({r[k + '_tokens_per_s']:.0f})"  # noqa
                   if k + "_rollout_s" in r else "-")
    c = [load(f"compile_{r['rows']}_{m}").get(f"{m}_compile_s", "-") for m in ("merged", "unmerged")]
    print(f"| {r['device']} {r['preset']} | {r['rows']} | {f('merged')} | {f('unmerged')} | "
          f"{r.get('unmerged_over_merged', float('nan')):.3f} | {c[0]}, {c[1]} |")
EOF
echo "total ${SECONDS}s"
} 2>&1 | tee "$WORK/summary.txt"
cp "$WORK/summary.txt" "$OUT/summary.txt"
pack
