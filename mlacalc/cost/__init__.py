"""Exact counts: formulas, generated evaluators, the cost engine, parameters, quantized
checkpoints, linear layers, sweeps and the kernels of a model step."""
