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

import os

from sandbox.inside import seccomp
from sandbox.inside.seccomp import (
    ALLOW,
    ARCH,
    ARG,
    AUDIT_ARCH,
    EPERM,
    JEQ,
    JGE,
    LD_W_ABS,
    NR,
    RET,
    X32_BIT,
)

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

_DENIED = ("ptrace", "process_vm_readv", "process_vm_writev", "pidfd_open",
           "pidfd_send_signal", "pidfd_getfd")
_SIGNALS = ("kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo")
_PID_FIRST = ("prlimit64", "sched_setaffinity", "sched_setscheduler", "sched_setparam")
# The second argument (a command: an int to the kernel, so its low 32 bits) that sets an owner.
_SET_OWNER = {"fcntl": (8, 15, 10),  # F_SETOWN, F_SETOWN_EX, F_SETSIG
              "ioctl": (0x8901, 0x8902)}  # FIOSETOWN, SIOCSPGRP


def program(protected_pid: int, machine: str | None = None) -> list[tuple[int, int, int, int]]:
    """The BPF instructions (code, jt, jf, k) protecting ``protected_pid`` (also its group)."""
    machine = machine or os.uname().machine
    nr = _SYSCALLS[machine]
    pid, group = protected_pid & 0xFFFFFFFF, -protected_pid & 0xFFFFFFFF
    # Instructions with symbolic jump targets, resolved to relative offsets below.
    code: list[tuple | str] = [(LD_W_ABS, None, None, ARCH),
                                 (JEQ, None, "deny", AUDIT_ARCH[machine]),
                                 (LD_W_ABS, None, None, NR)]
    if machine == "x86_64":
        code.append((JGE, "deny", None, X32_BIT))
    code += [(JEQ, "deny", None, nr[n]) for n in _DENIED]
    code += [(JEQ, "signal", None, nr[n]) for n in _SIGNALS]
    code += [(JEQ, "pid_first", None, nr[n]) for n in _PID_FIRST]
    code += [(JEQ, f"owner_{n}", None, nr[n]) for n in _SET_OWNER]
    code += [(JEQ, "priority", None, nr["setpriority"]), (RET, None, None, ALLOW),
             "signal", (LD_W_ABS, None, None, ARG[0])]
    code += [(JEQ, "deny", None, v) for v in (pid, group, 0xFFFFFFFF)]
    code += [(RET, None, None, ALLOW),
             "pid_first", (LD_W_ABS, None, None, ARG[0]), (JEQ, "deny", None, pid),
             (RET, None, None, ALLOW)]
    for n, commands in _SET_OWNER.items():
        code += [f"owner_{n}", (LD_W_ABS, None, None, ARG[1]),
                 *[(JEQ, "deny", None, c) for c in commands], (RET, None, None, ALLOW)]
    code += ["priority", (LD_W_ABS, None, None, ARG[0]), (JEQ, "deny", None, _PRIO_USER),
             (LD_W_ABS, None, None, ARG[1]), (JEQ, "deny", None, pid),
             (RET, None, None, ALLOW),
             "deny", (RET, None, None, EPERM)]
    return seccomp.assemble(code)


def supported() -> bool:
    return os.uname().machine in _SYSCALLS


def install(protected_pid: int) -> None:
    """Install the filter in this process, for good (nothing where it is not ``supported()``);
    raises ``OSError`` if the kernel refuses it."""
    if not supported():
        return
    seccomp.install(program(protected_pid))
