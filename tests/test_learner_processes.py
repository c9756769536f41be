"""What a multi-process run shares, checked in one process with stand-ins for the others (the
real two-process runs are in tests/test_learner_distributed.py): rows balanced by tokens,
--dist-timeout, the shared output folder, the ZeRO-1/2 reference's precision, and what
config.json records of the vLLM engine's size."""

import json
from datetime import timedelta
from types import SimpleNamespace

import pytest
import torch

from learner.config import Config, parse_config
from learner.training.batching import Batch
from learner.training.distributed import (
    SHARED_MARKER,
    UnsharedOutput,
    balance_by_tokens,
    balance_rows,
    check_shared_folder,
    group_runs,
)
from tests import learner_helpers as h


def test_balance_by_tokens_by_hand():
    # Largest first, each to the lighter process: 5 -> 0; 4 -> 1; 3 -> 1 (4 < 5); 3 -> 0
    # (5 < 7); 1 -> 1 (7 < 8): 8 and 8 tokens, where round-robin by count gives 12 and 4.
    assert balance_by_tokens([5, 1, 4, 3, 3], 2) == [[0, 4], [1, 2, 3]]
    assert balance_by_tokens([5, 1, 4, 3, 3], 1) == [[0, 1, 2, 3, 4]]
    # Ties go to the lower rank; more processes than groups leaves some without one.
    assert balance_by_tokens([2, 2], 3) == [[0], [1], []]
    # One long group against many short ones: the long one alone.
    assert balance_by_tokens([1, 1, 1, 1, 1, 1, 6], 2) == [[6], [0, 1, 2, 3, 4, 5]]
    assert balance_by_tokens([], 2) == [[], []]


def _batch(lengths: list[int], groups: list[int], prompt: int, tag: float) -> Batch:
    """Rows with ``lengths`` completion tokens (ids = the row's tag), a ``prompt``-token prompt
    left-padded to width 4, their advantage the tag (to find them again)."""
    n, width = len(lengths), max(lengths)
    cols = torch.arange(width)
    completion_mask = (cols < torch.tensor(lengths).unsqueeze(-1)).long()
    prompt_mask = (torch.arange(4) >= 4 - prompt).long().expand(n, 4).clone()
    advantages = torch.tensor([tag + i for i in range(n)])
    return Batch(prompt_mask * 9, prompt_mask, completion_mask * 5, completion_mask,
                 completion_mask.clone(), advantages, torch.tensor(groups),
                 n_sequences=float(n), n_tokens=float(sum(lengths)),
                 sampling_logprobs=-completion_mask.float())


class Ranks:
    """Two processes seen from ``rank``: gather_objects answers with both ranks' objects."""

    world = 2

    def __init__(self, rank: int, other):
        self.rank, self.other = rank, other

    def gather_objects(self, value):
        return [value, self.other] if self.rank == 0 else [self.other, value]


def test_rows_move_between_processes_whole_groups_balanced_by_tokens():
    # Process 0 drew long completions (groups of 2 rows: 10+10 +2 prompt, 9+9 +2), process 1
    # short ones (1+1 +3, 2+2 +3): 22 + 20 tokens against 5 + 7.
    b0 = _batch([10, 10, 9, 9], [0, 0, 1, 1], prompt=2, tag=0.0)
    b1 = _batch([1, 1, 2, 2], [0, 0, 1, 1], prompt=3, tag=10.0)
    assert group_runs(b0.groups) == [(0, 2), (2, 4)]
    new0 = balance_rows(b0, Ranks(0, b1.to(torch.device("cpu"))))
    new1 = balance_rows(b1, Ranks(1, b0.to(torch.device("cpu"))))
    # Costs 22, 20, 5, 7 -> 22 to rank 0, 20 to rank 1, 7 to rank 1, 5 to rank 0: 27 and 27.
    assert new0.advantages.tolist() == [0.0, 1.0, 10.0, 11.0]
    assert new1.advantages.tolist() == [2.0, 3.0, 12.0, 13.0]
    assert int(new0.positions().sum()) == int(new1.positions().sum()) == 27
    for new in (new0, new1):
        assert new.groups.tolist() == [0, 0, 1, 1]  # whole groups, numbered anew
        assert new.prompt_ids.shape[1] == 4 and new.completion_ids.shape[1] == 10
        # Each row as it was: its tokens, masks and the engine's log-probs, padding masked.
        own = new.completion_mask.bool()
        assert torch.equal(new.loss_mask.bool(), own)
        assert bool((new.completion_ids[own] == 5).all() and (new.completion_ids[~own] == 0).all())
        assert torch.equal(new.sampling_logprobs, -own.float())
    assert new0.prompt_mask.sum(-1).tolist() == [2, 2, 3, 3]
    # The normalisers stay each process's own: their mean over processes is the step's.
    assert (new0.n_sequences, new1.n_tokens) == (b0.n_sequences, b1.n_tokens)


def test_a_process_left_without_a_group_keeps_a_placeholder_row():
    b0 = _batch([3, 3], [0, 0], prompt=2, tag=0.0)
    empty = _batch([1], [0], prompt=1, tag=5.0)
    empty.loss_mask = torch.zeros_like(empty.loss_mask)  # gather_rows' placeholder
    new1 = balance_rows(empty, Ranks(1, b0))
    assert len(new1) == 1 and not bool(new1.loss_mask.any())
    new0 = balance_rows(b0, Ranks(0, empty))
    assert new0.advantages.tolist() == [0.0, 1.0]  # the placeholder is not a group to move


class Folder:
    """Two processes: rank 1 sees ``seen_by_1`` for the marker rank 0 wrote."""

    world = 2

    def __init__(self, rank: int, seen_by_1: bool):
        self.rank, self.seen_by_1 = rank, seen_by_1

    def barrier(self):
        pass

    def gather_objects(self, value):
        return [(True, "node-a"), (self.seen_by_1, "node-b")]


def test_processes_that_do_not_share_the_output_folder_are_refused_at_start(tmp_path):
    check_shared_folder(Folder(0, seen_by_1=True), tmp_path / "run")
    assert not (tmp_path / "run" / SHARED_MARKER).exists()  # nothing left behind
    with pytest.raises(UnsharedOutput, match="process 1 on node-b does not see .* shared "
                                              "filesystem"):
        check_shared_folder(Folder(0, seen_by_1=False), tmp_path / "run")
    check_shared_folder(SimpleNamespace(world=1), tmp_path / "alone")  # one process: nothing
    assert not (tmp_path / "alone").exists()


def test_dist_timeout_reaches_the_process_group_and_config_json(tmp_path):
    from learner.training.placement import make_accelerator

    accelerator = make_accelerator(torch.device("cpu"), timeout_s=90)
    assert accelerator.init_handler.timeout == timedelta(seconds=90)
    assert accelerator.init_handler.to_kwargs() == {"timeout": timedelta(seconds=90)}
    c = parse_config(["--dist-timeout", "90"])
    assert json.loads(json.dumps(c.to_dict()))["dist_timeout"] == 90
    assert Config().dist_timeout == 1800  # TRL's ddp_timeout
    for bad in ("0", "-5", "nan", "inf", "1e14", "1e300"):  # the last three overflowed
        with pytest.raises(SystemExit):
            parse_config(["--dist-timeout", bad])
    longest = parse_config(["--dist-timeout", str(365 * 24 * 3600)]).dist_timeout
    assert make_accelerator(torch.device("cpu"), timeout_s=longest).init_handler.timeout == \
        timedelta(days=365)


def test_the_zero2_reference_takes_the_policys_dtype():
    from accelerate.utils import DistributedType

    from learner.training.sharding import prepare_reference

    def accelerator(stage):
        return SimpleNamespace(
            distributed_type=DistributedType.DEEPSPEED if stage else DistributedType.NO,
            state=SimpleNamespace(deepspeed_plugin=SimpleNamespace(zero_stage=stage)),
            device=torch.device("cpu"), mixed_precision="no")

    for stage in (1, 2):
        ref = prepare_reference(accelerator(stage), h.model(), policy_dtype=torch.bfloat16)
        assert {p.dtype for p in ref.parameters()} == {torch.bfloat16}, stage
    plain = prepare_reference(accelerator(0), h.model(), policy_dtype=torch.bfloat16)
    assert {p.dtype for p in plain.parameters()} == {torch.float32}  # DDP: as loaded


def test_config_json_records_the_engines_derived_size(tmp_path):
    from learner.launch import run_record
    from learner.training.vllm_sizing import EngineSize

    size = EngineSize(1024, 512, 0.22, ("max_model_len", "max_num_seqs"), 150, 512, 512)
    trainer = SimpleNamespace(device="cuda:0", accelerator=SimpleNamespace(num_processes=1),
                              engine_size=size, engine=SimpleNamespace(sleeps=True))
    record = json.loads(json.dumps(run_record(h.config(tmp_path), trainer)))
    engine = record["provenance"]["vllm_engine"]
    assert engine["max_model_len"] == 1024 and engine["gpu_memory_utilization"] == 0.22
    assert engine["derived"] == ["max_model_len", "max_num_seqs"] and engine["sleeps"] is True
    trainer.engine_size = None  # hf sampling: nothing to record
    assert "vllm_engine" not in run_record(h.config(tmp_path), trainer)["provenance"]
