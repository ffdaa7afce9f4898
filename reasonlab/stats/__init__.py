"""Statistics for findings: intervals over seeds, bootstraps, verdicts."""
