import sys

from privaudit.cli import main

sys.exit(main())
