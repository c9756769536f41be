"""A seccomp filter that keeps a process from signalling, tracing or reprioritising another one.

The graded program and the trusted test process run as the same user inside one container, so
the kernel's own checks would let the program signal the trusted process (``kill``), or change
its limits and priority. Reading or tracing it is already refused because the trusted process
is non-dumpable; this filter, installed by the trusted process in the program's process between
``fork`` and ``exec`` (before any of the program's code runs), refuses the rest with ``EPERM``,
for that process and everything it starts (a filter survives ``fork`` and ``exec`` and cannot be
removed):

- every signal syscall aimed at the protected process, at its process group or at every process
  (``kill(-1, ...)``); signals to the program's own processes still work;
- ``ptrace``, ``process_vm_readv``/``writev`` and the pidfd calls, whatever their target;
- ``prlimit64``, ``setpriority`` and the scheduler calls aimed at the protected process, and
  ``setpriority`` on the whole user;
- naming any process the owner of a file's I/O signals, whatever the target: ``fcntl``
  ``F_SETOWN``, ``F_SETOWN_EX`` and ``F_SETSIG``, and the sockets' ``ioctl`` ``FIOSETOWN`` and
  ``SIOCSPGRP`` (with ``O_ASYNC``, the kernel would send the owner any signal the program
  chose, on the program's behalf, past the signal rules above).

Only x86_64 and aarch64 are known (``supported()``); elsewhere ``install`` installs nothing.
"""

from __future__ import annotations

import ctypes
import os

_LD_W_ABS, _JEQ, _JGE, _RET = 0x20, 0x15, 0x35, 0x06
_ALLOW, _EPERM = 0x7FFF0000, 0x00050000 | 1
_NR, _ARCH, _ARG0, _ARG1 = 0, 4, 16, 24  # offsets in struct seccomp_data (little-endian)
_PRIO_USER = 2

# name -> syscall number, per architecture (x86_64's table, then the generic one of aarch64)
_SYSCALLS = {
    "x86_64": dict(kill=62, tkill=200, tgkill=234, rt_sigqueueinfo=129, rt_tgsigqueueinfo=297,
                   ptrace=101, process_vm_readv=310, process_vm_writev=311, pidfd_open=434,
                   pidfd_send_signal=424, pidfd_getfd=438, prlimit64=302, setpriority=141,
                   sched_setaffinity=203, sched_setscheduler=144, sched_setparam=142,
                   fcntl=72, ioctl=16),
    "aarch64": dict(kill=129, tkill=130, tgkill=131, rt_sigqueueinfo=138, rt_tgsigqueueinfo=240,
                    ptrace=117, process_vm_readv=270, process_vm_writev=271, pidfd_open=434,
                    pidfd_send_signal=424, pidfd_getfd=438, prlimit64=261, setpriority=140,
                    sched_setaffinity=122, sched_setscheduler=119, sched_setparam=118,
                    fcntl=25, ioctl=29),
}
_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_X32_BIT = 0x40000000  # x86_64's second ABI: its calls are refused, not filtered twice

_DENIED = ("ptrace", "process_vm_readv", "process_vm_writev", "pidfd_open",
           "pidfd_send_signal", "pidfd_getfd")
_SIGNALS = ("kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo")
_PID_FIRST = ("prlimit64", "sched_setaffinity", "sched_setscheduler", "sched_setparam")
# The second argument (a command: an int to the kernel, so its low 32 bits) that sets an owner.
_SET_OWNER = {"fcntl": (8, 15, 10),  # F_SETOWN, F_SETOWN_EX, F_SETSIG
              "ioctl": (0x8901, 0x8902)}  # FIOSETOWN, SIOCSPGRP


class _Filter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte),
                ("k", ctypes.c_uint)]


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_Filter))]


def program(protected_pid: int, machine: str | None = None) -> list[tuple[int, int, int, int]]:
    """The BPF instructions (code, jt, jf, k) protecting ``protected_pid`` (also its group)."""
    machine = machine or os.uname().machine
    nr = _SYSCALLS[machine]
    pid, group = protected_pid & 0xFFFFFFFF, -protected_pid & 0xFFFFFFFF
    # Instructions with symbolic jump targets, resolved to relative offsets below.
    code: list[tuple] = [(_LD_W_ABS, None, None, _ARCH),
                         (_JEQ, None, "deny", _AUDIT_ARCH[machine]),
                         (_LD_W_ABS, None, None, _NR)]
    if machine == "x86_64":
        code.append((_JGE, "deny", None, _X32_BIT))
    code += [(_JEQ, "deny", None, nr[n]) for n in _DENIED]
    code += [(_JEQ, "signal", None, nr[n]) for n in _SIGNALS]
    code += [(_JEQ, "pid_first", None, nr[n]) for n in _PID_FIRST]
    code += [(_JEQ, f"owner_{n}", None, nr[n]) for n in _SET_OWNER]
    code += [(_JEQ, "priority", None, nr["setpriority"]), (_RET, None, None, _ALLOW),
             "signal", (_LD_W_ABS, None, None, _ARG0)]
    code += [(_JEQ, "deny", None, v) for v in (pid, group, 0xFFFFFFFF)]
    code += [(_RET, None, None, _ALLOW),
             "pid_first", (_LD_W_ABS, None, None, _ARG0), (_JEQ, "deny", None, pid),
             (_RET, None, None, _ALLOW),
             *[item for n, commands in _SET_OWNER.items()
               for item in (f"owner_{n}", (_LD_W_ABS, None, None, _ARG1),
                            *[(_JEQ, "deny", None, c) for c in commands],
                            (_RET, None, None, _ALLOW))],
             "priority", (_LD_W_ABS, None, None, _ARG0), (_JEQ, "deny", None, _PRIO_USER),
             (_LD_W_ABS, None, None, _ARG1), (_JEQ, "deny", None, pid),
             (_RET, None, None, _ALLOW),
             "deny", (_RET, None, None, _EPERM)]
    labels, body = {}, []
    for item in code:
        if isinstance(item, str):
            labels[item] = len(body)
        else:
            body.append(item)

    def offset(i: int, target: str | None) -> int:
        return 0 if target is None else labels[target] - i - 1

    return [(op, offset(i, jt), offset(i, jf), k) for i, (op, jt, jf, k) in enumerate(body)]


def supported() -> bool:
    return os.uname().machine in _SYSCALLS


def install(protected_pid: int) -> None:
    """Install the filter in this process, for good (nothing where it is not ``supported()``);
    raises ``OSError`` if the kernel refuses it."""
    if not supported():
        return
    insns = program(protected_pid)
    array = (_Filter * len(insns))(*(_Filter(*i) for i in insns))
    prog = _Program(len(insns), array)
    libc = ctypes.CDLL(None, use_errno=True)
    # PR_SET_NO_NEW_PRIVS (required to install a filter), then PR_SET_SECCOMP, MODE_FILTER.
    if libc.prctl(38, 1, 0, 0, 0) != 0 or libc.prctl(22, 2, ctypes.byref(prog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "seccomp filter refused")
