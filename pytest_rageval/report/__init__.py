"""Human-readable reports of a run: the standalone report.html and friends."""
