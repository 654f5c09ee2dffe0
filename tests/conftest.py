"""Test-suite settings.

Hypothesis is derandomised so every run (and CI) draws the same examples: a
failure is reproducible, and no run passes by luck of the draw.
"""
from hypothesis import HealthCheck, settings

settings.register_profile(
    "capacity",
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
settings.load_profile("capacity")
