#!/usr/bin/env bash
# Bring a machine from nothing to a testbed that can come up: install the Debian packages
# (docker.io, docker-compose, mmdebstrap) when missing, start dockerd in the background when
# no engine answers, and build the base and testbed images (reused when up to date).
# Idempotent: a second run only checks. Cold: about 2-3 minutes for the default Slurm
# version, about 4 more each for 24.11 and 26.05 (measured cold at load 6: 233 s for
# 24.11, base included; 6-9 minutes each at load 20+); warm: a few seconds.
#
#   bash .ci/testbed-setup.sh           # both steps
#   bash .ci/testbed-setup.sh engine    # only the packages and dockerd
#   bash .ci/testbed-setup.sh images    # only the images (needs the engine)
#
# .ci/run runs `engine`, then `images` in the background while lint, types and the compiled
# build run, and waits for it (and fails on its exit status) before the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive

step=${1:-all}
case "$step" in
  all|engine|images) ;;
  *) echo "testbed-setup: unknown step '$step' (valid: all, engine, images)" >&2; exit 2 ;;
esac

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
DOCKERD_LOG=${DOCKERD_LOG:-/var/log/malleable-dockerd.log}

engine() {
  missing=()
  command -v dockerd >/dev/null || missing+=(docker.io)
  command -v docker-compose >/dev/null || docker compose version >/dev/null 2>&1 || missing+=(docker-compose)
  command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
  if [ "${#missing[@]}" -gt 0 ]; then
    echo "testbed-setup: installing ${missing[*]}"
    $SUDO apt-get update -q
    $SUDO apt-get install -y -q "${missing[@]}"
  fi

  if ! docker info >/dev/null 2>&1; then
    echo "testbed-setup: starting dockerd (log: $DOCKERD_LOG)"
    # appended, not overwritten: a daemon that died leaves its last lines for whoever restarts it
    $SUDO sh -c "nohup dockerd >>'$DOCKERD_LOG' 2>&1 &"
    for _ in $(seq 1 120); do
      docker info >/dev/null 2>&1 && break
      sleep 0.5
      pgrep -x dockerd >/dev/null || break   # it died: do not wait for nothing
    done
    if ! docker info >/dev/null 2>&1; then
      echo "testbed-setup: dockerd did not start (or answer within 60 s); last log lines:" >&2
      tail -n 30 "$DOCKERD_LOG" >&2 || true
      exit 1
    fi
  fi
}

images() {
  echo "testbed-setup: images (base and testbed; reused when up to date)"
  # The default Slurm (22.05) and the other versions the integration tests' matrix runs
  # (resize and contract tests on 24.11 and 26.05); MALLEABLE_SLURM_VERSIONS narrows it.
  # Cold, each extra version costs a base (mmdebstrap, ~1.5-2.5 min) and an image (~6-7 min
  # under load); warm, a few seconds each.
  versions=${MALLEABLE_SLURM_VERSIONS:-22.05,24.11,26.05}
  for version in ${versions//,/ }; do
    start=$(date +%s)
    PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" python3 -m malleable testbed build --slurm "$version"
    echo "testbed-setup: Slurm $version images ready in $(( $(date +%s) - start )) s"
  done
}

if [ "$step" != images ]; then engine; fi
if [ "$step" != engine ]; then images; fi
