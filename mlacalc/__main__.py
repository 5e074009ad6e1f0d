"""``python -m mlacalc``: the same command line as the ``mlacalc`` script."""

import sys

from mlacalc.cli import main

if __name__ == "__main__":
    sys.exit(main())
