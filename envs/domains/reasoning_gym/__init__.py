"""reasoning-gym's procedural tasks as grpo-gym packs: ``grpo/ReasoningGym-v0``.

``env`` (the env), ``generator`` (a task as a procedural pack: train stream and fixed test set
disjoint by the question's hash, curriculum levels), ``grading`` (our rules: one final answer,
no partial credit, the math checker for numbers, a task's own scorer under limits) and
``catalogue`` (every task's card verdict, committed in ``cards.json``, read by ``envs list``).
Importing this package never imports reasoning-gym.
"""
