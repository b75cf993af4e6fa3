"""The robustness tests import their helpers (rb_damage, rb_cases, rb_util) by name."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
