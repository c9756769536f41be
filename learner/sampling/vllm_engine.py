"""vLLM as the sampling engine, colocated with training.

The engine lives in the learner's own process (its engine core and worker in-process, as TRL's
colocate mode has them), on the learner's device, with its own copy of the weights: ``sync``
loads the policy's current weights after every optimizer step, through vLLM's in-place reload
(``reload_weights``: checkpoint-format names, so vLLM fuses q/k/v and gate/up itself), and
clears its prefix cache. A LoRA policy is pushed either merged (each LoRA layer's delta added
to its base weight, the trainer's weights untouched) or as an adapter vLLM applies itself
(``lora="adapter"``: the base weights go once, then only the adapter after each step).

Token ids in, token ids out: contexts go in as token ids (never re-tokenised), and the
sampled ids and the log-prob of each under the distribution it was drawn from come back
(``logprobs_mode="processed_logprobs"``: after temperature and top-p, as the loss passes
score them). vLLM has no per-token callback, so the caller's stop rule (a tool call's end) is
applied to the finished turn at every prefix, as ``decoding.decode`` applies it while it
decodes: what the policy samples up to the stop does not depend on what came after, so the
rows are the same distribution; the tokens past the cut are decoded for nothing.

Seeding: the engine is seeded once (``LLM(seed=...)``) and its requests carry no seed, so vLLM
samples every row from the device's one generator in one batched draw; a run is repeatable
because the learner's steps run in one order. Per-request seeds (``seed_requests``) make vLLM
draw row by row with a generator each (and leave FlashInfer's sampler): only a draw on a
background thread (--async-steps 1), whose order against the update's draws is not fixed,
needs them.

Colocated on a CUDA GPU with ``sleep``, the engine sleeps while the trainer updates (vLLM's
level 1: weights offloaded to pinned CPU memory, KV cache freed) and wakes for the weight
sync, weights first and the KV cache after the new weights are in.

The weight sync streams one tensor at a time in the engine's precision into vLLM's loader;
under ZeRO-3 (``gather``) the partitioned weights are gathered a bucket of
``SYNC_BUCKET_BYTES`` at a time, never the whole model at once.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import sys
import tempfile
import time
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard

import torch
from torch import Tensor
from transformers import GenerationConfig, PreTrainedTokenizerBase

from envs.startup_noise import silence_vllm_triton_cpu_notice
from learner.sampling.decoding import EOS, LENGTH, STOP, Decoded, Stop

if TYPE_CHECKING:
    from peft import PeftModel

#: vLLM's LoRA kernels take these maximum ranks.
_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
#: Bytes of partitioned (ZeRO-3) weights gathered at once for a sync; a tensor larger than
#: this is a bucket of its own.
SYNC_BUCKET_BYTES = 512 * 2**20
#: A gathering context: ``gather(params)`` makes those partitioned parameters whole inside it.
Gather = Callable[[list[torch.nn.Parameter]], contextlib.AbstractContextManager[Any]]


def sleep_supported(device: torch.device) -> bool:
    """Whether vLLM can sleep and wake on ``device``: CUDA (its CuMem allocator), where the
    installed vLLM says its platform has sleep mode."""
    if device.type != "cuda":
        return False
    try:
        from vllm.platforms import current_platform
    except ImportError:
        return False
    return bool(current_platform.is_sleep_mode_available())


class VLLMEngine:
    """A vLLM ``LLM`` in this process, sampling for the learner (``SamplingEngine``).

    ``model_path``: the policy's checkpoint (its architecture and first weights; ``sync``
    replaces them). On a GPU it takes ``gpu_memory_utilization`` of the device (weights and KV
    cache; training has the rest) and runs in bf16; on CPU, in fp32 with ``kv_cache_gib`` of
    KV cache (``dtype`` overrides either: bf16 on CPU gives it a GPU engine's mismatch).
    ``lora_rank`` > 0 with ``lora="adapter"`` starts it with LoRA support.
    ``processes`` > 1: one engine per process of an ``accelerate launch`` run (vLLM's
    external launcher, as TRL's colocate mode). ``max_num_seqs``: rows decoded at once (None:
    vLLM's default). ``sleep``: sleep between phases where ``sleep_supported`` (else ignored;
    ``sleeps`` says which). ``seed_requests``: a seed per request instead of the engine's.
    """

    name = "vllm"

    def __init__(self, model_path: str, *, device: torch.device | str = "cpu", seed: int = 0,
                 dtype: str | None = None, gpu_memory_utilization: float = 0.3,
                 kv_cache_gib: float | None = None, max_model_len: int | None = None,
                 lora: str = "merged", lora_rank: int = 0, enforce_eager: bool | None = None,
                 processes: int = 1, max_num_seqs: int | None = None, sleep: bool = False,
                 seed_requests: bool = False):
        self._device = torch.device(device)
        self._seed = seed
        self._generator = torch.Generator().manual_seed(seed)  # the requests' seeds (decode)
        self.seed_requests = seed_requests
        self.sleeps = sleep and sleep_supported(self._device)
        self.asleep = False
        self.sleep_s = self.wake_s = 0.0  # the last sleep's and wake's seconds
        self.lora = lora  # "merged" or "adapter": how ``sync`` pushes a LoRA policy
        self.lora_enabled = lora == "adapter" and lora_rank > 0  # vLLM's LoRA support is on
        self._eos = _configured_eos(model_path)
        self._lora_request: Any = None
        self._version = 0
        self._base: weakref.ref | None = None  # the base model whose weights the engine holds
        self._adapter_dir = tempfile.TemporaryDirectory(prefix="grpo-gym-lora-")
        cpu = self._device.type == "cpu"
        kwargs: dict[str, Any] = {
            "model": model_path, "seed": seed, "max_model_len": max_model_len or None,
            "dtype": dtype or ("float32" if cpu else "bfloat16"),
            "logprobs_mode": "processed_logprobs",  # after temperature and top-p
            # Compiling the model takes minutes on CPU (cached afterwards), CUDA graphs pay off.
            "enforce_eager": cpu if enforce_eager is None else enforce_eager,
        }
        if max_num_seqs:
            kwargs["max_num_seqs"] = max_num_seqs
        if self.sleeps:
            kwargs["enable_sleep_mode"] = True
        if cpu:
            # On CPU vLLM reserves gpu_memory_utilization of the NUMA node's memory and refuses
            # to start when that much is not free; an explicit KV cache size skips that check.
            gib = kv_cache_gib or float(os.environ.get("VLLM_CPU_KVCACHE_SPACE") or 1)
            kwargs["kv_cache_memory_bytes"] = int(gib * 2**30)
        else:
            kwargs["gpu_memory_utilization"] = gpu_memory_utilization
        if self.lora_enabled:
            rank = next((r for r in _LORA_RANKS if r >= lora_rank), _LORA_RANKS[-1])
            kwargs.update(enable_lora=True, max_lora_rank=rank, max_loras=1)
        if processes > 1:
            kwargs["distributed_executor_backend"] = "external_launcher"
        self._owns_distributed = not (torch.distributed.is_available()
                                      and torch.distributed.is_initialized())
        print(f"starting the vLLM engine on {self._device.type} (a minute or so)...",
              file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        silence_vllm_triton_cpu_notice()  # the CPU build's Triton notice: nothing to act on
        with _in_this_process():
            from vllm import LLM

            # A checkpoint in another precision than the engine's loads cast, as asked, with
            # a warning per tensor: those alone are dropped.
            logging.getLogger("vllm.model_executor.models.utils").addFilter(_cast_warning)
            self.llm: Any = LLM(**kwargs)
        self.start_s = time.perf_counter() - t0
        self.max_model_len = int(self.llm.llm_engine.model_config.max_model_len)
        # The weights go over in the engine's precision: vLLM would cast them the same way
        # (round to nearest), but warn once per tensor on every sync.
        engine_dtype = self.llm.llm_engine.model_config.dtype
        # ModelConfig resolves "auto" and names to a torch dtype as the engine starts.
        assert isinstance(engine_dtype, torch.dtype)
        self.dtype: torch.dtype = engine_dtype
        # Every reload warns that the tied head and the rotary embedding loaded no weights:
        # both have none of their own (the head is packed again below).
        logging.getLogger("vllm.model_executor.model_loader.reload.layerwise").setLevel(
            logging.ERROR)

    # -- SamplingEngine ----------------------------------------------------------------------
    @property
    def device(self) -> torch.device:
        return self._device

    def eos_ids(self, tokenizer: PreTrainedTokenizerBase) -> Tensor:
        """The tokenizer's EOS and the checkpoint's configured ones, as ``decoding.eos_ids``."""
        ids = sorted({tokenizer.eos_token_id, *self._eos} - {None})
        return torch.tensor(ids, device=self._device)

    def session(self) -> contextlib.AbstractContextManager[Any]:
        return contextlib.nullcontext()

    def reseed(self, seed: int) -> None:
        """Restart the draws as a fresh engine's: the generator the requests' seeds come from,
        or, engine-seeded, the device's default generator vLLM samples from (in this process
        also torch's)."""
        self._generator.manual_seed(seed)
        if not self.seed_requests:
            if self._device.type == "cuda":
                torch.cuda.manual_seed(seed)
            else:
                torch.manual_seed(seed)

    # -- sleeping between phases -------------------------------------------------------------
    def sleep(self) -> None:
        """Free the GPU for the update (weights to the CPU, KV cache dropped); a no-op where
        the engine does not sleep. The next ``sync`` or ``decode`` wakes it."""
        if not self.sleeps or self.asleep:
            return
        t0 = time.perf_counter()
        self.llm.sleep(level=1)
        self.asleep = True
        self.sleep_s = time.perf_counter() - t0

    def _wake(self, tags: list[str] | None = None) -> None:
        """Wake what ``tags`` name (None: all); ``asleep`` until the KV cache is back."""
        if not self.asleep:
            return
        t0 = time.perf_counter()
        if self._device.type == "cuda":
            # The update's freed blocks stay reserved by torch's caching allocator: handed back
            # to the driver, vLLM can map its memory again.
            torch.cuda.empty_cache()
        self.llm.wake_up(tags=tags)
        self.wake_s += time.perf_counter() - t0
        if tags is None or "kv_cache" in tags:
            self.asleep = False

    def decode(self, ids: Tensor, mask: Tensor, *, budgets: Tensor, eos: Tensor, pad_id: int,
               repeat: int = 1, temperature: float = 1.0, top_p: float = 1.0,
               greedy: bool = False, stop: Stop | None = None,
               compact_fraction: float = 0.25, max_rows: int = 0) -> Decoded:
        """As ``decoding.decode``: ``repeat`` rows per left-padded context, each ending at an
        ``eos`` token (kept), its budget, or where ``stop(row, tokens)`` says (``max_rows`` is
        ignored: vLLM schedules its own batch)."""
        from vllm import SamplingParams

        contexts = [row[m.bool()].tolist() for row, m in zip(ids.cpu(), mask.cpu(), strict=True)]
        budget = [int(b) for b in budgets.tolist()]
        if any(len(set(budget[i * repeat:(i + 1) * repeat])) > 1 for i in range(len(contexts))):
            raise ValueError("rows of one context must share a budget")
        longest = max((len(c) + budget[i * repeat] for i, c in enumerate(contexts)), default=0)
        if longest > self.max_model_len:
            raise ValueError(f"a context and its budget need {longest} tokens, over the vLLM "
                             f"engine's max_model_len {self.max_model_len}: give "
                             f"--vllm-max-model-len {longest} or more")
        self._wake()  # a step whose update was skipped left it asleep, unsynced
        seeds: list[int | None] = [None] * len(contexts)
        if self.seed_requests and not greedy:
            # A seed per request drawn from the engine's own generator: a seeded run samples
            # the same rows, also when it draws on a background thread (--async-steps 1) while
            # the update draws from torch's global one.
            seed = int(torch.randint(0, 2**31 - 2**20, (), generator=self._generator))
            seeds = [seed + i * repeat for i in range(len(contexts))]
        params = [SamplingParams(
            n=repeat, max_tokens=budget[i * repeat], logprobs=0, detokenize=False,
            stop_token_ids=eos.tolist(), temperature=0.0 if greedy else temperature,
            top_p=1.0 if greedy else top_p, seed=seeds[i])
            for i in range(len(contexts))]
        outputs = self.llm.generate([{"prompt_token_ids": c} for c in contexts], params,
                                    use_tqdm=False, lora_request=self._lora_request)
        rows = [o for out in outputs for o in out.outputs]  # prompt-major, as decode's
        eos_set = set(eos.tolist())
        n, width = len(rows), max(budget)
        tokens = torch.full((n, width), pad_id, dtype=torch.long)
        logprobs = torch.zeros((n, width))
        lengths = torch.zeros(n, dtype=torch.long)
        stops, decoded = [], 0
        for r, row in enumerate(rows):
            sampled = list(row.token_ids)
            decoded += len(sampled)
            ended = bool(sampled) and sampled[-1] in eos_set and row.finish_reason == "stop"
            keep, why = _stop_point(r, sampled, ended, stop)
            tokens[r, :keep] = torch.tensor(sampled[:keep], dtype=torch.long)
            logprobs[r, :keep] = torch.tensor([step[t].logprob for step, t in
                                               zip(row.logprobs[:keep], sampled[:keep],
                                                   strict=True)])
            lengths[r] = keep
            stops.append(why)
        dev = self._device
        return Decoded(tokens.to(dev), logprobs.to(dev), lengths.to(dev), stops, decoded)

    # -- weights -----------------------------------------------------------------------------
    @torch.no_grad()
    def sync(self, policy: torch.nn.Module, gather: Gather | None = None) -> None:
        """Load ``policy``'s current weights (an unwrapped model); ``gather``: under ZeRO-3,
        what makes a bucket of its partitioned parameters whole (``checkpoint_weights``).
        Every process of a ZeRO-3 run must call it together (the gathers are collectives)."""
        t0 = time.perf_counter()
        self.wake_s = 0.0
        # The weights' memory first: the KV cache is allocated once the new weights are in.
        self._wake(["weights"])
        if self.lora == "adapter" and self.lora_enabled and _is_peft(policy):
            base = policy.get_base_model()
            if self._base is None or self._base() is not base:
                # LoRA never changes the base weights: they go once per base model.
                self._reload(checkpoint_weights(policy, merge=False, dtype=self.dtype))
                self._base = weakref.ref(base)
            self._push_adapter(policy)
        else:
            self._reload(checkpoint_weights(policy, dtype=self.dtype, gather=gather))
            self._base, self._lora_request = None, None
        self._wake(["kv_cache"])
        # Cached prompts were computed with the old weights: a prompt seen before the sync
        # would be continued from them.
        if not self.llm.reset_prefix_cache():
            raise RuntimeError("vLLM kept its prefix cache after a weight sync (requests still "
                               "running): its next completions would use the old weights")
        self.sync_s = time.perf_counter() - t0

    def _reload(self, weights: Iterator[tuple[str, Tensor]]) -> None:
        # The worker is in this process: the iterator and its tensors pass by reference.
        self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": weights,
                                                          "is_checkpoint_format": True})
        repacked = all(self.llm.apply_model(_repack_tied_head))
        tied = getattr(self.llm.llm_engine.model_config.hf_text_config, "tie_word_embeddings",
                       False)
        if tied and not repacked and self._device.type == "cpu":
            # A head left with its old packed weights samples from the old policy, silently:
            # one step at lr 3e-2 moved log-probs by 1.9 (tests/test_vllm_engine.py).
            raise RuntimeError("vLLM's output head is tied to the embeddings, but no head "
                               "sharing their weight was found to refresh after a sync")

    def _push_adapter(self, policy: PeftModel) -> None:
        from vllm.lora.request import LoRARequest

        path = Path(self._adapter_dir.name)
        policy.save_pretrained(str(path))
        self._version += 1  # a new id: vLLM loads it, and drops the previous one from its slot
        self._lora_request = LoRARequest(f"policy-{self._version}", self._version, str(path))

    def close(self) -> None:
        """Shut the engine down and free its memory (and vLLM's process group, if it made it)."""
        if getattr(self, "llm", None) is None:
            return
        self.llm.llm_engine.engine_core.shutdown()
        self.llm = None
        if self._owns_distributed:
            from vllm.distributed.parallel_state import cleanup_dist_env_and_memory

            cleanup_dist_env_and_memory()
        gc.collect()
        self._adapter_dir.cleanup()


def checkpoint_weights(model: torch.nn.Module, merge: bool = True,
                       dtype: torch.dtype | None = None, gather: Gather | None = None,
                       bucket_bytes: int | None = None) -> Iterator[tuple[str, Tensor]]:
    """The model's weights under its checkpoint's names, which vLLM's loader maps to its own,
    cast to ``dtype`` if given (one tensor at a time). A PEFT model's LoRA layers are merged
    into their base weights (``merge``) with PEFT's own ``get_delta_weight``, leaving the
    trainer's weights as they are, or left out.

    ``gather`` (ZeRO-3: ``sharding.bucket_gather``): the parameters are partitioned, and are
    gathered ``bucket_bytes`` (default ``SYNC_BUCKET_BYTES``) at a time (``weight_buckets``);
    each tensor goes out as a copy (in ``dtype``), which stays valid once its bucket is
    partitioned again."""
    if gather is not None and not _is_peft(model):
        named = list(model.named_parameters(remove_duplicate=False))
        for bucket in weight_buckets([_full_bytes(p) for _, p in named],
                                     bucket_bytes or SYNC_BUCKET_BYTES):
            params = list({id(p): p for _, p in (named[i] for i in bucket)}.values())
            with gather(params):
                for i in bucket:
                    name, p = named[i]
                    yield name, p.detach().to(dtype or p.dtype, copy=True)
        return
    for name, value in _checkpoint_weights(model, merge):
        yield name, value if dtype is None or not value.is_floating_point() else value.to(dtype)


def weight_buckets(sizes: list[int], bucket_bytes: int) -> list[list[int]]:
    """Consecutive indices of tensors of ``sizes`` bytes, grouped so that no group holds more
    than ``bucket_bytes`` (a tensor larger than that is a group of its own)."""
    buckets: list[list[int]] = []
    total = 0
    for i, size in enumerate(sizes):
        if not buckets or total + size > bucket_bytes:
            buckets.append([])
            total = 0
        buckets[-1].append(i)
        total += size
    return buckets


def _full_bytes(p: torch.nn.Parameter) -> int:
    """A parameter's bytes when whole (a ZeRO-3 parameter's ``ds_numel``: it holds a shard)."""
    return int(getattr(p, "ds_numel", p.numel())) * p.element_size()


def _checkpoint_weights(model: torch.nn.Module, merge: bool) -> Iterator[tuple[str, Tensor]]:
    # Tied tensors go under each of their names (the output head under ``lm_head.weight`` too):
    # vLLM unties a head the checkpoint holds a copy of (ModelConfig's
    # maybe_untie_word_embeddings), and such a head would otherwise keep its first weights.
    # Where vLLM ties them, its loader skips the head's name.
    if not _is_peft(model):
        yield from ((name, p.detach())
                    for name, p in model.named_parameters(remove_duplicate=False))
        return
    from peft.tuners.lora import LoraLayer

    base = model.get_base_model()
    lora = {name: m for name, m in base.named_modules() if isinstance(m, LoraLayer)}
    for name, p in base.named_parameters(remove_duplicate=False):
        if ".lora_" in name:
            continue
        owner, _, leaf = name.rpartition(".")
        owner = owner.removesuffix(".base_layer")
        value = p.detach()
        if merge and leaf == "weight" and owner in lora:
            layer = lora[owner]
            for adapter in layer.active_adapters:
                if adapter in layer.lora_A:
                    # Every LoRA layer class defines it; peft's LoraLayer base does not declare it.
                    delta = layer.get_delta_weight(adapter)  # type: ignore[attr-defined]
                    value = value + delta.to(value.dtype)
        yield f"{owner}.{leaf}", value


def _repack_tied_head(model: torch.nn.Module) -> bool:
    """vLLM's in-place reload processes the layers it loads again; an output head tied to the
    embeddings loads nothing (its weight is theirs), so on CPU it would go on multiplying by
    the copy its kernel packed from the old weights (vLLM's reload notes, "tied parameters").
    Pack it again from the shared weight (a no-op on a GPU); False where the model has no
    head sharing the embeddings' weight."""
    head = getattr(model, "lm_head", None)
    embed = getattr(getattr(model, "model", None), "embed_tokens", None)
    if head is None or embed is None or not hasattr(head, "quant_method") \
            or head.weight.data_ptr() != embed.weight.data_ptr():
        return False
    head.quant_method.process_weights_after_loading(head)
    return True


def _cast_warning(record: logging.LogRecord) -> bool:
    """False for vLLM's warning that a weight was cast to the engine's precision."""
    return not str(record.msg).startswith("Attempted to load weight %s with dtype")


def _stop_point(row: int, tokens: list[int], ended: bool, stop: Stop | None) -> tuple[int, str]:
    """Where ``decoding.decode`` would have ended the row: the stop rule is asked after each
    token, except the EOS that ends it (EOS wins)."""
    if stop is not None:
        prefix: list[int] = []  # grown token by token, as the loop's rows are
        for token in tokens[:len(tokens) - 1] if ended else tokens:
            prefix.append(token)
            keep = stop(row, prefix)
            if keep is not None:
                return keep, STOP
    return len(tokens), EOS if ended else LENGTH


def _configured_eos(model_path: str) -> set[int]:
    """EOS ids of the checkpoint's generation config (none when it has none)."""
    try:
        configured = GenerationConfig.from_pretrained(model_path).eos_token_id
    except OSError:
        return set()
    if configured is None:
        return set()
    return {configured} if isinstance(configured, int) else set(configured)


def _is_peft(model: torch.nn.Module) -> TypeGuard[PeftModel]:
    from peft import PeftModel

    return isinstance(model, PeftModel)


@contextlib.contextmanager
def _in_this_process() -> Iterator[None]:
    """Start vLLM's engine core and worker in this process (the weights then reach it by
    reference) without it taking the learner's CPU threads: it would drop torch to 1 thread
    unless OMP_NUM_THREADS is set, and its CPU worker replaces ``torch.set_num_threads``
    with a no-op."""
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    threads, set_threads = torch.get_num_threads(), torch.set_num_threads
    omp = os.environ.get("OMP_NUM_THREADS")
    os.environ["OMP_NUM_THREADS"] = omp or str(threads)
    try:
        yield
    finally:
        torch.set_num_threads = set_threads
        torch.set_num_threads(threads)
        if omp is None:
            os.environ.pop("OMP_NUM_THREADS", None)
