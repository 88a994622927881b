"""A testbed user's own clusters config, for tests that act as that user over SSH."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

from malleable.testbed import Testbed


def user_config(tb: Testbed, sites: Sequence[str], user: str, where: Path) -> Path:
    """A clusters config (in ``where``) that reaches ``sites`` over SSH as ``user``, with a
    key made here and authorized in the user's home on each site (a site has its own
    ``/home``)."""
    key = where / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"{user}-test",
                    "-f", str(key)], check=True, timeout=30)
    for site in sites:
        tb.exec(site, ["sh", "-c", f"install -d -o {user} -g {user} -m 0700 /home/{user}/.ssh"
                       f" && cat > /home/{user}/.ssh/authorized_keys"
                       f" && chown {user}:{user} /home/{user}/.ssh/authorized_keys"
                       f" && chmod 0600 /home/{user}/.ssh/authorized_keys"],
                input_text=key.with_suffix(".pub").read_text(), check=True)
    text = re.sub(r'(?m)^user = .*$', f'user = "{user}"', tb.config_toml())
    text = re.sub(r'(?m)^key = .*$', f'key = "{key}"', text)
    config = where / "clusters.toml"
    config.write_text(text)
    return config
