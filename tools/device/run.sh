#!/usr/bin/env bash
# fmtsim device kit: on a machine with an NVIDIA GPU, build fmtsim_kit for the GPU found, run every
# conversion instruction and matrix kernel it has on fmtsim's vectors and probe sets, and write one
# report (device, driver, per-file verdicts, the unit `fmtsim probe infer` recognises).
#
#   tools/device/run.sh [REPORT_DIR [kit.py options, e.g. --quick]]   (default: ./fmtsim-device-report)
#
# Needs: nvcc (CUDA 12.8+ for sm_100a/sm_120a; 12.0+ for sm_90a), nvidia-smi, and a Python with
# fmtsim installed (pip install fmtsim, or this checkout). The report is report.md / report.json.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-fmtsim-device-report}
PY=${PYTHON:-python3}
command -v nvcc >/dev/null || { echo "run.sh: nvcc not found (install the CUDA toolkit)" >&2; exit 2; }
command -v nvidia-smi >/dev/null || { echo "run.sh: nvidia-smi not found: no NVIDIA GPU/driver here" >&2; exit 2; }
"$PY" -c "import fmtsim" 2>/dev/null || { echo "run.sh: $PY cannot import fmtsim (pip install it first)" >&2; exit 2; }

cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n 1 | tr -d ' .')
case "$cc" in
  90) arch=90a ;;   # wgmma needs the arch-specific target
  100|101|103|110|120|121) arch=${cc}a ;;
  *) arch=$cc ;;
esac
mkdir -p "$out"
build=$(mktemp -d)
trap 'rm -rf "$build"' EXIT
echo "run.sh: building fmtsim_kit for sm_$arch" >&2
nvcc -std=c++17 -O2 -gencode "arch=compute_$arch,code=sm_$arch" -o "$build/fmtsim_kit" "$here/fmtsim_kit.cu" \
  2> "$out/build.log" || { cat "$out/build.log" >&2; exit 3; }
{ nvidia-smi; nvcc --version; } > "$out/device.txt" 2>&1 || true
"$PY" "$here/kit.py" --bin "$build/fmtsim_kit" --out "$out" "${@:2}"
