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
# .ci/run runs `engine`, then `images` in the background (MALLEABLE_IMAGES_STATUS) while
# lint, types, the compiled build and the tests run; a test whose image is not built yet
# waits for it (MALLEABLE_IMAGES_WAIT). .ci/run fails on this step's exit status at the end.
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
  # MALLEABLE_IMAGES_STATUS=DIR (.ci/run: a private mktemp -d): the tests that run while
  # this builds (MALLEABLE_IMAGES_WAIT=DIR) wait for their version's image instead of
  # building it too. DIR gets `plan` (the versions, in order) first, then per version its
  # log (V.log) and exit status (V.status, written whole by a rename), and `done` at the end.
  # A failed version does not stop the next ones; the exit status is then 1.
  status_dir=${MALLEABLE_IMAGES_STATUS:-}
  if [ -n "$status_dir" ]; then
    printf '%s\n' ${versions//,/ } >"$status_dir/plan.tmp"
    mv "$status_dir/plan.tmp" "$status_dir/plan"
    trap 'touch "$status_dir/done"' EXIT
  fi
  failed=0
  for version in ${versions//,/ }; do
    start=$(date +%s)
    log=${status_dir:+$status_dir/$version.log}
    rc=0
    # (never waits for itself: the wait is for the tests' processes)
    MALLEABLE_IMAGES_WAIT= PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" \
      python3 -m malleable testbed build --slurm "$version" 2>&1 | tee ${log:+"$log"} || rc=$?
    if [ -n "$status_dir" ]; then
      echo "$rc" >"$status_dir/$version.status.tmp"
      mv "$status_dir/$version.status.tmp" "$status_dir/$version.status"
    fi
    if [ "$rc" -ne 0 ]; then
      echo "testbed-setup: Slurm $version images FAILED (exit $rc) after $(( $(date +%s) - start )) s" >&2
      failed=1
      [ -n "$status_dir" ] || exit "$rc"   # alone, the first failure ends it, as before
      continue
    fi
    echo "testbed-setup: Slurm $version images ready in $(( $(date +%s) - start )) s"
  done
  return "$failed"
}

if [ "$step" != images ]; then engine; fi
if [ "$step" != engine ]; then images; fi
