"""The evaluation stage: held-out accuracy and pass@k (``heldout``), the gates report of
``learner.eval`` (``gates``: reward distributions, group variance, perturbed prompts through the
env's hooks, flagged samples via ``flags``, the general check in ``general``), its rendering
(``report``), and the policy of a training run's folder (``run_dir``)."""
