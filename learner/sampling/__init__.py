"""The sampling stage: completions from the policy and their grades.

``decoding`` is the learner's own decoding loop and ``engine`` the interface it shares with a
colocated vLLM engine (``vllm_engine``, ``--rollout-engine vllm``); ``rollout`` samples G
completions per prompt with an engine, ``episodes`` runs multi-turn episodes with one (``chat``
renders the turns between), and ``scoring`` grades completions through the env. ``kernels``
holds the CPU kernels that make decoding and the loss passes fast (oneDNN Linear layers, an
in-place KV cache).
"""
