"""advisor: a rule-based performance advisor for deep-learning training."""

__version__ = "0.1.0"
