"""The ``metaquorum`` console script: the one place that wires the others."""
