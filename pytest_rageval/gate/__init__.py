"""gate: aggregation and comparison: case records into metrics.json's aggregates (aggregate), what a gate
compares (gated_values), a baseline read (baseline_file), whether two runs may be compared (invariants), the paired
statistics (statistics), the comparison and its verdict (compare) as terminal lines (comparison_text), a matrix
run's configs ranked and gated (configs), known failures (known), trends across edits (lineage).

Imports the foundations, evaluation, and runs (its own layer: the artifacts it reads back); no pytest.
"""
