"""A remote env's tasks: the server's reset seeds, as a procedural pack the learner reads like
any other (``tasks.pack.ProceduralPack``).

Task ``<pack>/seed-<n>`` is the episode the server starts on ``reset(seed=n)``. Train seeds are
the even numbers (an unbounded split, read in order), held-out seeds the odd ones below
``2 * heldout_size`` (a fixed list): the two never share a seed. Whether distinct seeds are
distinct tasks is the server's affair; a grpo-gym server draws its task from the seed.

A task's prompt is the text of the first observation (``schema.observation_text``), fetched
once with a reset and kept (when the server does not answer, the task is marked
``unavailable`` and asked again next time); an episode checks that its own reset shows the same text, since a
server whose reset ignores the seed would have the policy answer one prompt and be graded on
another. ``pack_version`` is the server's version and a hash of its name, version and wire
types: a changed server shows a new ``pack_version`` in every record.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from typing import Any

from envs.domains.openenv_client.session import RemoteError
from tasks import Manifest, ProceduralPack

#: The record field of a task whose prompt the server did not give: why, in one line.
UNAVAILABLE = "unavailable"
_SEED_ID = re.compile(r"seed-(?P<seed>0|[1-9][0-9]*)")
_PACK_NAME = re.compile(r"[^A-Za-z0-9_.-]+")


def seed_of(split: str, index: int) -> int:
    return 2 * index + (split == "test")


class SeedTasks:
    """The pack generator: ``record`` fetches (once) the prompt of a seed from ``first_prompt``."""

    id_format = "seed-<n> (train: even n; test: odd n)"

    def __init__(self, first_prompt: Callable[[int], str], heldout_size: int, identity: str):
        self._first_prompt = first_prompt
        self.heldout_size = heldout_size
        self._identity = identity
        self._prompts: dict[int, str] = {}
        self._lock = threading.Lock()

    def size(self, split: str) -> int | None:
        return None if split == "train" else self.heldout_size

    def record(self, split: str, index: int) -> dict[str, Any]:
        seed = seed_of(split, index)
        with self._lock:
            prompt = self._prompts.get(seed)
        if prompt is None:
            try:
                prompt = self._first_prompt(seed)
            except RemoteError as exc:
                # Not kept: the next draw asks again. Its episodes end as infrastructure
                # errors, so a learner drops them and asks ``infra_outage`` (a stop, one line).
                return {"id": f"seed-{seed}", "seed": seed, "prompt": "",
                        UNAVAILABLE: str(exc)}
            with self._lock:
                self._prompts[seed] = prompt
        return {"id": f"seed-{seed}", "seed": seed, "prompt": prompt}

    def locate(self, native_id: str) -> tuple[str, int]:
        found = _SEED_ID.fullmatch(native_id)
        if found is None:
            raise KeyError("a remote env's task ids are seed-<n>")
        seed = int(found["seed"])
        split, index = ("test", seed // 2) if seed % 2 else ("train", seed // 2)
        if split == "test" and index >= self.heldout_size:
            raise KeyError(f"odd seeds are held out, and only {self.heldout_size} of them "
                           "(heldout_size)")
        return split, index

    def fingerprint(self) -> str:
        return self._identity


def seed_pack(url: str, metadata: dict[str, Any], schema: dict[str, Any],
              first_prompt: Callable[[int], str], heldout_size: int) -> ProceduralPack:
    """The pack of a server's seeds, named after the server's env (its ``/metadata`` name)."""
    name = _PACK_NAME.sub("-", str(metadata.get("name") or "openenv")).strip("-") or "openenv"
    identity = json.dumps({"name": metadata.get("name"), "version": metadata.get("version"),
                           "schema": schema}, sort_keys=True, default=str)
    manifest = Manifest(
        name=name, version=str(metadata.get("version") or "0"),
        description=str(metadata.get("description") or f"the OpenEnv server at {url}"),
        license="as the server's", source=url, env="grpo/OpenEnv-v0",
        prompt_template="{prompt}", splits={"train": None, "test": None})
    generator = SeedTasks(first_prompt, heldout_size, identity)
    return ProceduralPack(manifest, generator, origin=f"server {url}")
