#!/usr/bin/env bash
# Makes sure a Docker engine answers: starts dockerd in the background when none is running.
set -euo pipefail
if docker info >/dev/null 2>&1; then exit 0; fi
if [ -n "${DOCKER_HOST:-}" ]; then
  echo "ensure-docker: DOCKER_HOST=$DOCKER_HOST does not answer" >&2; exit 1
fi
if ! command -v dockerd >/dev/null 2>&1; then
  echo "ensure-docker: no Docker engine installed (apt-get install docker.io)" >&2; exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "ensure-docker: no engine is running and starting one needs root" >&2; exit 1
fi
echo "ensure-docker: starting dockerd"
mkdir -p /var/log
nohup setsid dockerd >/var/log/dockerd.log 2>&1 < /dev/null &
for _ in $(seq 1 60); do
  if docker info >/dev/null 2>&1; then echo "ensure-docker: engine is up"; exit 0; fi
  sleep 1
done
echo "ensure-docker: dockerd did not come up in 60 s; see /var/log/dockerd.log" >&2
tail -n 20 /var/log/dockerd.log >&2 || true
exit 1
