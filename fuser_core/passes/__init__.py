"""Pre-segmentation passes: named rewrites of a concretized fusion, run in a fixed,
documented order before it is cut into kernels."""
