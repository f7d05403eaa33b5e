"""trainsweep: which instance type and batch size train your model fastest and cheapest."""

__version__ = "0.1.0"
