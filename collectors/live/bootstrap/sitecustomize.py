"""advisor run bootstrap: injected first on PYTHONPATH by ``advisor run``.

Python's ``site`` module imports the first ``sitecustomize`` on ``sys.path``
at start-up, so this file runs in every Python process of the profiled job
(launcher, ranks, spawned children) without the training script being
edited. It

1. installs the profiler hooks of ``_advisor_live`` (only when
   ``ADVISOR_TRACE_DIR`` is set; they stay dormant until torch or mindspore
   is imported), then
2. runs the ``sitecustomize`` it shadows -- the next one on ``sys.path``
   (a user's, the venv's or the distribution's) -- so that one still runs,
   and leaves it in ``sys.modules["sitecustomize"]``.

Errors never stop the interpreter: they are reported on one stderr line.
"""


def _advisor_bootstrap():
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    if os.environ.get("ADVISOR_TRACE_DIR"):
        try:
            if here not in sys.path:
                sys.path.append(here)
            import _advisor_live

            _advisor_live.install()
        except Exception as exc:  # pragma: no cover - defensive
            sys.stderr.write(f"advisor: profiling disabled in this process: {exc!r}\n")
    _chain_next_sitecustomize(here)


def _same_dir(entry, here):
    import os

    try:
        return os.path.samefile(entry or os.curdir, here)
    except OSError:
        return False


def _chain_next_sitecustomize(here):
    import importlib.machinery
    import importlib.util
    import sys

    for entry in list(sys.path):
        if not isinstance(entry, str) or _same_dir(entry, here):
            continue
        try:
            spec = importlib.machinery.PathFinder.find_spec("sitecustomize", [entry])
        except Exception:
            continue
        if spec is None or spec.loader is None:
            continue
        module = importlib.util.module_from_spec(spec)
        ours = sys.modules.get("sitecustomize")
        sys.modules["sitecustomize"] = module
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            # What site.py itself does with a failing sitecustomize.
            sys.modules["sitecustomize"] = ours
            sys.stderr.write(
                "Error in sitecustomize; set PYTHONVERBOSE for traceback:\n"
                f"{type(exc).__name__}: {exc}\n"
            )
        return


_advisor_bootstrap()
del _advisor_bootstrap
