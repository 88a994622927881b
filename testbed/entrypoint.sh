#!/bin/bash
# Entrypoint of every testbed container.
#
#   testbed-entrypoint accounting            MariaDB + slurmdbd (one per testbed)
#   testbed-entrypoint controller SITE       slurmctld (+ sshd: the site's login node)
#   testbed-entrypoint compute SITE NODE...  one `slurmd -N NODE` per emulated node (+ sshd)
#
# Secrets (munge key, SSH keys, database password) and generated configuration are
# mounted read-only at /testbed by `malleable testbed up`; nothing secret is in the image.
set -euo pipefail

SECRETS=/testbed/secrets
ETC=/testbed/etc

log() { echo "testbed-entrypoint: $*" >&2; }

start_munge() {
  install -o munge -g munge -m 0400 "$SECRETS/munge.key" /etc/munge/munge.key
  install -d -o munge -g munge -m 0755 /run/munge
  runuser -u munge -- /usr/sbin/munged
}

start_sshd() {
  install -m 0600 "$SECRETS/ssh_host_ed25519_key" /etc/ssh/ssh_host_ed25519_key
  install -m 0644 "$SECRETS/ssh_host_ed25519_key.pub" /etc/ssh/ssh_host_ed25519_key.pub
  ln -sf "$SECRETS/known_hosts" /etc/ssh/ssh_known_hosts
  local ssh=/home/malleable/.ssh
  install -d -o malleable -g malleable -m 0700 "$ssh"
  install -o malleable -g malleable -m 0600 "$SECRETS/id_ed25519" "$ssh/id_ed25519"
  install -o malleable -g malleable -m 0644 "$SECRETS/id_ed25519.pub" "$ssh/id_ed25519.pub"
  install -o malleable -g malleable -m 0600 "$SECRETS/id_ed25519.pub" "$ssh/authorized_keys"
  install -d -m 0755 /run/sshd
  /usr/sbin/sshd
}

link_slurm_conf() {
  ln -sf "$ETC/$1/slurm.conf" /etc/slurm/slurm.conf
}

start_accounting() {
  install -d -o mysql -g mysql /run/mysqld
  runuser -u mysql -- /usr/sbin/mariadbd --skip-networking=0 --bind-address=127.0.0.1 \
    --log-error=/var/log/mysql-error.log &
  local i
  for i in $(seq 1 120); do
    mariadb-admin --silent ping >/dev/null 2>&1 && break
    sleep 0.5
  done
  mariadb-admin --silent ping
  local pass
  pass=$(cat "$SECRETS/dbpass")
  mariadb <<SQL
CREATE DATABASE IF NOT EXISTS slurm_acct_db;
CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '$pass';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';
FLUSH PRIVILEGES;
SQL
  install -o slurm -g slurm -m 0600 "$ETC/accounting/slurmdbd.conf" /etc/slurm/slurmdbd.conf
  /usr/sbin/slurmdbd
}

start_controller() {
  link_slurm_conf "$1"
  start_sshd
  /usr/sbin/slurmctld -i
}

start_compute() {
  local site=$1 node
  shift
  link_slurm_conf "$site"
  start_sshd
  for node in "$@"; do
    install -d -m 0755 "/var/spool/slurmd/$node"
    /usr/sbin/slurmd -N "$node"
  done
}

main() {
  local role=${1:?usage: testbed-entrypoint accounting|controller SITE|compute SITE NODE...}
  shift
  echo "$role $*" > /run/testbed-role
  start_munge
  case "$role" in
    accounting) start_accounting ;;
    controller) start_controller "$@" ;;
    compute) start_compute "$@" ;;
    *) log "unknown role $role"; exit 2 ;;
  esac
  log "$role started"
  trap 'exit 0' TERM INT
  sleep infinity &
  wait $!
}

main "$@"
