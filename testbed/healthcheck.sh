#!/bin/bash
# Health of a testbed container, by role (see testbed-entrypoint): exit 0 when healthy.
set -euo pipefail
read -r role site nodes < /run/testbed-role
pgrep -x munged >/dev/null
case "$role" in
  accounting)
    mariadb-admin --silent ping >/dev/null
    pgrep -x slurmdbd >/dev/null
    nc -z 127.0.0.1 6819 ;;
  controller)
    pgrep -x sshd >/dev/null
    scontrol ping | grep -q 'is UP' ;;
  compute)
    pgrep -x sshd >/dev/null
    for node in $nodes; do
      pid=$(cat "/run/slurmd-$node.pid" 2>/dev/null) || { echo "no pid file for $node"; exit 1; }
      kill -0 "$pid" 2>/dev/null || { echo "slurmd $node is not running"; exit 1; }
    done ;;
  oar-server)
    pgrep -x sshd >/dev/null
    pg_isready -q
    pgrep -f Almighty >/dev/null
    oarnodes -s >/dev/null ;;
  oar-node)
    pgrep -x sshd >/dev/null
    nc -z 127.0.0.1 6667 ;;
  *) exit 1 ;;
esac
