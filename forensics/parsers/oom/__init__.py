"""Out-of-memory messages of the frameworks other than PyTorch (PyTorch's own are parsers/torch/oom.py)."""
