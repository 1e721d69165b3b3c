"""Test-wide settings.

Hypothesis has no deadline (the first evaluation under a new set of house rules builds its
table), and in CI it is derandomised, so a red build is always reproducible.
"""

import os

from hypothesis import settings

settings.register_profile("dev", deadline=None)
settings.register_profile("ci", deadline=None, derandomize=True, print_blob=True)
settings.load_profile("ci" if os.environ.get("CI") else "dev")
