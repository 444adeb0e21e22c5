"""Hypothesis profiles: ``ci`` (default: fixed seeds, few examples, fast) and ``fuzz``
(many examples, random seeds). Choose with ``HYPOTHESIS_PROFILE=fuzz``; ``FUZZ_EXAMPLES``
sets how many examples each property runs under ``fuzz``."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

_SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]

settings.register_profile(
    "ci", derandomize=True, max_examples=30, deadline=None, suppress_health_check=_SLOW_OK
)
settings.register_profile(
    "fuzz",
    max_examples=int(os.environ.get("FUZZ_EXAMPLES", "10000")),
    deadline=None,
    suppress_health_check=_SLOW_OK,
    print_blob=True,
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
