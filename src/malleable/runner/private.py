"""Private run directories: made where no other user can own them first, checked before use.

A job's run directory holds what its processes run and read (the program, the hostfile,
the nodes file, the file channel): whoever owns that directory, or its parent, runs code
as the job's user. So a run directory is never at a predictable path of a world-writable
directory (``/tmp``), and before every use it is checked to be

* a directory, not a symbolic link,
* owned by the user, mode ``0700``,
* in a parent that is owned by the user or root and not writable by group or others.

A directory of the chain the user owns (``~/.malleable``, ``~/.malleable/run``) that is
wider than ``0700`` is narrowed (only its owner could have made it); anything else is
refused with one line on stderr (:data:`PRIVATE_SH`, run by the batch script and on every
node the job is staged to) or a :class:`NotPrivate` (:func:`check_private`, the agent).
"""

from __future__ import annotations

import os
import stat

#: Where run directories go by default: relative to the user's home on every host (the
#: batch script makes it ``$HOME/.malleable/run``; an SSH command starts in the home).
RUN_ROOT = ".malleable/run"

#: Shell functions: ``private DIR`` makes ``DIR`` (mode 0700), or accepts it when it is
#: already there and private to this user; one line on stderr and status 1 otherwise.
#: ``private_chain DIR`` does so for each directory from ``$HOME`` down to ``DIR`` (a
#: ``DIR`` outside the home: ``DIR`` alone, whose parent must then be private enough).
#: POSIX sh, GNU ``stat`` (Debian's coreutils).
PRIVATE_SH = r"""refuse() { echo "malleable: refused: $*" >&2; return 1; }
private() {
  [ -L "$1" ] && { refuse "$1 is a symbolic link"; return 1; }
  mkdir -m 700 "$1" 2>/dev/null
  [ -d "$1" ] && [ ! -L "$1" ] || { refuse "cannot make directory $1"; return 1; }
  p=$(dirname "$1"); me=$(id -u)
  set -- "$1" $(stat -c "%u %a" "$1") $(stat -c "%u %a" "$p")
  [ "$2" = "$me" ] || { refuse "$1 is owned by uid $2, not by $me"; return 1; }
  [ "$4" = "$me" ] || [ "$4" = 0 ] || { refuse "$p is owned by uid $4"; return 1; }
  [ $((0$5 & 18)) -eq 0 ] || { refuse "$p is writable by others (mode $5)"; return 1; }
  [ "$3" = 700 ] || chmod 700 "$1" || return 1
}
private_chain() {
  r=${1#"${HOME:-/-}"/}
  if [ -n "${HOME:-}" ] && [ "$r" != "$1" ]; then
    c=$HOME
    while [ -n "$r" ]; do
      x=${r%%/*}; [ "$x" = "$r" ] && r= || r=${r#*/}
      c=$c/$x; private "$c" || return 1
    done
  else
    private "$1"
  fi
}
"""


class NotPrivate(Exception):
    """A run directory that another user could control (the message says why)."""


def check_private(path: str, uid: int | None = None) -> None:
    """Raise :class:`NotPrivate` unless ``path`` is a private directory of ``uid`` (this
    process's user by default): see the module docstring."""
    uid = os.getuid() if uid is None else uid
    try:
        own = os.lstat(path)
        parent = os.lstat(os.path.dirname(os.path.abspath(path)))
    except OSError as exc:
        raise NotPrivate(f"{path}: {exc.strerror}") from None
    if stat.S_ISLNK(own.st_mode):
        raise NotPrivate(f"{path} is a symbolic link")
    if not stat.S_ISDIR(own.st_mode):
        raise NotPrivate(f"{path} is not a directory")
    if own.st_uid != uid:
        raise NotPrivate(f"{path} is owned by uid {own.st_uid}, not by {uid}")
    if stat.S_IMODE(own.st_mode) != 0o700:
        raise NotPrivate(f"{path} has mode {stat.S_IMODE(own.st_mode):04o}, not 0700")
    if parent.st_uid not in (uid, 0):
        raise NotPrivate(f"the parent of {path} is owned by uid {parent.st_uid}")
    if parent.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise NotPrivate(f"the parent of {path} is writable by others "
                         f"(mode {stat.S_IMODE(parent.st_mode):04o})")


def make_private(path: str) -> str:
    """Make ``path`` and its missing parents below an existing private-enough ancestor
    (each 0700, exclusive create), or accept an existing private one; the path.
    :class:`NotPrivate` when a step is not private (see the module docstring)."""
    path = os.path.abspath(path)
    parent = os.path.dirname(path)
    if not os.path.lexists(parent):
        make_private(parent)
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        raise NotPrivate(f"cannot make {path}: {exc.strerror}") from None
    info = os.lstat(path)
    if (stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid()
            and stat.S_IMODE(info.st_mode) != 0o700):
        os.chmod(path, 0o700)
    check_private(path)
    return path


#: ``sh -c WRITE_PRIVATE sh PATH``: write stdin to ``PATH`` atomically (temporary name,
#: then rename), its directory made or checked private first (:data:`PRIVATE_SH`).
WRITE_PRIVATE = (PRIVATE_SH + 'private_chain "$(dirname "$1")" && (umask 077 && '
                 'cat > "$1.tmp.$$") && mv "$1.tmp.$$" "$1"')
