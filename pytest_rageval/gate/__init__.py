"""gate: aggregation and comparison: case records into metrics.json's aggregates (aggregate), the baseline
comparison and its verdict (compare), a matrix run's configs ranked and gated (configs).

Imports the foundations, evaluation, and runs (its own layer: the artifacts it reads back); no pytest.
"""
