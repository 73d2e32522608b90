"""The CI regression gate: a candidate run against a baseline, paired by case (docs/ci.md).

It reads what emobench.publish writes (runs and published bundles) and never the reverse.
"""
