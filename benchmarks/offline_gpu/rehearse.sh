#!/usr/bin/env bash
# Rehearse paper_grid.sh on this CPU as the GPU machine would run it: in a fresh venv that holds
# only the Python packages of the GPU image (the device tool's KINDS.md, read 2026-11-17) at
# .ci/requirements.lock's versions, with unifar on PYTHONPATH (not installed), pack.py's WHEELS
# installed the way paper_grid.sh installs .gpu/whl (--no-deps --target), and the model and FTUs
# rebuilt from .gpu/. A module the stages import that is neither in the image nor among WHEELS
# fails here, not on the lent machine. The venv uses this machine's Python and PyTorch's CPU build
# (the image's Python 3.12 would pull the 0.5 GB CUDA build), so WHEELS are fetched for it here;
# .gpu/whl holds the same versions for CPython 3.12. Run pack.py first; 10-15 minutes on 2 idle
# cores (the CPU evaluates at 64 tokens what the GPU evaluates at 512), a few more for the venv.
#
#   python benchmarks/offline_gpu/pack.py --ftus artifacts/ftus/default
#   bash benchmarks/offline_gpu/rehearse.sh            # OUT=/tmp/rehearsal by default
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
[[ -f .gpu/payload.tar.xz ]] || { echo "no .gpu/payload.tar.xz: run benchmarks/offline_gpu/pack.py first" >&2; exit 2; }
IMG=${IMG:-/tmp/gpu-image-venv}
# The GPU image's packages that unifar or its dependencies may import (names as in the lock).
IMAGE="torch transformers tokenizers safetensors huggingface-hub hf-xet numpy pandas scipy tqdm matplotlib
contourpy cycler fonttools kiwisolver pillow pyparsing python-dateutil six seaborn requests urllib3 idna
certifi charset-normalizer scikit-learn joblib threadpoolctl pyarrow numba llvmlite pyyaml filelock fsspec
xxhash regex packaging sentence-transformers tabulate rich markdown-it-py mdurl pygments psutil jinja2
markupsafe networkx sympy mpmath typing-extensions aiohttp aiosignal aiohappyeyeballs attrs frozenlist
multidict propcache yarl h11 httpcore httpx anyio click typer shellingham annotated-doc narwhals tzdata
pytz statsmodels patsy"
if [[ ! -x "$IMG/bin/python" ]]; then
    python3 -m venv "$IMG"
    "$IMG/bin/python" -m pip install -q "torch==$(grep -i '^torch==' .ci/requirements.lock | cut -d= -f3)"
    # with their dependencies (the image holds those too), every version as in the lock
    want=$(for p in $IMAGE; do grep -i "^$p==" .ci/requirements.lock || true; done | grep -iv '^torch==')
    .venv/bin/uv pip install --quiet --python "$IMG/bin/python" -c .ci/requirements.lock $want
fi
SITE=$(mktemp -d)
wheels=$(cd benchmarks/offline_gpu && python3 -c 'import ast; t = ast.parse(open("pack.py").read()); print(" ".join(next(ast.literal_eval(n.value) for n in t.body if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "WHEELS")))')
"$IMG/bin/python" -m pip install -q --no-deps --no-compile --target "$SITE" $wheels
# the stages with a tiny budget, through paper_grid.sh itself (CPU, no nvidia-smi)
PY="$IMG/bin/python" SITE="$SITE" DEV=cpu BUDGET=${BUDGET:-900} TRAIN_BUDGET=${TRAIN_BUDGET:-60} \
    GRID_EXTRA="--max-ftus 24 --max-tokens 64 --dev-every 2 --runs unifar:0 control:0 --benchmarks scirepeval" \
    THROUGHPUT_EXTRA="--n-docs 40 --batch-sizes 16 --precision fp32" \
    OUT=${OUT:-/tmp/rehearsal} bash benchmarks/offline_gpu/paper_grid.sh
rm -rf "$SITE"
