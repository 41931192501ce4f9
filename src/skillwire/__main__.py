import sys

from skillwire._command import main

sys.exit(main())
