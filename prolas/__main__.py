"""``python -m prolas ...``: the ``prolas`` command (for environments without the script)."""

from prolas.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
