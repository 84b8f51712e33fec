"""``python -m memlab.reliability``: see ``memlab.reliability.suite``."""

import sys

from memlab.reliability.suite import main

sys.exit(main())
