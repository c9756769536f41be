"""The bundled GRPO learner: ``python -m learner.run`` trains a causal LM on any grpo/* env.

By stage: ``sampling`` (completions and their grades), ``training`` (``GRPOTrainer``: advantages,
the loss passes, the optimizer), ``evaluation`` (held-out accuracy and the gates report); the
entry points ``run``, ``eval``, ``plot`` and ``demo`` share their set-up in ``launch``.
"""
