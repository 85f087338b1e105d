"""``python -m consumers.paper_venue``: the venue without the rest of the product."""

import sys

from consumers.paper_venue.cli import main

sys.exit(main())
