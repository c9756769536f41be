"""Code that runs inside a sandbox container (stdlib only).

Two sets of modules, each shipped as one program (``sandbox.bundle``): the container's agent
(PID 1: ``agent`` and what it imports) with its zygote (``zygote``, which installs the jobs'
``job_filter``), and a code-test job's judge (``judge``) with the graded program's side
(``candidate``); ``seccomp`` assembles both filters. The host imports them only to test them.
"""
