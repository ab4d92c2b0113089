"""Evaluators: run a suite's tasks through the compared routes and report.

``run_suite(suite_path, routes, config_path)`` returns the run as a dict (its ``summary``
has ``routes``: per route ``exact``, ``output_tokens``, ``cost_usd``, ``latency_p50_s``,
``mode`` for edit suites); ``report.write_run`` writes the JSON and HTML; ``compare`` diffs
two runs. Suites: ``edit`` (``router.evals.edit``), ``tab`` (``router.evals.tab``),
``retrieval`` (``router.evals.retrieval``).
"""

from router.evals.runner import run_suite

__all__ = ["run_suite"]
