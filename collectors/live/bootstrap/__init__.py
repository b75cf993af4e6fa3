"""Files injected into processes profiled by ``advisor run``.

This folder is put first on the child's ``PYTHONPATH``; its
``sitecustomize.py`` loads ``_advisor_live`` there. Importing this package
from advisor itself has no side effects (the parent only uses the pure
helpers in ``_advisor_live``).
"""
