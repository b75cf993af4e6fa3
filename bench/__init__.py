"""Benchmarks and the scenario generator (not part of the installed package).

``bench.scenarios`` writes labelled synthetic cluster profiles;
``bench.accuracy`` scores the advisor's calls on them; ``bench.speed``
times the advisor beside msprof-analyze and HolisticTraceAnalysis.
Generated data goes to /tmp, never into the repository.
"""
