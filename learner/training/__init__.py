"""The training half of the learner: the GRPO step loop (``trainer``) and what it is made of —
the objective (``grpo``), batching (``batching``), processes (``distributed``, ``sharding``),
the policy's forward pass (``forward``), the prompt stream (``data``), checkpoints, the run log
(``metrics``) and the reward-hack monitor."""
