"""PyTorch memory timelines (``export_memory_timeline`` raw events): see ``collector``."""
