#!/bin/bash
# GPU checks of issues 37 (LoRA) and 36 (memory plan), ~4 minutes on one GPU, in the repo root:
#   1. the memory plan's GPU cross-check: the 0.5B update (all 24 layers unrolled as runs do,
#      24 scanned, 4 unrolled; 64 rows x (128 + 512), 2 micro-batches) compiled on the GPU
#      (`memory_analysis()`) and run once on zeros (`memory_stats()` peak), to compare with
#      the same points planned on a CPU (docs/performance.md, Issue 36);
#   2. the LoRA sampler, adapters merged once per rollout vs unmerged in every step,
#      qwen2.5-0.5b shape, bf16, rank 16 on all targets, 256 and 64 rows x (128 + 512) tokens,
#      one cache phase, no compaction (`scripts/lora_bench.py rollout`; its compile on a CPU:
#      ~26 CPU-s merged, ~41 unmerged).
# Each step runs under `timeout` on its own (one failing does not stop the others); logs and
# JSON go to $OUT; a short table is printed last.
#   bash scripts/gpu_37.sh                  # on the device machine
#   SMALL=1 OUT=/tmp/g37 bash scripts/gpu_37.sh   # the same logic with tiny sizes on a CPU
set -o pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/gpu_37_out}
mkdir -p "$OUT"
PY=${PY:-python}
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}

if [ "${SMALL:-0}" = 1 ]; then
  MEM="--preset tiny --prompts 4 --rows 8 --prompt-len 8 --new-tokens 8 --microbatches 2"
  L_SHALLOW="2 2"; L_FULL="2 2"
  ROLL="--preset tiny --rank 4 --prompts 4 --prompt-len 8 --new-tokens 16 --reps 2"
  R_BIG=8; R_SMALL=4; T=(200 150 150 200 150)
else
  MEM="--preset qwen2.5-0.5b --prompts 8 --rows 64 --prompt-len 128 --new-tokens 512 --microbatches 2"
  L_SHALLOW="4 4"; L_FULL="24 24"
  ROLL="--preset qwen2.5-0.5b --rank 16 --prompts 32 --prompt-len 128 --new-tokens 512 --reps 2"
  R_BIG=256; R_SMALL=64; T=(75 30 50 55 30)
fi

step() {  # step NAME TIMEOUT CMD...: stdout -> $OUT/NAME.json, stderr -> $OUT/NAME.log
  local name=$1 limit=$2; shift 2
  local start=$SECONDS
  echo "--- $name (limit ${limit}s) $(date +%T)"
  timeout "$limit" "$@" > "$OUT/$name.json" 2> "$OUT/$name.log"
  local rc=$?
  echo "    rc=$rc in $((SECONDS - start))s"
  [ $rc -ne 0 ] && tail -3 "$OUT/$name.log"
  return 0
}

$PY -c "import jax; print(jax.__version__, jax.devices())" 2>&1 | tail -1
step lora_rollout_big "${T[0]}" $PY scripts/lora_bench.py rollout --rows $R_BIG \
  --modes merged,unmerged $ROLL
step mem_gpu_shallow "${T[1]}" $PY scripts/memory_plan.py --here --run --program update \
  --layers $L_SHALLOW $MEM
step mem_gpu_full "${T[2]}" $PY scripts/memory_plan.py --here --run --program update \
  --layers $L_FULL $MEM
step lora_rollout_small "${T[3]}" $PY scripts/lora_bench.py rollout --rows $R_SMALL \
  --modes merged,unmerged $ROLL
step mem_gpu_full_scanned "${T[4]}" $PY scripts/memory_plan.py --here --run --program update \
  --layers $L_FULL --scan-unroll 1 $MEM

echo "=== summary (GiB; plan = arguments + temporaries + outputs - aliased)"
$PY - "$OUT" <<'EOF'
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
    except Exception as e:  # noqa: BLE001 - a step that failed or timed out.
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
print("| rollout | rows | merged s (tok/s) | unmerged s (tok/s) | base s | unmerged/merged |")
print("|---|---|---|---|---|---|")
for name in ("lora_rollout_big", "lora_rollout_small"):
    r = load(name)
    if "error" in r:
        print(f"| {name} | failed ({r['error']}) | | | | |")
        continue
    f = lambda k: (f"{r[k + '_rollout_s']:.3f} ({r[k + '_tokens_per_s']:.0f})"  # noqa
                   if k + "_rollout_s" in r else "-")
    base = f"{r['base_rollout_s']:.3f}" if "base_rollout_s" in r else "-"
    print(f"| {r['device']} {r['preset']} | {r['rows']} | {f('merged')} | {f('unmerged')} | "
          f"{base} | {r['unmerged_over_merged']:.3f} |")
EOF
