#!/bin/bash
# Build a minimal Debian base image locally, for machines without an image registry.
#
#   testbed/base-image.sh [--print-sources] [IMAGE_TAG] [SUITE]
#
# The package mirror is taken from the host's own apt configuration at run time
# (/etc/apt/sources.list and /etc/apt/sources.list.d/*.{list,sources}): only entries of
# SUITE (default bookworm, and its -updates/-security suites) are kept. When the host has
# no entry for SUITE (trixie or sid on a bookworm host), the entries of the host's own
# suite (HOST_SUITE, default: VERSION_CODENAME of /etc/os-release) are used with the suite
# substituted (the main suite only), and apt does not check the Release files' Valid-Until
# (a mirror's copy of another suite may be stale). Needs mmdebstrap and a running Docker
# engine; bookworm takes about 20 s and makes a ~160 MB image, trixie and sid a few minutes.
set -euo pipefail

APT_ETC=${MALLEABLE_APT_ETC:-/etc/apt}

# Print the host's deb822 apt stanzas for one suite.
host_deb822() {
  local suite=$1 f
  for f in "$APT_ETC"/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk -v suite="$suite" 'BEGIN { RS = ""; ORS = "\n\n" }
      {
        keep = 0
        n = split($0, lines, "\n")
        for (i = 1; i <= n; i++) {
          if (lines[i] ~ /^[Ss]uites:/) {
            m = split(lines[i], words, /[ \t]+/)
            for (j = 2; j <= m; j++) if (words[j] ~ ("^" suite "(-[a-z]+)?$")) keep = 1
          }
          if (lines[i] ~ /^[Ee]nabled:[ \t]*[Nn]o/) { keep = 0; break }
        }
        if (keep) print
      }' "$f"
  done
}

# Print the host's one-line apt entries for one suite.
host_oneline() {
  local suite=$1 f
  for f in "$APT_ETC"/sources.list "$APT_ETC"/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    awk -v suite="$suite" '$1 == "deb" {
        for (i = 2; i <= NF; i++) if ($i ~ ("^" suite "(-[a-z]+)?(/updates)?$")) { print; next }
      }' "$f"
  done
}

# The host's deb822 stanzas of its own suite, rewritten to SUITE (main suite only).
substituted_deb822() {
  local host=$1 suite=$2
  host_deb822 "$host" | awk -v host="$host" -v suite="$suite" 'BEGIN { RS = ""; ORS = "\n\n" }
    {
      keep = 0; out = ""
      n = split($0, lines, "\n")
      for (i = 1; i <= n; i++) {
        if (lines[i] ~ /^[Ss]uites:/) {
          m = split(lines[i], words, /[ \t]+/)
          for (j = 2; j <= m; j++) if (words[j] == host) keep = 1
          lines[i] = "Suites: " suite
        }
        out = out lines[i] "\n"
      }
      if (keep) printf "%s\n", out
    }'
}

# The host's one-line entries of its own suite, rewritten to SUITE (main suite only).
substituted_oneline() {
  local host=$1 suite=$2
  host_oneline "$host" | awk -v host="$host" -v suite="$suite" '{
      for (i = 2; i <= NF; i++) if ($i == host) { $i = suite; print; next }
    }'
}

host_suite() {
  if [ -n "${HOST_SUITE:-}" ]; then echo "$HOST_SUITE"; return; fi
  (. "${MALLEABLE_OS_RELEASE:-/etc/os-release}" && echo "${VERSION_CODENAME:-bookworm}")
}

main() {
  local print_only=0
  if [ "${1:-}" = "--print-sources" ]; then print_only=1; shift; fi
  local tag=${1:-malleable-base:bookworm} suite=${2:-bookworm}
  local deb822 oneline
  deb822=$(host_deb822 "$suite")
  oneline=$(host_oneline "$suite")
  local host aptopts=()
  host=$(host_suite)
  if [ -z "$deb822$oneline" ] && [ "$suite" != "$host" ]; then
    deb822=$(substituted_deb822 "$host" "$suite")
    oneline=$(substituted_oneline "$host" "$suite")
  fi
  if [ "$suite" != "$host" ]; then
    aptopts+=(--aptopt='Acquire::Check-Valid-Until "false"')
  fi
  if [ -z "$deb822$oneline" ]; then
    echo "base-image: no apt source for '$suite' in $APT_ETC; add one or pass BASE_IMAGE" >&2
    exit 1
  fi
  if [ "$print_only" = 1 ]; then
    [ -z "$deb822" ] || printf '%s\n' "$deb822"
    [ -z "$oneline" ] || printf '%s\n' "$oneline"
    exit 0
  fi
  command -v mmdebstrap >/dev/null || { echo "base-image: mmdebstrap is missing (apt-get install mmdebstrap)" >&2; exit 1; }
  dir=$(mktemp -d)
  trap 'rm -rf "$dir"' EXIT
  local mirrors=()
  if [ -n "$deb822" ]; then printf '%s\n' "$deb822" > "$dir/host.sources"; mirrors+=("$dir/host.sources"); fi
  if [ -n "$oneline" ]; then printf '%s\n' "$oneline" > "$dir/host.list"; mirrors+=("$dir/host.list"); fi
  mmdebstrap --variant=minbase --quiet "${aptopts[@]}" "$suite" "$dir/rootfs.tar" "${mirrors[@]}"
  docker import --change 'CMD ["/bin/bash"]' "$dir/rootfs.tar" "$tag" >/dev/null
  rm -f "$dir/rootfs.tar"
  echo "$tag"
}

main "$@"
