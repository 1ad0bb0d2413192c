#!/usr/bin/env bash
# Device script for the CUDA paths added after the restructuring: search encoding (issue 24),
# chapter 6's ablation rows, the multi-objective bi-encoder and FLeW's facet encoders with the
# whole base trained. Each stage is time-boxed against one deadline; a stage's failure is logged,
# not fatal. Needs .gpu/ from pack.py (see README.md beside this file), carried to the machine:
#   BUDGET=420 OUT=DIR bash benchmarks/offline_gpu/run_new_paths.sh
T0=$(date +%s); BUDGET=${BUDGET:-420}
left() { echo $(( BUDGET - ($(date +%s) - T0) )); }
box() { local want=$1; local l; l=$(left); echo $(( l < want ? l : want )); }
OUT=${OUT:-/tmp/gpu_out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 MPLBACKEND=Agg
PY=${PY:-python3}; DEV=${DEV:-cuda}; TMPG=${TMPG:-/tmp/gpu}
if [[ -z "$NO_WHEELS" ]]; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .gpu/whl/*.whl
  export PYTHONPATH=/tmp/site:$PWD
else export PYTHONPATH=$PWD; fi
{ date; nvidia-smi; $PY -c "import torch, transformers, sys; print(sys.version, torch.__version__, transformers.__version__, torch.cuda.is_available())"; } > "$OUT/env.txt" 2>&1
$PY benchmarks/offline_gpu/unpack.py "$TMPG" 2>&1 | tail -2
MODEL=${MODEL:-$TMPG/minilm}; FTUS=${FTUS:-$TMPG/ftus}
echo "== search encoding, bf16 and fp32 ($(left) s left)"
for dt in bf16 fp32; do
  timeout "$(box 60)" $PY benchmarks/search_scale.py --encode-docs 4205 --device $DEV --dtype $dt --model "$MODEL" \
    --out "$OUT/encode_${DEV}_$dt.json" > "$OUT/encode_$dt.log" 2>&1; echo "rc $?"; tail -2 "$OUT/encode_$dt.log"
done
echo "== ablation rows ($(left) s left)"
timeout "$(box 120)" $PY benchmarks/studies/ablation_rows.py --ftus "$FTUS" --base "$MODEL" --device $DEV --steps 30 \
  --rows full "w/o L_KL" "full, top layer trained" --out "$OUT/ablation_rows_$DEV.json" > "$OUT/ablation.log" 2>&1
echo "rc $?"; tail -4 "$OUT/ablation.log"
echo "== multi-objective bi-encoder, whole base ($(left) s left)"
timeout "$(box 100)" $PY benchmarks/studies/multi_objective_sanity.py --base "$MODEL" --whole-base --steps 30 \
  --ftus "$FTUS" --only pubmedqa ftu-docdoc --out "$OUT/multi_objective_$DEV.json" > "$OUT/multi_objective.log" 2>&1
echo "rc $?"; tail -4 "$OUT/multi_objective.log" | cut -c1-300
echo "== FLeW facet encoders, whole base ($(left) s left)"
timeout "$(( $(left) - 10 ))" $PY benchmarks/studies/flew_sanity.py --ftus "$FTUS" --base "$MODEL" --top-layers 0 --steps 30 \
  > "$OUT/flew.log" 2>&1; echo "rc $?"; tail -5 "$OUT/flew.log" | cut -c1-300
echo "== done ($(left) s left)"
