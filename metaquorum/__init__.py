"""The ``metaquorum`` console script: the one place that wires the others."""

__version__ = "0.1.0"  # the one place: pyproject.toml reads it (dynamic version)
