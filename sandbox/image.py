"""The sandbox image: a minimal Debian with Python 3, built offline-capable with debootstrap.

No registry is needed: debootstrap fetches Debian packages from the mirror apt already uses (or
``GRPO_SANDBOX_DEBIAN_MIRROR``), and ``docker import`` turns the root filesystem into an image.
The tag is a hash of the recipe below, so a rebuild happens only when the recipe changes. The
agent is not baked in (it is injected when a container starts), so editing it never forces one.
``sandbox/Dockerfile`` is the equivalent for users with a registry (``GRPO_SANDBOX_IMAGE``).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import docker

REPOSITORY = "grpo-sandbox"
RECIPE: dict[str, Any] = {
    "suite": "bookworm",
    "variant": "minbase",
    # The full stdlib (hashlib, ctypes, sqlite3, ...): graded programs expect it.
    "include": ["python3"],
    # Paths emptied after install: package caches and docs are dead weight in a sandbox.
    "prune": ["var/cache/apt", "var/lib/apt/lists", "usr/share/doc", "usr/share/man",
              "usr/share/info", "usr/share/locale"],
    "strip_setuid": True,
    "mkdir": ["scratch"],
    "changes": ["USER 65534:65534", "WORKDIR /scratch", "ENV LANG=C.UTF-8"],
    "revision": 1,
}
MIRROR_ENV = "GRPO_SANDBOX_DEBIAN_MIRROR"
IMAGE_ENV = "GRPO_SANDBOX_IMAGE"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
Progress = Callable[[str], None]


class ImageError(RuntimeError):
    pass


def recipe_hash() -> str:
    return hashlib.sha256(json.dumps(RECIPE, sort_keys=True).encode()).hexdigest()[:12]


def default_tag() -> str:
    return f"{REPOSITORY}:{recipe_hash()}"


def configured_image() -> str:
    """The image runs use: ``GRPO_SANDBOX_IMAGE`` if set, else the recipe's tag."""
    return os.environ.get(IMAGE_ENV) or default_tag()


def image_exists(client: docker.DockerClient, tag: str) -> bool:
    try:
        client.images.get(tag)
    except docker.errors.ImageNotFound:
        return False
    return True


def debian_mirror(suite: str = RECIPE["suite"]) -> str:
    """The Debian mirror apt is configured with (deb822 or one-line sources), or the override."""
    if os.environ.get(MIRROR_ENV):
        return os.environ[MIRROR_ENV]
    files = [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]
    for path in files:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if path.suffix == ".sources":
            for stanza in re.split(r"\n\s*\n", text):
                fields = dict(re.findall(r"^(\w[\w-]*):\s*(.*)$", stanza, flags=re.M))
                if suite in fields.get("Suites", "").split() and "main" in fields.get(
                    "Components", ""
                ).split():
                    return fields.get("URIs", "").split()[0]
        elif path.name == "sources.list" or path.suffix == ".list":
            for line in text.splitlines():
                m = re.match(r"^\s*deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+(\S+)\s+(.*)$", line)
                if m and m.group(2) == suite and "main" in m.group(3).split():
                    return m.group(1)
    return DEFAULT_MIRROR


def _print_progress(msg: str) -> None:
    print(f"[sandbox image] {msg}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def _build_lock(tag: str) -> Iterator[None]:
    """Serialise builds of one tag across processes (pytest workers, the CLI)."""
    path = Path(tempfile.gettempdir()) / f"grpo-sandbox-build-{tag.replace(':', '-')}.lock"
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def ensure_image(
    client: docker.DockerClient, tag: str | None = None, progress: Progress | None = None
) -> str:
    """Return ``tag`` (default: the recipe's), building it first when it is missing."""
    tag = tag or configured_image()
    if image_exists(client, tag):
        return tag
    if tag != default_tag():
        raise ImageError(
            f"image '{tag}' (from {IMAGE_ENV}) is not on the engine; build it with "
            f"`docker build -t {tag} sandbox/` or unset {IMAGE_ENV}"
        )
    with _build_lock(tag):
        if not image_exists(client, tag):
            build_image(client, tag, progress or _print_progress)
    return tag


def _mounts_under(root: Path) -> list[str]:
    prefix = str(root.resolve()) + "/"
    try:
        lines = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return []
    return sorted((m.split()[1] for m in lines if m.split()[1].startswith(prefix)), reverse=True)


def _prepare_rootfs(root: Path) -> None:
    for rel in RECIPE["prune"]:
        target = root / rel
        if target.is_dir():
            for child in target.iterdir():
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child, ignore_errors=True)
                else:
                    child.unlink(missing_ok=True)
    if RECIPE["strip_setuid"]:
        # Defence in depth next to no-new-privileges: no setuid/setgid program at all.
        for dirpath, _, filenames in os.walk(root):
            for name in filenames:
                p = os.path.join(dirpath, name)
                st = os.lstat(p)
                if st.st_mode & 0o6000 and not os.path.islink(p):
                    os.chmod(p, st.st_mode & ~0o6000 & 0o7777)
    for rel in RECIPE["mkdir"]:
        (root / rel).mkdir(mode=0o755, exist_ok=True)


def build_image(client: docker.DockerClient, tag: str, progress: Progress = _print_progress) -> None:
    """debootstrap a root filesystem, prune it and ``docker import`` it as ``tag``."""
    if shutil.which("debootstrap") is None:
        raise ImageError("debootstrap is not installed (apt-get install debootstrap), or build "
                         f"sandbox/Dockerfile and set {IMAGE_ENV}")
    if os.geteuid() != 0:
        raise ImageError("building the sandbox image with debootstrap needs root; run "
                         "`sudo python -m sandbox image build` once")
    mirror = debian_mirror()
    progress(f"building {tag}: debootstrap {RECIPE['suite']} from {mirror} (about a minute)")
    work = Path(tempfile.mkdtemp(prefix="grpo-sandbox-rootfs-", dir="/var/tmp"))
    root = work / "root"
    try:
        cmd = ["debootstrap", f"--variant={RECIPE['variant']}",
               f"--include={','.join(RECIPE['include'])}", RECIPE["suite"], str(root), mirror]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert proc.stdout is not None
        tail: list[str] = []
        done = 0
        for line in proc.stdout:
            line = line.rstrip()
            tail = (tail + [line])[-20:]
            if line.startswith("I: "):
                done += 1
                if done % 25 == 0 or not line.startswith(("I: Retrieving", "I: Validating",
                                                           "I: Extracting", "I: Unpacking",
                                                           "I: Configuring")):
                    progress(f"[{done:4d}] {line[3:]}")
        if proc.wait() != 0:
            raise ImageError("debootstrap failed:\n" + "\n".join(tail))
        progress("pruning the root filesystem")
        _prepare_rootfs(root)
        tarball = work / "rootfs.tar"
        progress("packing and importing into the engine")
        subprocess.run(["tar", "--numeric-owner", "-C", str(root), "-cf", str(tarball), "."],
                       check=True)
        repo, _, version = tag.partition(":")
        client.api.import_image_from_file(
            str(tarball), repository=repo, tag=version or "latest",
            changes=RECIPE["changes"] + [f"LABEL grpo-sandbox.recipe={recipe_hash()}"],
        )
        if not image_exists(client, tag):
            raise ImageError(f"docker import did not produce {tag}")
        progress(f"built {tag}")
    finally:
        for mount in _mounts_under(root):
            subprocess.run(["umount", "-l", mount], check=False)
        if not _mounts_under(root):
            shutil.rmtree(work, ignore_errors=True)
