"""``python -m gateway`` runs the command line."""

from __future__ import annotations

from gateway.cli.main import main

if __name__ == "__main__":
    main()
