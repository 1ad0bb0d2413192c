# Sourced by .ci/run and .ci/build-book (and by anyone who wants the committed numbers).
#
# Pin the CPU code paths that PyTorch picks at run time, so that a notebook re-executed on
# another CPU computes what it computed on the machine that made the stored outputs, to the last
# bit or within nbval's tolerance (.ci/nbval_tolerance.py). Without pins, oneDNN's matrix
# products and ATen's vectorised kernels take the widest instruction set present, their sums
# round differently in the last bit, and a labeller decision on chapter 2's embeddings or a
# training step flips: CI once saw one sentence change label in chapter 3 (2,219 vs 2,220,
# before the tolerance plugin) and second-decimal changes in chapter 5.
# - ATen and oneDNN: AVX2, which every x86-64 CPU of the last decade has. Measured with
#   benchmarks/cpu_pins.py: on an AVX2-dispatching AMD EPYC the AVX2 pins changed no bit of the
#   MiniLM embeddings (results/ci/cpu_pins.json as of commit 9e41eef); on the AVX-512 Intel
#   machine of the current results/ci/cpu_pins.json every variable moves them, by up to 2e-7.
# - MKL (the dense matrix products, most of an encoder's time on CPU): its AVX-512 branch where
#   the CPU has AVX-512 (F, CD, BW, DQ, VL: the set of MKL's AVX512 branch), else AVX2. On this
#   project's 2-core Intel CI machine the AVX-512 branch encodes about 1.4x faster than AVX2
#   (benchmarks/cpu_pins.py), and a fresh clone's `bash .ci/run` took 29:31 instead of 43:22.
#   The two branches differ by about 1e-7 in an embedding, which is what nbval's tolerance is
#   for: that run passed every chapter against outputs made on the AVX2 branch. MKL takes its
#   own default branch, without a warning, where a CPU does not support the one named (e.g.
#   AVX512 on a non-Intel CPU).
# Set your own values to override: the results move only in the last bits.
if [[ "$(uname -m)" == "x86_64" ]]; then
    export ATEN_CPU_CAPABILITY="${ATEN_CPU_CAPABILITY:-avx2}"
    export ONEDNN_MAX_CPU_ISA="${ONEDNN_MAX_CPU_ISA:-AVX2}"
    _unifar_mkl=AVX2
    if [[ -r /proc/cpuinfo ]]; then
        _unifar_flags="$(grep -m1 '^flags' /proc/cpuinfo)"
        _unifar_mkl=AVX512
        for _unifar_f in avx512f avx512cd avx512bw avx512dq avx512vl; do
            [[ " $_unifar_flags " == *" $_unifar_f "* ]] || _unifar_mkl=AVX2
        done
        unset _unifar_flags _unifar_f
    fi
    export MKL_CBWR="${MKL_CBWR:-$_unifar_mkl}"
    unset _unifar_mkl
fi
