"""``python -m solver_server serve|bake ...`` (same as the clearance-server command)."""
import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
