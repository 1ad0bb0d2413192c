#!/usr/bin/env bash
# Device script: every stage time-boxed against one deadline, each stage's failure logged, not fatal.
# MODEL/MPNET/DEV overridable so the same script rehearses on a CPU with a tiny model.
T0=$(date +%s); BUDGET=${BUDGET:-520}
left() { echo $(( BUDGET - ($(date +%s) - T0) )); }
OUT=${OUT:-/tmp/gpu_out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 MPLBACKEND=Agg
PY=${PY:-python3}; DEV=${DEV:-cuda}; TMPG=${TMPG:-/tmp/gpu}
if [[ -z "$NO_WHEELS" ]]; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .gpu/whl/*.whl
  export PYTHONPATH=/tmp/site:$PWD
else export PYTHONPATH=$PWD; fi
{ date; nvidia-smi; $PY -c "import torch, transformers, datasets, pyarrow, sys; print(sys.version, torch.__version__, transformers.__version__, datasets.__version__, pyarrow.__version__, torch.cuda.is_available())"; lscpu | head -20; } > "$OUT/env.txt" 2>&1
$PY benchmarks/offline_gpu/unpack.py "$TMPG" 2>&1 | tail -2
MODEL=${MODEL:-$TMPG/minilm}; MPNET=${MPNET:-$TMPG/mpnet}
echo "== speed, MiniLM ($(left) s left)"
timeout $(( $(left) < 240 ? $(left) : 240 )) $PY benchmarks/speed.py --model "$MODEL" --device $DEV --precision fp32 bf16 --max-length ${MAXLEN:-512} \
  --repeats ${REPEATS:-3} --evaluate --train-ftus ${FTUS:-$TMPG/ftus} --train-modes full frozen top --train-top-layers 1 \
  --train-steps 10 --json "$OUT/speed_minilm.json" > "$OUT/speed_minilm.log" 2>&1; echo "rc $?"; tail -15 "$OUT/speed_minilm.log"
echo "== paper profile, MPNet architecture, random weights ($(left) s left)"
timeout $(( $(left) < 100 ? $(left) : 100 )) $PY -m unifar train --ftus ${FTUS:-$TMPG/ftus} --output /tmp/paper \
  --profile paper --base-model "$MPNET" --max-tokens ${MAXLEN:-512} --max-steps 30 --save-every 30 --eval-fraction 0.03 --no-progress --device $DEV $TRAIN_EXTRA \
  > "$OUT/paper_train.log" 2>&1; echo "rc $?"; tail -8 "$OUT/paper_train.log"
cp /tmp/paper/run.json "$OUT/paper_run.json" 2>/dev/null; cp /tmp/paper/log.jsonl "$OUT/paper_log.jsonl" 2>/dev/null
echo "== dev grid, trainable base ($(left) s left)"
timeout $(( $(left) - 15 )) $PY benchmarks/studies/tune_dev.py --base-model "$MODEL" --ftus ${FTUS:-$TMPG/ftus} \
  --hold-out-prefix pubmedqa: --max-tokens ${MAXLEN:-512} --mean-pooling --cache-dir /tmp/mpcache --work /tmp/tune \
  --untrained '{}' --grid "$(cat ${GRID:-benchmarks/offline_gpu/grid.json})" \
  --out "$OUT/tuning_dev_gpu.json" > "$OUT/tune.log" 2>&1; echo "rc $?"; tail -12 "$OUT/tune.log" | cut -c1-400
echo "== done ($(left) s left)"
