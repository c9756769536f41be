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

import ctypes
import os
import resource

_LD_W_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_ALLOW, _EPERM, _ENOSYS = 0x7FFF0000, 0x00050000 | 1, 0x00050000 | 38
_NR, _ARCH = 0, 4
_ARG = (16, 24, 32)  # offsets of arguments 0, 1, 2 in struct seccomp_data (low 32 bits)
_AUDIT_ARCH_X86_64 = 0xC000003E
_X32_BIT = 0x40000000
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


class _Filter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte),
                ("k", ctypes.c_uint)]


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_Filter))]


def program() -> list[tuple[int, int, int, int]]:
    """The BPF instructions (code, jt, jf, k) of the filter."""
    code: list[tuple | str] = [(_LD_W_ABS, None, None, _ARCH),
                               (_JEQ, None, "deny", _AUDIT_ARCH_X86_64),
                               (_LD_W_ABS, None, None, _NR),
                               (_JGE, "deny", None, _X32_BIT)]
    code += [(_JEQ, "deny", None, nr) for nr in _X86_64.values()]
    code += [(_JEQ, "clone", None, _CLONE), (_JEQ, "nosys", None, _CLONE3),
             (_JEQ, "open", None, _OPEN), (_JEQ, "openat", None, _OPENAT),
             (_RET, None, None, _ALLOW),
             "clone", (_LD_W_ABS, None, None, _ARG[0]),
             (_JSET, None, "deny", _CLONE_THREAD), (_RET, None, None, _ALLOW),
             "open", (_LD_W_ABS, None, None, _ARG[1]),
             (_JSET, "deny", None, _WRITE_FLAGS), (_RET, None, None, _ALLOW),
             "openat", (_LD_W_ABS, None, None, _ARG[2]),
             (_JSET, "deny", None, _WRITE_FLAGS), (_RET, None, None, _ALLOW),
             "nosys", (_RET, None, None, _ENOSYS),
             "deny", (_RET, None, None, _EPERM)]
    labels: dict[str, int] = {}
    body: list[tuple] = []
    for item in code:
        if isinstance(item, str):
            labels[item] = len(body)
        else:
            body.append(item)

    def offset(i: int, target: str | None) -> int:
        return 0 if target is None else labels[target] - i - 1

    return [(op, offset(i, jt), offset(i, jf), k) for i, (op, jt, jf, k) in enumerate(body)]


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
    insns = program()
    array = (_Filter * len(insns))(*(_Filter(*i) for i in insns))
    prog = _Program(len(insns), array)
    libc = ctypes.CDLL(None, use_errno=True)
    # PR_SET_NO_NEW_PRIVS (required to install a filter), then PR_SET_SECCOMP, MODE_FILTER.
    if libc.prctl(38, 1, 0, 0, 0) != 0 or libc.prctl(22, 2, ctypes.byref(prog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "seccomp filter refused")
