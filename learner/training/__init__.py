"""The training stage: ``GRPOTrainer`` (``trainer``) and what its step is made of — its samples
(``collect``, ``samples``), the objective (``grpo``), the rows trained on (``batching``), the
loss passes and optimizer steps (``update``, with the log-probs of ``forward``), the logged
figures (``step_metrics``, ``run_log``), the reward-hack monitor, the prompt stream (``data``),
processes (``distributed``, ``sharding``) and checkpoints."""
