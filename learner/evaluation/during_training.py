"""The held-out figures a training run logs as ``eval/*`` (accuracy, full marks, pass@k, and the
perturbed prompts' scores with ``--eval-perturbations``), from the config's evaluation part, and
the run's result in the field's shape (``run_result``: ``eval.json`` after each evaluation,
``eval_start.json`` for the one before training)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from transformers import PreTrainedModel, PreTrainedTokenizerBase

from envs.contract import LearnerEnv
from learner.evaluation.heldout import evaluate
from learner.evaluation.infra import InfraCount
from learner.evaluation.result_shape import TaskRow, build_result
from learner.model_name import DEFAULT_MODEL
from learner.sampling.scoring import RemoteScorer
from learner.stage_config import EvalConfig
from tasks import Task


@dataclass(frozen=True)
class HeldOut:
    """One held-out evaluation of a training run: its ``eval/*`` metrics (logged, never read
    back), its per-task records (heldout.jsonl, eval.json) and, from them, the greedy pass's
    infrastructure count, which decides whether the run says that no accuracy was reported."""

    metrics: dict[str, Any]
    records: list[dict[str, Any]]

    @property
    def infra(self) -> InfraCount:
        return InfraCount.of(self.records)

    def refusal(self) -> str | None:
        """The one line said when no held-out accuracy was reported (too many infrastructure
        failures, or nothing evaluated); None when one was."""
        count = self.infra
        if count.samples and not count.refused:
            return None
        return count.refusal("held-out accuracy") or "no held-out accuracy: nothing evaluated"


def heldout_metrics(c: EvalConfig, policy: PreTrainedModel, tokenizer: PreTrainedTokenizerBase,
                    env: LearnerEnv, tasks: Sequence[Task], scorer: RemoteScorer | None,
                    gather: Callable[[list], list] | None = None
                    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``eval/*`` metrics of this process's ``tasks`` and the per-task records they count
    (heldout.jsonl); ``gather`` joins every process's records (several processes)."""
    subset = tasks[:c.eval_perturb_size] if c.eval_perturb_size else tasks
    perturbed: list = []
    if c.eval_perturbations:
        from learner.evaluation.gates import perturbed_prompts

        _, repeated, prompts = perturbed_prompts(env, subset)
        perturbed = list(zip(repeated, prompts, strict=True))
    # The perturbed prompts go through the greedy pass too: one pass of P x G rows at once.
    result = evaluate(policy, tokenizer, env, list(tasks), max_new_tokens=c.max_new_tokens,
                      k=c.eval_k, temperature=c.temperature, top_p=c.top_p,
                      batch_size=c.eval_rows, workers=c.score_workers, scorer=scorer,
                      max_episode_tokens=c.max_episode_tokens, tool_role=c.tool_role,
                      also=perturbed)
    local = result.records
    if gather is not None:
        result.records = gather(result.records)
    metrics: dict[str, Any] = {f"eval/{k}": v for k, v in result.metrics().items()}
    if c.eval_perturbations:
        from learner.evaluation.gates import perturbation_metrics

        # The unperturbed prompts' greedy answers are the evaluation's own: not generated again.
        original = [{**r, "rewards": r["components"]} for r in local[:len(subset)]]
        metrics.update(perturbation_metrics(
            policy, tokenizer, env, subset, max_new_tokens=c.max_new_tokens,
            batch_size=c.eval_rows, workers=c.score_workers, scorer=scorer,
            gather=gather, original=(gather or list)(original), graded=result.also))
    return metrics, result.records


def run_result(c: EvalConfig, env: LearnerEnv, step: int, records: Sequence[dict[str, Any]]
               ) -> dict[str, Any]:
    """``eval.json``'s object for a training run's held-out evaluation at ``step``, from its
    per-task records (``evaluate``'s): ``--eval-k`` samples per task at ``--temperature``, or
    with ``--eval-k 1`` the greedy completion (then ``reward_mean`` is its reward; with more
    samples only their counts are kept, so it is null)."""
    rows = [TaskRow(task_id=str(r["task_id"]), n=int(r["samples"]),
                    correct=int(r["samples_correct"]), errors=int(r.get("samples_infra", 0)),
                    reward_mean=(None if r["samples"] > 1 or r.get("infra_error")
                                 else float(r["reward"])))
            for r in records]
    ks = sorted({1, c.eval_k})
    first = next((r.get("infra_reason") for r in records if r.get("infra_reason")), None)
    return build_result(
        rows, ks, env=env.env_id or c.env, pack=env.pack.name,
        pack_version=env.pack.pack_version,
        model={"name": c.model or DEFAULT_MODEL, "path": None, "revision": None,
               "weights_key": None, "run": c.output_dir, "step": step},
        sampling={"samples_per_task": c.eval_k,
                  "decoding": "greedy" if c.eval_k == 1 else "sampled",
                  "temperature": c.temperature, "top_p": c.top_p,
                  "max_new_tokens": c.max_new_tokens, "seed": c.seed},
        extra={"env_kwargs": c.env_kwargs, "split": "test"}, first_error=first)
