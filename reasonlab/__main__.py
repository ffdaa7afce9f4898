"""`python -m reasonlab` is the `reasonlab` command."""
import sys

from .cli import main

sys.exit(main())
