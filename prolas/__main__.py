"""``python -m prolas ...``: the ``prolas`` command (for environments without the script)."""

from prolas.cli import console_main

if __name__ == "__main__":
    raise SystemExit(console_main())
