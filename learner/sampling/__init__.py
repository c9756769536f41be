"""The sampling stage: completions from the policy and their grades.

``decoding`` is the one decoding loop; ``rollout`` samples G completions per prompt with it,
``episodes`` runs multi-turn episodes with it (``chat`` renders the turns between), and
``scoring`` grades completions through the env. ``kernels`` holds the CPU kernels that make
decoding and the loss passes fast (oneDNN Linear layers, an in-place KV cache).
"""
