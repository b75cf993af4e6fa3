"""Benchmarks and the scenario generator (not part of the installed package).

``bench.scenarios`` (a package) is the generator: labelled synthetic
cluster profiles in the real Ascend and Kineto layouts, and the Ascend
writer the tests use for small hand-described ranks. The modules beside it
are the benchmarks, each run as ``python -m bench.NAME``: ``accuracy``
scores the advisor's calls on generated scenarios; ``speed`` times it beside
msprof-analyze and HolisticTraceAnalysis; ``kineto_load`` and
``memory_vs_size`` measure large traces and memory against input size;
``run_overhead`` measures what ``advisor run`` costs a training job.
Generated data goes to /tmp, never into the repository.
"""
