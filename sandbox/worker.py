"""One warm sandbox container and the framed channel to its agent.

Every isolation control is set here, when the container is created; nothing about a container can
be loosened later. The agent (``sandbox.inside.agent``, bundled with its modules) is injected as
the command line, so the image only needs Python 3. The channel is the container's own stdin/stdout through a Docker attach
socket: 4-byte length + JSON frames, wrapped by the engine in its stdout multiplexing header.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import os
import secrets
import socket
import struct
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
from docker.types import LogConfig

from sandbox.bundle import bundle
from sandbox.limits import PROGRAM_STATUSES, Limits, RunResult

LABEL = "grpo-sandbox"
OWNER_LABEL = "grpo-sandbox.owner"  # the host process (for removing stale containers)
INSTANCE_LABEL = "grpo-sandbox.instance"  # the Sandbox object (several may share a process)
LIMITS_LABEL = "grpo-sandbox.limits"  # the container limits (its pool)
UID_LABEL = "grpo-sandbox.uid"  # the container's own uid (no two live containers share one)
# The container's PID 1 and its zygote, each one program of ``sandbox.inside`` modules (a
# module's imports before it): the image needs nothing of ours.
AGENT_MODULES = ("layout", "channel", "processes", "clean_up", "baseline", "zygote_link", "relay",
                 "job", "agent")
ZYGOTE_MODULES = ("layout", "seccomp", "job_filter", "zygote")
AGENT_SOURCE = bundle("agent", AGENT_MODULES)
ZYGOTE_SOURCE = bundle("zygote", ZYGOTE_MODULES)  # the agent's argument: it starts the zygote
# Every container runs as a uid of its own: the kernel keeps some quotas per uid across all
# containers (POSIX message queue bytes, inotify instances, pending signals and POSIX timers,
# processes), so under one shared uid a job could exhaust them for every other container. The
# range is one systemd leaves unused (above its container ranges, below 2**31): no host user.
UID_BASE = 0x70000000
UID_SPAN = 1 << 27
START_TIMEOUT_S = 60.0
# Seconds the host waits past a job's wall limit before it declares the container hung: more
# than the agent takes to stop a job and clean up after it (at most about 6 s: clean_up.CLEAN_UP_S).
REPLY_GRACE_S = 10.0
# The slowest input rate the host tolerates before it declares the agent stuck (bytes/s).
INPUT_FLOOR_BPS = 1 << 20
AGENT_RESERVE_MB = 32  # memory left to the agent and the program beside the job's files
SHM_MB = 16  # the most /dev/shm holds
SCRATCH_INODES = 4096
SHM_INODES = 4096
_ids = itertools.count(1)


class WorkerError(RuntimeError):
    """The container or the channel to its agent failed (never the program's fault)."""


class JobNotStarted(WorkerError):
    """The container could not start the job, so none of its code ran: safe to retry elsewhere.

    This happens when the previous job killed the container's zygote just as it exited, before
    the agent could notice and mark the container dirty.
    """


def container_config(
    client: docker.DockerClient, image: str, limits: Limits, labels: dict[str, str]
) -> dict[str, Any]:
    """``create_container`` keyword arguments: every isolation control, on."""
    uid = pick_uid(client)
    scratch_mb, shm_mb = writable_mb(limits)
    host_config = client.api.create_host_config(
        network_mode="none",
        read_only=True,
        tmpfs={
            # Owned by the sandbox user (the engine copies the image's mode onto the mount).
            "/scratch": f"size={scratch_mb}m,nr_inodes={SCRATCH_INODES},uid={uid},gid={uid},"
                        "noexec,nosuid,nodev",
            # Hides the engine's devpts: the count of ptys is one table for the whole host
            # (kernel.pty.max), which a job holding thousands of them would exhaust for others.
            "/dev/pts": "ro,size=4k,nr_inodes=2,mode=555,noexec,nosuid,nodev",
            # Instead of the engine's own /dev/shm (shm_size), which bounds bytes, not files:
            # millions of empty files there would pin the container's memory until the agent
            # itself is killed for it, and take longer to remove than the host waits.
            "/dev/shm": f"size={shm_mb}m,nr_inodes={SHM_INODES},mode=1777,"
                        "noexec,nosuid,nodev",
        },
        mem_limit=f"{limits.memory_mb}m",
        memswap_limit=f"{limits.memory_mb}m",  # equal to the memory limit: no swap
        pids_limit=limits.pids,
        nano_cpus=int(limits.cpus * 1e9),
        cap_drop=["ALL"],
        security_opt=["no-new-privileges"],
        ipc_mode="private",
        auto_remove=True,
        log_config=LogConfig(type="none"),
    )
    return dict(
        image=image,
        command=["python3", "-I", "-S", "-c", AGENT_SOURCE, ZYGOTE_SOURCE],
        user=f"{uid}:{uid}",
        working_dir="/scratch",
        hostname="sandbox",
        environment={"LANG": "C.UTF-8"},
        tty=False,
        stdin_open=True,
        # detach=False makes the engine set StdinOnce: when the host's attach socket closes (the
        # host process died), the agent reads EOF and exits, and auto_remove deletes it.
        detach=False,
        labels={LABEL: "1", LIMITS_LABEL: limits_label(limits), UID_LABEL: str(uid), **labels},
        host_config=host_config,
    )


def writable_mb(limits: Limits) -> tuple[int, int]:
    """The sizes (MB) of the scratch space and of /dev/shm. Both are memory that outlives the
    job's processes, so together they leave ``AGENT_RESERVE_MB`` of ``memory_mb`` free: a job
    that fills them cannot starve the agent (whose death would read as an infrastructure
    failure). With the default limits that is the whole ``disk_mb``."""
    room = max(2, limits.memory_mb - AGENT_RESERVE_MB)
    shm = max(1, min(limits.disk_mb, SHM_MB, room // 4))
    return max(1, min(limits.disk_mb, room - shm)), shm


def pick_uid(client: docker.DockerClient) -> int:
    """A random uid in our range that no sandbox container on the engine uses."""
    used = {(c.get("Labels") or {}).get(UID_LABEL)
            for c in client.api.containers(all=True, filters={"label": LABEL})}
    while True:
        uid = UID_BASE + secrets.randbelow(UID_SPAN)
        if str(uid) not in used:
            return uid


class Worker:
    """A started container with its agent ready for jobs. Not thread-safe: one job at a time."""

    def __init__(
        self, client: docker.DockerClient, image: str, limits: Limits, labels: dict[str, str]
    ):
        self.limits = limits
        self.client = client
        self.container_id: str | None = None
        self._buf = bytearray()
        self._sock: socket.socket | None = None
        try:
            created = client.api.create_container(
                **container_config(client, image, limits, labels)
            )
            self.container_id = created["Id"]
            # Attach before start so the agent's first frame cannot be missed.
            raw = client.api.attach_socket(
                self.container_id, params={"stdin": 1, "stdout": 1, "stderr": 0, "stream": 1}
            )
            self._sock = getattr(raw, "_sock", raw)
            self._raw = raw  # keep the response object alive with its socket
            client.api.start(self.container_id)
            hello = self._recv_frame(START_TIMEOUT_S, 1 << 16)
            error = ""
        except WorkerError as exc:
            error = str(exc)
        except Exception as exc:  # noqa: BLE001 - the SDK raises many kinds here
            error = f"cannot start a sandbox container: {exc}"
        if error:
            # Raised outside the handler, without the engine's exception: a traceback cycle
            # would keep the failed connection's socket open until the next garbage collection.
            self.close()
            raise WorkerError(error)
        if not hello.get("ready"):
            self.close()
            raise WorkerError(f"sandbox agent did not start: {hello}")
        self.hello = hello

    # -- framing ------------------------------------------------------------------------------
    def _recv_exact(self, n: int, deadline: float) -> bytes:
        """``n`` payload bytes, stripping the engine's 8-byte stream headers."""
        out = bytearray()
        while len(out) < n:
            if not self._buf:
                header = self._recv_raw(8, deadline)
                stream, size = header[0], struct.unpack(">I", header[4:8])[0]
                payload = self._recv_raw(size, deadline)
                if stream != 1:  # only stdout is attached; anything else is noise
                    continue
                self._buf += payload
            take = min(n - len(out), len(self._buf))
            out += self._buf[:take]
            del self._buf[:take]
        return bytes(out)

    def _recv_raw(self, n: int, deadline: float) -> bytes:
        assert self._sock is not None
        out = bytearray()
        while len(out) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise WorkerError("the sandbox agent did not answer in time")
            self._sock.settimeout(left)
            try:
                chunk = self._sock.recv(min(n - len(out), 1 << 20))
            except TimeoutError:
                continue
            except OSError as exc:
                raise WorkerError(f"lost the sandbox container: {exc}") from exc
            if not chunk:
                raise WorkerError("the sandbox container exited (its agent is gone)")
            out += chunk
        return bytes(out)

    def _recv_frame(self, timeout: float, max_bytes: int) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        size = struct.unpack(">I", self._recv_exact(4, deadline))[0]
        if size > max_bytes:
            raise WorkerError(f"sandbox agent sent an oversized frame ({size} bytes)")
        return json.loads(self._recv_exact(size, deadline))

    def _send_frame(self, obj: dict[str, Any]) -> None:
        assert self._sock is not None
        data = json.dumps(obj).encode()
        self._sock.settimeout(START_TIMEOUT_S)
        try:
            self._sock.sendall(struct.pack(">I", len(data)) + data)
        except OSError as exc:
            raise WorkerError(f"lost the sandbox container: {exc}") from exc

    def _send_raw(self, data: bytes | memoryview, deadline: float) -> None:
        assert self._sock is not None
        view = memoryview(data)
        while view:
            left = deadline - time.monotonic()
            if left <= 0:
                raise WorkerError("the sandbox agent stopped taking the job's input")
            self._sock.settimeout(left)
            try:
                sent = self._sock.send(view[:1 << 20])
            except TimeoutError:
                continue
            except OSError as exc:
                raise WorkerError(f"lost the sandbox container: {exc}") from exc
            view = view[sent:]

    # -- jobs ---------------------------------------------------------------------------------
    def run(self, job: JobInput, limits: Limits) -> tuple[RunResult, bool]:
        """Run one job; returns the result and whether this container may be reused."""
        start = time.monotonic()
        job_id = next(_ids)
        req = {
            "id": job_id,
            # The bytes follow the frame, in this order: the agent writes the files straight
            # to the scratch space and pipes stdin to the program as it reads it, so no input
            # is ever held whole in the container's memory.
            "code_bytes": len(job.code),
            "files": [[name, len(data)] for name, data in job.files],
            "stdin_bytes": len(job.stdin),
            "wall_s": limits.wall_s,
            "cpu_s": limits.cpu_s,
            "output_bytes": limits.output_bytes,
            "disk_mb": limits.disk_mb,
        }
        # Base64 of both capped streams plus a little JSON: host memory stays bounded.
        max_frame = 2 * (limits.output_bytes * 4 // 3 + 4) + 65536
        # The agent takes the input as fast as it can write files and as the program reads
        # stdin, and drains what the program leaves once it is over: the wall limit bounds it.
        send_deadline = start + START_TIMEOUT_S + limits.wall_s + job.size / INPUT_FLOOR_BPS
        try:
            self._send_frame(req)
            for data in (job.code, *(d for _, d in job.files), job.stdin):
                self._send_raw(data, send_deadline)
            reply = self._recv_frame(limits.wall_s + REPLY_GRACE_S, max_frame)
        except (WorkerError, ValueError) as exc:
            return RunResult.infra_error(str(exc), time.monotonic() - start), False
        if reply.get("id") == job_id and reply.get("started") is False:
            raise JobNotStarted(reply.get("error") or "the job could not be started")
        # Past this point the job's code ran: its verdict is one of PROGRAM_STATUSES (the agent
        # reports what a job left behind as dirty_container). Only a reply that is not a verdict
        # (the agent's own failure before the job, or a garbled frame) is an infrastructure error.
        if reply.get("id") == job_id and reply.get("status") == "sandbox_error":
            error = str(reply.get("error") or "the sandbox agent failed")
            return RunResult.infra_error(error, time.monotonic() - start), False
        try:
            if reply.get("id") != job_id or reply.get("status") not in PROGRAM_STATUSES:
                raise ValueError(f"{reply}")
            result = RunResult(
                status=reply["status"],
                exit_code=reply["exit_code"],
                stdout=_text(reply["stdout"]),
                stderr=_text(reply["stderr"]),
                truncated=bool(reply["truncated"]),
                wall_s=float(reply["wall_s"]),
                cpu_s=float(reply["cpu_s"]),
                error=str(reply.get("error") or ""),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            error = f"unexpected reply from the sandbox agent: {str(exc)[:300]}"
            return RunResult.infra_error(error, time.monotonic() - start), False
        return result, not reply.get("dirty", True)

    def close(self) -> str | None:
        """Remove the container (idempotent; never raises: it may be gone, or the engine down).
        Returns the container's id when the engine could not be asked to remove it."""
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.close()
            self._sock = None
            self._raw = None
        if self.container_id is not None:
            cid, self.container_id = self.container_id, None
            try:
                remove_container(self.client, cid)
            except Exception:  # noqa: BLE001 - the engine is unreachable: try again later
                return cid
        return None


@dataclass(frozen=True)
class JobInput:
    """A job's program, files and stdin as bytes, checked to fit the scratch space."""

    code: bytes
    stdin: bytes
    files: tuple[tuple[str, bytes], ...]

    @property
    def size(self) -> int:
        return len(self.code) + len(self.stdin) + sum(len(d) for _, d in self.files)

    @classmethod
    def of(cls, code: str, stdin: str | bytes, files: dict[str, str | bytes] | None,
           limits: Limits) -> JobInput:
        """Raises ``ValueError`` for a bad file name, or for a program and files that do not
        fit in ``limits.disk_mb`` (the scratch space is memory: it counts towards
        ``memory_mb`` too). Stdin has no limit: it is streamed."""
        pairs = []
        for name, data in (files or {}).items():
            parts = name.split("/")
            if not name or name.startswith("/") or ".." in parts or name == "main.py":
                raise ValueError(f"bad file name {name!r}: use a relative path inside the "
                                 "scratch directory (main.py is the program itself)")
            pairs.append((name, _bytes(data)))
        names = {name for name, _ in pairs} | {"main.py"}
        for name in names:
            parts = name.split("/")
            for i in range(1, len(parts)):
                if "/".join(parts[:i]) in names:
                    raise ValueError(f"bad file name {name!r}: {'/'.join(parts[:i])!r} is a "
                                     "file, so it cannot be a directory too")
        job = cls(_bytes(code), _bytes(stdin), tuple(pairs))
        # tmpfs rounds every file up to whole pages; each file and directory takes an inode.
        need = sum(-(-len(d) // 4096) * 4096 for d in (job.code, *(d for _, d in job.files)))
        dirs = {"/".join(n.split("/")[:i]) for n, _ in job.files
                for i in range(1, len(n.split("/")))}
        mb = need / 2**20
        if need > limits.disk_mb * 2**20:
            raise ValueError(f"the program and its files need {mb:.1f} MB of scratch space, "
                             f"more than Limits.disk_mb={limits.disk_mb}: raise disk_mb")
        if need > writable_mb(limits)[0] * 2**20:
            raise ValueError(f"the program and its files ({mb:.1f} MB) are kept in memory and "
                             f"leave too little of Limits.memory_mb={limits.memory_mb} "
                             f"({AGENT_RESERVE_MB} MB are reserved): raise memory_mb")
        if len(job.files) + len(dirs) + 1 > SCRATCH_INODES - 16:
            raise ValueError(f"{len(job.files)} files are more than the scratch space holds "
                             f"({SCRATCH_INODES - 17})")
        return job


def remove_container(client: docker.DockerClient, container_id: str) -> None:
    try:
        client.api.remove_container(container_id, force=True)
    except docker.errors.NotFound:
        pass
    except docker.errors.APIError as exc:
        if exc.status_code != 409:  # 409: removal already in progress (auto_remove)
            raise


def _bytes(data: str | bytes) -> bytes:
    return data.encode("utf-8") if isinstance(data, str) else bytes(data)


def limits_label(limits: Limits) -> str:
    """The container limits as a label value (``python -m sandbox doctor`` groups by it)."""
    return (f"memory_mb={limits.memory_mb},pids={limits.pids},disk_mb={limits.disk_mb},"
            f"cpus={limits.cpus:g}")


def _text(b64: str) -> str:
    return base64.b64decode(b64).decode("utf-8", errors="replace")


# -- ownership: which host process a container belongs to ------------------------------------
def _start_time(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def owner_tag(pid: int | None = None) -> str:
    """``host:pid:start-time``: unique even when a pid is reused."""
    pid = pid or os.getpid()
    return f"{socket.gethostname()}:{pid}:{_start_time(pid) or 0}"


def owner_alive(tag: str) -> bool | None:
    """Whether the owning process still runs; ``None`` when it is on another machine."""
    try:
        host, pid, start = tag.rsplit(":", 2)
    except ValueError:
        return None
    if host != socket.gethostname():
        return None
    return _start_time(int(pid)) == start if start != "0" else Path(f"/proc/{pid}").exists()


def remove_stale(client: docker.DockerClient) -> int:
    """Remove sandbox containers whose owner process on this machine is gone."""
    removed = 0
    for c in client.api.containers(all=True, filters={"label": LABEL}):
        tag = (c.get("Labels") or {}).get(OWNER_LABEL, "")
        if owner_alive(tag) is False:
            remove_container(client, c["Id"])
            removed += 1
    return removed
