"""``python -m envs card ENV [--pack P]``: the verifier report card of each of an env's packs."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
from gymnasium.envs.registration import load_env_creator

import envs  # noqa: F401 - registers the envs
from envs.base import TaskEnv, make_task_env
from envs.keywords import parse_env_kwargs
from envs.registration import BUILTIN
from envs.tools.card import baseline as card_baseline
from envs.tools.card import render
from envs.tools.card.card import Card, corpus_folders, run_card
from envs.tools.card.corpus import CorpusError, load
from tasks.pack import Manifest, PackError, load_folder
from tasks.registry import pack_names, pack_sources

README = Path(__file__).resolve().parents[2] / "README.md"


class CardTargetError(ValueError):
    """An ENV that names no env, pack or pack folder (one line)."""


def _feeds(env_id: str) -> str:
    """The env id whose packs ``env_id`` reads (MathPython reads MathExact's)."""
    entry = gym.registry[env_id].entry_point
    cls = load_env_creator(entry) if isinstance(entry, str) else entry
    return getattr(cls, "pack_env", "") or env_id


def targets(target: str | None, pack: str | None, *, all_builtin: bool = False
            ) -> list[tuple[str, str | Path | None]]:
    """(env id, pack name or pack folder; None: the env's own) for each card asked for."""
    if all_builtin:
        builtin = {n for n, s in pack_sources().items() if s.origin == "built-in"}
        return [(env_id, name) for env_id in sorted(BUILTIN)
                for name in pack_names(_feeds(env_id)) if name in builtin]
    if target is None:
        raise CardTargetError("name an env id, a pack or a pack folder, or give --all")
    if target in gym.registry:
        if pack is not None:
            return [(target, pack)]
        names = pack_names(_feeds(target))
        if not names:  # the env builds its own pack from its keywords (ReasoningGym's task=)
            return [(target, None)]
        return [(target, name) for name in names]
    if Path(target).is_dir():  # a pack folder, registered or not
        return [(Manifest.read(target).env, Path(target))]
    if target in pack_sources():
        return [(Manifest.read(pack_sources()[target].folder).env, target)]
    raise CardTargetError(f"'{target}' is no registered env id, pack name or pack folder; "
                          "`python -m envs list` shows them")


def make_env(env_id: str, pack: str | Path | None, env_kwargs: dict[str, Any]) -> TaskEnv:
    if env_id not in gym.registry:
        raise CardTargetError(f"env '{env_id}' is not registered (is its distribution "
                              "installed?)")
    if pack is None:
        return make_task_env(env_id, **env_kwargs)
    loaded: Any = load_folder(pack, origin=f"folder {pack}") if isinstance(pack, Path) else pack
    return make_task_env(env_id, pack=loaded, **env_kwargs)


def cards(pairs: Sequence[tuple[str, str | Path | None]], env_kwargs: dict[str, Any], *,
          fast: bool, n_tasks: int | None, seed: int, split: str | None,
          corpora: Sequence[str] = (), search_budget: int | None = None) -> Iterator[Card]:
    lines = load(corpus_folders(corpora))
    for env_id, pack in pairs:
        env = make_env(env_id, pack, env_kwargs)
        try:
            yield run_card(env, fast=fast, n_tasks=n_tasks, seed=seed, split=split,
                           corpus_lines=lines, env_kwargs=env_kwargs,
                           search_budget=search_budget)
        finally:
            env.close()


def print_cards(target: str | None, *, pack: str | None = None, env_kwargs: str | None = None,
                as_json: bool = False, markdown: bool = False, fast: bool = False,
                all_builtin: bool = False, n_tasks: int | None = None, seed: int = 0,
                split: str | None = None, corpora: Sequence[str] = (),
                update_baseline: bool = False, search_budget: int | None = None) -> int:
    """Returns the exit code: 1 when a check fails (or on a bad target), else 0."""
    try:
        kwargs = parse_env_kwargs(env_kwargs, CardTargetError)
        pairs = targets(target, pack, all_builtin=all_builtin)
        made: list[Card] = []
        for card in cards(pairs, kwargs, fast=fast, n_tasks=n_tasks, seed=seed, split=split,
                          corpora=corpora, search_budget=search_budget):
            made.append(card)
            if not (as_json or markdown or update_baseline):
                print(render.text(card) + "\n", flush=True)
    except (CardTargetError, CorpusError, PackError, gym.error.Error, ValueError,
            TypeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if update_baseline:
        down = [c.key for c in made if c.result("grpo.infra_error_rate").status == "fail"]
        if down:  # a baseline must measure the verifiers, not an engine that was down
            print(f"error: not writing the baseline: infrastructure errors in {', '.join(down)}"
                  " (python -m sandbox doctor)", file=sys.stderr)
            return 1
        card_baseline.write(made)
        table = render.markdown(made)
        README.write_text(render.with_section(README.read_text(encoding="utf-8"), table),
                          encoding="utf-8")
        print(f"wrote {card_baseline.BASELINE.name} ({len(made)} cards) and the README table")
        return 0
    if as_json:
        print(json.dumps(render.as_json(made), indent=1))
    elif markdown:
        print(render.markdown(made))
    return 0 if all(card.ok for card in made) else 1
