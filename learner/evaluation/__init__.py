"""The evaluation half of the learner: held-out accuracy and pass@k (``heldout``), the gates
report (``gates``: reward distributions, group variance, perturbed prompts through the env's
hooks, flagged samples via ``flags``, the general check in ``general``) and its rendering
(``report``)."""
