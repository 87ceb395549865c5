"""Schedulers: which kernels a group of expressions can become, and the IterDomain
transforms that make it one."""
