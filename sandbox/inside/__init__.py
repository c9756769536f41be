"""Code that runs inside a sandbox container, next to the graded program (stdlib only).

These modules are never imported by the host at run time for grading: their source is shipped
with each test job as files under the job's scratch space (see ``sandbox.harness``). The host
imports them only to test them.
"""
