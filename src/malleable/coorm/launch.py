"""``python -m malleable.coorm.launch --connect HOST:PORT ...``: one CooRM launcher process."""

from __future__ import annotations

from malleable.coorm.command import main

if __name__ == "__main__":
    raise SystemExit(main())
