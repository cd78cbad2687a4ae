#!/usr/bin/env bash
# Issue 52: one decode step per op class on one GPU, in <= 150 s wall (HARD) with compiles: the
# qwen2.5-0.5b sampler (bf16, prompt 128, 512 forced new tokens, one cache phase, the Pallas
# decode attention) at 256 and 64 rows compiled in parallel, one profiled rollout each,
# `scripts/profile_summary.py --steps 511`; then, if time is left, the 64-row sampler with the
# decode loop in a CUDA graph, and the kernel's µs per call by block and splits with the GPU
# to itself. Run from the repo root:
#
#     OUT=/some/dir bash scripts/gpu_52_profile.sh
#     SMALL=1 OUT=/tmp/g52p bash scripts/gpu_52_profile.sh   # tiny sizes on CPU (the logic)
#
# $OUT receives two files: summary.txt (the per-class tables and the top kernels) and
# logs.tar.gz (every step's log). Needs ml_collections (installed from .whl/ when missing).
set -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD RLVR_JAX_DEBUG=1
OUT=${OUT:-/tmp/gpu52p-out}
LOG=${LOG:-/tmp/gpu52p-logs}
mkdir -p "$OUT" "$LOG"
PY=${PY:-python}
HARD=${HARD:-150}
export JAX_COMPILATION_CACHE_DIR=${JAX_COMPILATION_CACHE_DIR:-/tmp/gpu52-jax-cache}
export JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0 JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES=0
if [ "${SMALL:-0}" = 1 ]; then
  Q="--preset bench --dtype float32 --samples 2 --prompt-len 16 --new-tokens 24"
  P256=4; P64=2; STEPS=23; KERNEL=interpret
  SWEEP="--preset bench --dtype bfloat16 --rows 8 --slots 40 --impls interpret --sweep-only"
else
  Q="--preset qwen2.5-0.5b --dtype bfloat16 --samples 8 --prompt-len 128 --new-tokens 512"
  P256=32; P64=8; STEPS=511; KERNEL=pallas
  SWEEP="--preset qwen2.5-0.5b --dtype bfloat16 --rows 256 --slots 639 --impls pallas --sweep-only"
fi
ARGS="$Q --force-length --compact-ratio 0 --cache-window 0 --decode-attention $KERNEL"
: > "$LOG/status.txt"

if ! $PY -c "import ml_collections" 2>/dev/null; then
  $PY -m pip install -q --no-index --find-links .whl ml_collections > "$LOG/pip.log" 2>&1 \
    || $PY -m pip install -q --no-index --no-deps .whl/*.whl >> "$LOG/pip.log" 2>&1
fi

step() {  # step NAME TIMEOUT COMMAND...: runs it, logs to $LOG/NAME.log, records its status.
  local name=$1 limit=$2; shift 2
  local left=$((HARD - SECONDS))
  if [ "$left" -le 3 ]; then
    echo "$name skipped (out of time at ${SECONDS}s)" | tee -a "$LOG/status.txt"; return
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  local t0=$SECONDS
  timeout "$limit" "$@" > "$LOG/$name.log" 2>&1
  echo "$name rc=$? $((SECONDS - t0))s" | tee -a "$LOG/status.txt"
}

for rows in 256 64; do
  p=$P256; [ "$rows" = 64 ] && p=$P64
  step "compile_f$rows" 100 env XLA_PYTHON_CLIENT_PREALLOCATE=false \
    $PY scripts/benchmark.py sample $ARGS --prompts "$p" --compile-only &
done
wait
for rows in 256 64; do
  p=$P256; [ "$rows" = 64 ] && p=$P64
  rm -rf "$LOG/prof_f$rows"
  step "f$rows" 80 $PY scripts/benchmark.py sample $ARGS --prompts "$p" --repeats 1 \
    --profile-dir "$LOG/prof_f$rows"
  step "profile_summary_f$rows" 40 $PY scripts/profile_summary.py "$LOG/prof_f$rows" \
    --top 30 --steps "$STEPS" &
done
wait
# If time is left: the 64-row sampler with the decode loop itself in a CUDA graph (XLA command
# buffers for WHILE/CONDITIONAL: no host sync per step), then the kernel sweep.
step f64_cmdbuf 80 env XLA_FLAGS="--xla_gpu_enable_command_buffer=FUSION,CUBLAS,CUBLASLT,CUSTOM_CALL,CUDNN,WHILE,CONDITIONAL" \
  $PY scripts/benchmark.py sample $ARGS --prompts "$P64" --repeats 1
step sweep 40 $PY scripts/decode_attention_check.py $SWEEP

{
  for rows in 256 64; do
    echo "== f$rows: $(grep -h '^{' "$LOG/f$rows.log" 2>/dev/null | tail -1)"
    cat "$LOG/profile_summary_f$rows.log" 2>/dev/null
  done
  echo "== f64 with WHILE/CONDITIONAL command buffers: $(grep -h '^{' "$LOG/f64_cmdbuf.log" 2>/dev/null | tail -1)"
  echo "== sweep (kernel us per call, 256 rows x 639 slots)"
  grep -h '^{' "$LOG/sweep.log" 2>/dev/null
  echo "== status"; cat "$LOG/status.txt"; echo "total ${SECONDS}s"
} > "$OUT/summary.txt"
tar -czf "$OUT/logs.tar.gz" -C "$LOG" --exclude='prof_*' . 2>/dev/null
cat "$OUT/summary.txt"
