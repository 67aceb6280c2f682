"""report: human-readable reports of a run: the terminal summary, the standalone report.html, the CI summary
and the pytest-html glue.

May import everything below it (foundations, evaluation, targets, judges, gate, runs); never plugin/ or cli/.
"""
