"""grpo/* envs as reward functions for the trainers people already use: TRL (``trl``) and
verl (``verl``). Each grades through the env's own ``score``, so rewards, components and the
reward-hack rules are exactly those of the env."""
