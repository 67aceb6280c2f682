"""runs: run storage: the run folder and its lock (folder), the output folder of runs, its ``latest`` and history
(store), what a run folder holds (artifacts), artifacts read
back checked (readback), what a resume must share with its run (resume), the run's source commit (commit) and the ``user`` section
the ``pytest_rageval_run_fields`` hook adds (user_fields).

Imports the foundations and evaluation; no pytest.
"""
