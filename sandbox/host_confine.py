"""Confining a host process that runs third-party code on model output (a scorer that calls
``eval`` or sympy's ``parse_expr`` on the answer, as some of reasoning-gym's do).

Such a process cannot go into a container for every answer, so it confines itself once, after
its imports and before the first answer: a seccomp filter refuses with ``EPERM``, for it and
for good,

- starting programs and processes: ``execve``/``execveat``, ``fork``/``vfork``, and ``clone``
  without ``CLONE_THREAD`` (threads still start; ``clone3``, whose flags a filter cannot read,
  answers ``ENOSYS`` so that the C library falls back to ``clone``);
- the network: ``socket`` (the pipe it was given stays usable);
- changing any file: ``open``/``openat`` with a write, create, truncate or append flag,
  ``openat2``, ``creat``, and every call that removes, renames, links, truncates or changes the
  mode, owner, times or attributes of a file;
- reaching other processes: the signal calls, ``ptrace``, ``process_vm_*``, the pidfd calls;
- the kernel's side doors: ``io_uring`` (which seccomp cannot see into), ``bpf``,
  ``userfaultfd``, ``perf_event_open``, the key calls, ``mount``, ``unshare``, ``setns``.

Reading files stays possible; the process's stdout and stderr are pointed at ``/dev/null`` first
so that nothing read can reach a log. Its address space is capped (``RLIMIT_AS``) so that an
answer such as ``'a' * 10**12`` fails there instead of in the machine's memory.

Only x86_64 is known (``supported()``); elsewhere ``confine`` raises, and the caller must not
run the code at all (fail closed).
"""

from __future__ import annotations

import os
import resource

from sandbox.inside import seccomp
from sandbox.inside.seccomp import (
    ALLOW,
    ARCH,
    ARG,
    ENOSYS,
    EPERM,
    JEQ,
    JGE,
    JSET,
    LD_W_ABS,
    NR,
    RET,
    X32_BIT,
)

_AUDIT_ARCH_X86_64 = seccomp.AUDIT_ARCH["x86_64"]
_CLONE_THREAD = 0x00010000
# O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | O_APPEND (O_TMPFILE needs one of the first two)
_WRITE_FLAGS = 0x1 | 0x2 | 0x40 | 0x200 | 0x400

_X86_64 = dict(
    execve=59, execveat=322, fork=57, vfork=58, socket=41, openat2=437, creat=85,
    unlink=87, unlinkat=263, rename=82, renameat=264, renameat2=316, rmdir=84, mkdir=83,
    mkdirat=258, truncate=76, ftruncate=77, chmod=90, fchmod=91, fchmodat=268, chown=92,
    fchown=93, lchown=94, fchownat=260, link=86, linkat=265, symlink=88, symlinkat=266,
    mknod=133, mknodat=259, setxattr=188, lsetxattr=189, fsetxattr=190, removexattr=197,
    lremovexattr=198, fremovexattr=199, utime=132, utimes=235, utimensat=280, futimesat=261,
    open_by_handle_at=304, kill=62, tkill=200, tgkill=234, rt_sigqueueinfo=129,
    rt_tgsigqueueinfo=297, ptrace=101, process_vm_readv=310, process_vm_writev=311,
    pidfd_open=434, pidfd_send_signal=424, pidfd_getfd=438, io_uring_setup=425,
    io_uring_enter=426, io_uring_register=427, bpf=321, userfaultfd=323, perf_event_open=298,
    add_key=248, request_key=249, keyctl=250, mount=165, umount2=166, chroot=161,
    pivot_root=155, unshare=272, setns=308,
)
_CLONE, _CLONE3, _OPEN, _OPENAT = 56, 435, 2, 257


def program() -> list[tuple[int, int, int, int]]:
    """The BPF instructions (code, jt, jf, k) of the filter."""
    code: list[tuple | str] = [(LD_W_ABS, None, None, ARCH),
                               (JEQ, None, "deny", _AUDIT_ARCH_X86_64),
                               (LD_W_ABS, None, None, NR),
                               (JGE, "deny", None, X32_BIT)]
    code += [(JEQ, "deny", None, nr) for nr in _X86_64.values()]
    code += [(JEQ, "clone", None, _CLONE), (JEQ, "nosys", None, _CLONE3),
             (JEQ, "open", None, _OPEN), (JEQ, "openat", None, _OPENAT),
             (RET, None, None, ALLOW),
             "clone", (LD_W_ABS, None, None, ARG[0]),
             (JSET, None, "deny", _CLONE_THREAD), (RET, None, None, ALLOW),
             "open", (LD_W_ABS, None, None, ARG[1]),
             (JSET, "deny", None, _WRITE_FLAGS), (RET, None, None, ALLOW),
             "openat", (LD_W_ABS, None, None, ARG[2]),
             (JSET, "deny", None, _WRITE_FLAGS), (RET, None, None, ALLOW),
             "nosys", (RET, None, None, ENOSYS),
             "deny", (RET, None, None, EPERM)]
    return seccomp.assemble(code)


def supported() -> bool:
    return os.uname().machine == "x86_64"


def confine(memory_bytes: int | None = None) -> None:
    """Confine this process for good (see the module's docstring); raises ``OSError`` where the
    filter is unknown or the kernel refuses it, so that the caller runs nothing unconfined."""
    if not supported():
        raise OSError(f"no confinement filter for {os.uname().machine}")
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    os.close(null)
    if memory_bytes is not None:
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    seccomp.install(program())
