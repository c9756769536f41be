"""The agent's clean-up after a job: every place a job can write is emptied, iteratively and
within a budget, on a thread of its own with a fixed stack.

What it cannot clean (files it cannot remove, more entries than ``WIPE_ENTRIES``, more time than
``CLEAN_UP_S``, a failure of its own) is reported as why the container is no longer trusted;
the job then fails as ``dirty_container`` and the container is replaced.
"""

from __future__ import annotations

import os
import stat
import threading
import time

from sandbox.inside import channel, layout

WIPE_ENTRIES = 20_000  # more than both tmpfs mounts' inodes and the queues: never met honestly
CLEAN_UP_S = 3.0  # well within the host's grace for a reply (worker.REPLY_GRACE_S)
#: Why a clean-up was not trusted, by what ``wipe`` returned.
_UNTRUSTED = {1: "the job left files the agent could not remove",
              2: f"the job left more than {WIPE_ENTRIES} entries (or more than the agent can "
                 f"remove in {CLEAN_UP_S:g} s)"}
CLEAN_UP_STACK = 16 << 20  # the clean-up thread's own stack, whatever the agent's is
retiring = False  # a clean-up was abandoned: the agent exits once it has replied


class OverBudget(Exception):
    """The clean-up met more than it may handle: the container is not trusted any more."""


class Budget:
    """What one clean-up may spend: ``entries`` directory entries and ``seconds`` in all."""

    def __init__(self, entries: int, seconds: float):
        self.left = entries
        self.end = time.monotonic() + seconds

    def take(self) -> None:
        self.left -= 1
        if self.left < 0 or (self.left % 256 == 0 and time.monotonic() > self.end):
            raise OverBudget()


# A directory is opened only as a directory (a fifo or a device is never opened, a link never
# followed), and its descriptor is not inherited by anything.
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


def empty(root: str, budget: Budget) -> bool:
    """Remove everything under ``root``; False when something stayed. Raises ``OverBudget``.

    Depth-first without recursion, through directory descriptors: any depth and any path length
    (names are never joined into paths), one descriptor open at a time (the way back up is
    "..", checked to be the directory we came from), links unlinked and never followed, and a
    directory made ours (0o700) before it is read. Nothing of the job runs any more, so the tree
    holds still while it is walked.
    """
    fd = os.open(root, _DIR_FLAGS)
    device = os.fstat(fd).st_dev
    clean = True
    # per level above ``fd``: (name of the one below, its (dev, ino), dirs left)
    above: list[tuple[str, tuple[int, int], list[str]]] = []
    subdirs: list[str] | None = None  # None: ``fd`` not read yet
    try:
        while True:
            if subdirs is None:  # a directory just entered: its files go, its dirs wait
                names = []
                with os.scandir(fd) as entries:
                    for entry in entries:
                        budget.take()
                        names.append((entry.name, entry.is_dir(follow_symlinks=False)))
                subdirs = []
                for name, is_dir in names:
                    if is_dir:
                        subdirs.append(name)
                        continue
                    try:
                        os.unlink(name, dir_fd=fd)
                    except OSError:
                        clean = False
            if subdirs:
                name = subdirs.pop()
                try:
                    os.chmod(name, 0o700, dir_fd=fd)  # a directory (d_type), nothing moves
                    child = os.open(name, _DIR_FLAGS, dir_fd=fd)
                except OSError:
                    clean = False
                    continue
                if os.fstat(child).st_dev != device:  # jobs cannot mount: never seen
                    os.close(child)
                    clean = False
                    continue
                here = os.fstat(fd)
                above.append((name, (here.st_dev, here.st_ino), subdirs))
                os.close(fd)
                fd, subdirs = child, None
                continue
            if not above:
                return clean
            name, parent, subdirs = above.pop()
            up = os.open("..", _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = up
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) != parent:
                return False
            try:
                os.rmdir(name, dir_fd=fd)
            except OSError:
                clean = False
    finally:
        os.close(fd)


def reset_root(root: str, mode: int) -> bool:
    """Give a wiped root back its mode and no extended attributes or chosen times (a job owns
    ``/scratch`` itself, and could leave a note there for the next job); False when it cannot."""
    try:
        st = os.lstat(root)
        if not stat.S_ISDIR(st.st_mode):
            return False
        if stat.S_IMODE(st.st_mode) != mode:
            os.chmod(root, mode)
        for name in os.listxattr(root, follow_symlinks=False):
            os.removexattr(root, name, follow_symlinks=False)
        if st.st_uid == os.getuid():
            os.utime(root)
        return True
    except OSError:
        return False


def wipe(roots: list[tuple[str, int]], budget: Budget) -> int:
    """Empty every (root, mode) of ``roots`` and the message queues; 0 when all is clean, 1 when
    something stayed, 2 when the budget ran out."""
    clean = True
    try:
        for root, mode in roots:
            # A root the job made unreadable is given back its mode before it is read.
            clean = reset_root(root, mode) and clean
            try:
                clean = empty(root, budget) and clean
            except OSError:
                clean = False
            clean = reset_root(root, mode) and clean
        clean = clear_mqueues(budget) and clean
    except OverBudget:
        return 2
    return 0 if clean else 1


def after_job(roots: list[tuple[str, int]]) -> str | None:
    """Empty the writable places on a thread of its own, with a fixed stack of its own, and
    wait for it at most until a deadline. Returns None when all is clean, else why not. A
    clean-up still running at the deadline is abandoned: the container is no longer trusted,
    and the agent exits after its reply (``retiring``), which ends the thread too.
    """
    global retiring
    done = []

    def work():
        try:
            done.append(wipe(roots, Budget(WIPE_ENTRIES, CLEAN_UP_S)))
        except BaseException as exc:  # noqa: BLE001 - reported, whatever it is
            done.append(exc)

    previous = threading.stack_size(CLEAN_UP_STACK)
    try:
        thread = threading.Thread(target=work, name="clean-up", daemon=True)
        thread.start()
    except RuntimeError as exc:  # no thread to be had: nothing was cleaned
        return f"cannot start the clean-up: {channel.short(exc)}"
    finally:
        threading.stack_size(previous)
    thread.join(CLEAN_UP_S + 1.0)
    if not done:
        retiring = True
        return f"the clean-up did not finish in {CLEAN_UP_S + 1.0:g} s"
    code = done[0]
    if isinstance(code, BaseException):
        return f"the clean-up failed: {channel.short(code)}"
    return _UNTRUSTED.get(code) if code else None


def clear_mqueues(budget: Budget) -> bool:
    """Unlink every POSIX message queue (they outlive their creator); False when one stayed."""
    try:
        names = os.listdir(layout.MQUEUE)
    except FileNotFoundError:
        return True  # not mounted: jobs cannot create queues (see ``agent.main``)
    except OSError:
        return False
    ok = True
    for name in names:
        budget.take()
        try:
            os.unlink(os.path.join(layout.MQUEUE, name))
        except OSError:
            ok = False
    return ok

