#!/bin/bash
# Entrypoint of every testbed container.
#
#   testbed-entrypoint accounting            MariaDB + slurmdbd (one per testbed)
#   testbed-entrypoint controller SITE       slurmctld (+ sshd: the site's login node)
#   testbed-entrypoint compute SITE NODE...  one `slurmd -N NODE` per emulated node (+ sshd)
#   testbed-entrypoint oar-server SITE NODE... PostgreSQL + OAR server (Almighty) + sshd (login)
#   testbed-entrypoint oar-node SITE         OAR's sshd on port 6667 (+ sshd); the emulated
#                                            nodes are network aliases of the container
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

# Users with a home on the shared /home volume (the service account and the ordinary users).
HOME_USERS="malleable alice bob carol"

# /home is one volume for all containers of a site: every container makes sure each home
# exists with the right owner (idempotent, safe when several containers start at once).
setup_homes() {
  local user
  for user in $HOME_USERS; do
    install -d -o "$user" -g "$user" -m 0750 "/home/$user"
  done
}

# Write a file atomically (a temporary name, then rename): several containers of a site may
# install the same key into the shared home at the same moment.
install_atomic() {
  local mode=$1 src=$2 dest=$3 tmp
  tmp="$dest.tmp.$(hostname).$$"
  install -o malleable -g malleable -m "$mode" "$src" "$tmp"
  mv -f "$tmp" "$dest"
}

install_user_keys() {
  local ssh=/home/malleable/.ssh
  install -d -o malleable -g malleable -m 0700 "$ssh"
  install_atomic 0600 "$SECRETS/id_ed25519" "$ssh/id_ed25519"
  install_atomic 0644 "$SECRETS/id_ed25519.pub" "$ssh/id_ed25519.pub"
  install_atomic 0600 "$SECRETS/id_ed25519.pub" "$ssh/authorized_keys"
}

start_sshd() {
  install -m 0600 "$SECRETS/ssh_host_ed25519_key" /etc/ssh/ssh_host_ed25519_key
  install -m 0644 "$SECRETS/ssh_host_ed25519_key.pub" /etc/ssh/ssh_host_ed25519_key.pub
  ln -sf "$SECRETS/known_hosts" /etc/ssh/ssh_known_hosts
  # An OAR site's nodes leave the user's keys to its server; a Slurm site's containers all
  # install them (atomically) into the shared /home.
  setup_homes
  [ "${1:-}" = oar-node ] || install_user_keys
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
  install_jwt_key
  /usr/sbin/slurmdbd
}

# The JWT key of slurmctld and slurmdbd (AuthAltParameters in slurm.conf and slurmdbd.conf):
# generated per testbed at bring-up into the secrets (like the munge key), installed here
# owned by slurm, mode 0400; never in the image or the repository.
JWT_KEY=/etc/slurm/jwt_hs256.key
install_jwt_key() {
  [ -f "$SECRETS/jwt_hs256.key" ] || { log "no JWT key in the secrets: slurmrestd's tokens will be refused"; return 0; }
  install -o slurm -g slurm -m 0400 "$SECRETS/jwt_hs256.key" "$JWT_KEY"
}

# slurmrestd on port 6820 (published on the host like sshd), as the unprivileged user
# slurmrestd: it refuses root and SlurmUser. SLURM_JWT=daemon makes it accept the JWT of each
# request (without it every token is refused: "Rejecting thread config token"); the
# unshare security features need privileges a container does not have.
REST_PORT=6820
start_slurmrestd() {
  SLURM_JWT=daemon SLURMRESTD_SECURITY=disable_unshare_sysv,disable_unshare_files \
    runuser -u slurmrestd -- /usr/sbin/slurmrestd -a rest_auth/jwt "0.0.0.0:$REST_PORT" \
    >>/var/log/slurmrestd.log 2>&1 &
}

start_controller() {
  link_slurm_conf "$1"
  start_sshd
  install_jwt_key
  /usr/sbin/slurmctld -i
  start_slurmrestd || log "slurmrestd did not start (see /var/log/slurmrestd.log)"
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

# ---------------------------------------------------------------- OAR sites

# The oar user's key (generated per testbed, like the munge key); its ssh checks host keys
# against the testbed's known_hosts (the package's default config does not).
install_oar_keys() {
  local ssh=/var/lib/oar/.ssh
  install -d -o oar -g oar -m 0700 "$ssh"
  install -o oar -g oar -m 0600 "$SECRETS/oar_id_ed25519" "$ssh/id_ed25519"
  { printf 'environment="OAR_KEY=1" '; cat "$SECRETS/oar_id_ed25519.pub"; } > "$ssh/authorized_keys"
  printf 'Host *\n  ForwardX11 no\n  StrictHostKeyChecking yes\n  UserKnownHostsFile %s\n  PasswordAuthentication no\n  AddressFamily inet\n' \
    /etc/ssh/ssh_known_hosts > "$ssh/config"
  chown oar:oar "$ssh/authorized_keys" "$ssh/config"
  chmod 0600 "$ssh/authorized_keys" "$ssh/config"
  apply_oar_settings "$ETC/$1/oar-settings"
}

# The testbed's settings over the packaged oar.conf: `KEY="VALUE"` replaces KEY, `-KEY`
# removes it (CPUSET_PATH: the cpuset job-resource manager needs cgroup v1).
apply_oar_settings() {
  local conf=/etc/oar/oar.conf line key
  while IFS= read -r line; do
    [ -n "$line" ] || continue
    key=${line%%=*}
    key=${key#-}
    sed -i "/^${key}=/d" "$conf"
    case "$line" in -*) ;; *) printf '%s\n' "$line" >> "$conf" ;; esac
  done < "$1"
}

# OAR reaches a node by ssh to its network_address on port 6667. Started directly: the
# oar-node init script's `nice -n -20` is refused in an unprivileged container.
start_oar_sshd() {
  sed -e 's|^HostKey .*|HostKey /etc/ssh/ssh_host_ed25519_key|' \
      -e 's|^UsePrivilegeSeparation.*||' -e 's|^KeepAlive.*||' /etc/oar/sshd_config \
      > /etc/oar/sshd_config.testbed
  /usr/sbin/sshd -f /etc/oar/sshd_config.testbed
}

start_postgresql() {
  local conf=/etc/postgresql/15/main
  pg_createcluster 15 main >/dev/null
  echo "listen_addresses = '*'" >> "$conf/postgresql.conf"
  echo "host all all 0.0.0.0/0 scram-sha-256" >> "$conf/pg_hba.conf"
  pg_ctlcluster 15 main start
}

start_oar_server() {
  local site=$1 node
  shift
  install_oar_keys "$site"
  start_sshd
  start_postgresql
  oar-database --create --db-is-local -y >/var/log/oar-database.log 2>&1
  for node in "$@"; do
    oarnodesetting -a -h "$node" >/dev/null
  done
  /etc/init.d/oar-server start
}

start_oar_node() {
  install_oar_keys "$1"
  start_sshd oar-node
  start_oar_sshd
}

# On `docker stop` (SIGTERM, then SIGKILL after the compose file's stop_grace_period, 5 s),
# stop the Slurm daemons as their init scripts would: slurmctld saves its state when it is
# terminated. Without this they were killed with the container, and slurmctld came back
# with its state of up to a minute before (a job's hand-over lost, the job recovered as
# pending and then killed as a "duplicate jobid" on its own nodes).
stop_daemons() {
  local name i
  for name in slurmrestd slurmctld slurmd slurmdbd; do pkill -TERM -x "$name" || true; done
  for i in $(seq 1 40); do
    pgrep -x slurmctld >/dev/null || pgrep -x slurmd >/dev/null \
      || pgrep -x slurmdbd >/dev/null || return 0
    sleep 0.1
  done
  log "daemons still running after 4 s; the container's stop kills them"
}

main() {
  local role=${1:?usage: testbed-entrypoint accounting|controller SITE|compute SITE NODE...|oar-server SITE NODE...|oar-node SITE}
  shift
  echo "$role $*" > /run/testbed-role
  start_munge  # every role: Slurm authenticates with it, OAR jobs' agents (docs/oar.md)
  case "$role" in
    accounting) start_accounting ;;
    controller) start_controller "$@" ;;
    compute) start_compute "$@" ;;
    oar-server) start_oar_server "$@" ;;
    oar-node) start_oar_node "$@" ;;
    *) log "unknown role $role"; exit 2 ;;
  esac
  log "$role started"
  trap 'stop_daemons; exit 0' TERM INT
  sleep infinity &
  wait $!
}

main "$@"
