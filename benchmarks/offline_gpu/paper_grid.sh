#!/usr/bin/env bash
# The one prepared command for a lent H100/H200 (issues 31 and 32), within one 10-minute device
# call. Needs .gpu/ from pack.py (README.md beside this file), carried to the machine:
#
#   run(command="BUDGET=540 OUT=$OUT bash benchmarks/offline_gpu/paper_grid.sh", carry=[".gpu"], timeout_s=600)
#
# Against one deadline (BUDGET seconds from the start), each stage time-boxed, a stage's failure
# logged, not fatal:
#   1. install .gpu/whl (packages the image lacks), rebuild MiniLM and the FTUs (unpack.py), and
#      record the machine ($OUT/env.txt);
#   2. chapter 4's gpu profile (benchmarks/studies/gpu_profile.py): UniFAR seed 0, the
#      single-vector control seed 0, then UniFAR seeds 1 and 2, the whole base trained with the
#      teacher's distillation until each dev curve flattens or TRAIN_BUDGET seconds (all runs
#      together) are spent; then one evaluation of every trained run beside mean pooling, the
#      untrained model and the hybrid teacher, with each benchmark's MDE; writes
#      $OUT/ch04/train.json, which belongs in results/ch04/gpu/ (chapter 4 shows it);
#   3. with the time left, encoding throughput (benchmarks/throughput.py, issue 32):
#      $OUT/throughput.json, which belongs in results/throughput/.
# rehearse.sh runs this script on a CPU in a copy of the GPU image's package set.
T0=$(date +%s); BUDGET=${BUDGET:-540}
left() { echo $(( BUDGET - ($(date +%s) - T0) )); }
OUT=${OUT:-/tmp/gpu_out}; mkdir -p "$OUT/ch04"
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 MPLBACKEND=Agg
PY=${PY:-python3}; DEV=${DEV:-cuda}; TMPG=${TMPG:-/tmp/gpu}; SITE=${SITE:-/tmp/site}
# evaluation and writing after training: about 2.5 minutes on an H100 for the four benchmarks
TRAIN_BUDGET=${TRAIN_BUDGET:-$(( BUDGET - 200 ))}
if [[ ! -d "$SITE" ]] || [[ -z "$(ls -A "$SITE" 2>/dev/null)" ]]; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$SITE" .gpu/whl/*.whl || exit 3
fi
export PYTHONPATH="$SITE:$PWD"
$PY benchmarks/offline_gpu/unpack.py "$TMPG" 2>&1 | tail -1 | cut -c1-200
COMMIT=${COMMIT:-$(cat "$TMPG/commit" 2>/dev/null || echo unknown)}  # the machine has no git: pack.py's
{ date; nvidia-smi 2>&1 | head -15; $PY -c "import sys, torch, transformers; print(sys.version, torch.__version__, transformers.__version__, torch.cuda.is_available())"; echo "commit $COMMIT"; } > "$OUT/env.txt" 2>&1
echo "== chapter 4, gpu profile ($(left) s left, $TRAIN_BUDGET s of training)"
timeout "$(( $(left) - 20 ))" $PY benchmarks/studies/gpu_profile.py --base-model "$TMPG/minilm" \
  --ftus "$TMPG/ftus" --device "$DEV" --budget "$TRAIN_BUDGET" --out "$OUT/ch04" --work /tmp/ch04_gpu \
  --commit "$COMMIT" $GRID_EXTRA > "$OUT/gpu_profile.log" 2>&1
echo "rc $?"; grep '^\[gpu\]' "$OUT/gpu_profile.log" | cut -c1-300; tail -3 "$OUT/gpu_profile.log" | cut -c1-300
if (( $(left) > 60 )); then
  echo "== throughput ($(left) s left)"
  timeout "$(( $(left) - 10 ))" $PY benchmarks/throughput.py --model "$TMPG/minilm" --device "$DEV" \
    --n-docs 4205 --batch-sizes 64 256 --precision fp32 bf16 $THROUGHPUT_EXTRA --json "$OUT/throughput.json" > "$OUT/throughput.log" 2>&1
  echo "rc $?"; tail -12 "$OUT/throughput.log" | cut -c1-300
fi
echo "== done ($(left) s left)"
