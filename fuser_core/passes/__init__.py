"""Pre-segmentation passes: named rewrites of a concretized fusion, run in a fixed,
documented order before it is cut into kernels."""

from fuser_core.passes.manager import PRESEGMENTATION_PASSES, PassRecord, run_presegmentation_passes

__all__ = ["PRESEGMENTATION_PASSES", "PassRecord", "run_presegmentation_passes"]
