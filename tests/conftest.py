"""Settings for the whole test suite."""

from __future__ import annotations

from hypothesis import settings

# No per-example deadline: on a loaded two-core CI machine a slow example is not a
# failure (speed is measured by bench/, never asserted in tests). A failing example is
# printed with the blob that reproduces it.
settings.register_profile("allot", deadline=None, print_blob=True)
settings.load_profile("allot")
