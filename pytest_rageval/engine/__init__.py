"""engine: a ``--rageval`` run's work, with no pytest: evaluating one case, the run's set-up (settings to target
client, judges and endpoint limits), the limits shared across processes, taking records in, the spot check, the
judge canary, known failures, the gate at the end of a run and what is written then.

``plugin/`` (the pytest surface) drives it, and ``cli/`` reuses it (rescore, rejudge, label, calibrate) without
loading pytest. It may import every lower layer (evaluation, targets, judges, gate, runs, report); never plugin/ or
cli/.
"""
