"""The bundled GRPO learner: ``python -m learner.run`` trains a causal LM on any grpo/* env."""
