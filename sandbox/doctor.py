"""``python -m sandbox doctor``: what the sandbox needs, what is missing, and how to fix it."""

from __future__ import annotations

import os
import shutil

import docker

from sandbox.image import IMAGE_ENV, configured_image, default_tag, image_exists
from sandbox.worker import LABEL, LIMITS_LABEL, OWNER_LABEL, owner_alive


def diagnose() -> list[tuple[bool, str]]:
    """(ok, message) for each check, in order; later checks are skipped after a fatal one."""
    checks: list[tuple[bool, str]] = []
    host = os.environ.get("DOCKER_HOST")
    where = f"DOCKER_HOST={host}" if host else "the default socket (/var/run/docker.sock)"
    try:
        client = docker.from_env(timeout=10)
        client.ping()
    except Exception as exc:  # noqa: BLE001 - the SDK raises many kinds here
        text = str(exc)
        if "Permission denied" in text:
            fix = ("your user may not use the engine: add it to the 'docker' group "
                   "(sudo usermod -aG docker $USER, then log in again) or run as root")
        elif host:
            fix = f"nothing answers at {host}: start that engine or unset DOCKER_HOST"
        elif shutil.which("dockerd") is None:
            fix = "no Docker engine is installed: sudo apt-get install docker.io"
        else:
            fix = "the engine is not running: sudo bash scripts/ensure-docker.sh"
        checks.append((False, f"Docker engine at {where}: unreachable ({text}); {fix}"))
        return checks
    version = client.version().get("Version", "?")
    checks.append((True, f"Docker engine {version} at {where}"))
    tag = configured_image()
    if image_exists(client, tag):
        checks.append((True, f"sandbox image {tag} is present"))
    elif tag != default_tag():
        checks.append((False, f"image {tag} (from {IMAGE_ENV}) is missing: "
                              f"docker build -t {tag} sandbox/"))
    else:
        how = "python -m sandbox image build"
        if shutil.which("debootstrap") is None:
            how = (f"apt-get install debootstrap, then {how} (or, with a registry: "
                   f"docker build -t mytag sandbox/ and set {IMAGE_ENV}=mytag)")
        elif os.geteuid() != 0:
            how = f"sudo {how}"
        checks.append((False, f"sandbox image {tag} is missing (built on first use); "
                              f"build it now with: {how}"))
    checks.extend(pool_report(client))
    return checks


def pool_report(client: docker.DockerClient) -> list[tuple[bool, str]]:
    """The warm pools on this engine: per owning process and set of container limits, how many
    containers run; containers whose process is gone are a problem to fix."""
    pools: dict[tuple[str, str], list[str]] = {}
    for c in client.api.containers(all=True, filters={"label": LABEL}):
        labels = c.get("Labels") or {}
        key = (labels.get(OWNER_LABEL, "?"), labels.get(LIMITS_LABEL, "limits unknown"))
        pools.setdefault(key, []).append(c.get("State", "?"))
    if not pools:
        return [(True, "sandbox pools on this engine: none (they start with the first Sandbox)")]
    lines = []
    for (owner, limits), states in sorted(pools.items()):
        alive = owner_alive(owner)
        host, _, rest = owner.partition(":")
        who = f"process {rest.split(':')[0]} on {host}"
        counts = ", ".join(f"{states.count(s)} {s}" for s in sorted(set(states)))
        if alive is False:
            lines.append((False, f"pool of {who} (exited), {limits}: {counts} containers left "
                                 "behind; the next Sandbox() removes them, or now: docker rm -f "
                                 f"$(docker ps -aq --filter label={LABEL})"))
        else:
            state = "running" if alive else "on another machine"
            lines.append((True, f"pool of {who} ({state}), {limits}: {counts} containers"))
    return lines
