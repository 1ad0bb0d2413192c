# Sourced by .ci/run and .ci/build-book (and by anyone who wants the committed numbers).
#
# Pin the CPU code paths that PyTorch picks at run time, so that a notebook re-executed on a
# CPU with AVX-512 (or AMX) computes bit for bit what it computed on the AVX2 machine that made
# the stored outputs. Without this, oneDNN's matrix products and ATen's vectorised kernels
# take the widest instruction set present, their sums round differently in the last bit, and
# a labeller decision on chapter 2's embeddings or a training step flips: CI once saw one
# sentence change label in chapter 3 (2,219 vs 2,220) and second-decimal changes in chapter 5.
# Measured here (AMD EPYC, AVX2; benchmarks/cpu_pins.py -> results/ci/cpu_pins.json): these
# settings change no bit of the MiniLM embeddings, while ONEDNN_MAX_CPU_ISA=SSE41,
# ATEN_CPU_CAPABILITY=default or MKL_CBWR=COMPATIBLE do change them (by up to 1.2e-7).
# Every x86-64 CPU of the last decade has AVX2; other architectures are left alone.
# Set your own values for speed on a wider CPU: the results move only in the last bits.
if [[ "$(uname -m)" == "x86_64" ]]; then
    export ATEN_CPU_CAPABILITY="${ATEN_CPU_CAPABILITY:-avx2}"
    export ONEDNN_MAX_CPU_ISA="${ONEDNN_MAX_CPU_ISA:-AVX2}"
    export MKL_CBWR="${MKL_CBWR:-AVX2}"
fi
