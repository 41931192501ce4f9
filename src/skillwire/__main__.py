import sys

from skillwire.cli import main

sys.exit(main())
