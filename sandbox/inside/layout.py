"""Where a job lives in the container, shared by the agent and the zygote (stdlib only).

The places a job can write (the agent empties them after every job), where its program is
written, and the environment every job starts with.
"""

SCRATCH = "/scratch"
SHM = "/dev/shm"
MQUEUE = "/dev/mqueue"  # the POSIX message queues of the container's IPC namespace
MAIN = "main.py"
JOB_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": SCRATCH,
    "TMPDIR": SCRATCH,
    "LANG": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONUNBUFFERED": "1",
}
