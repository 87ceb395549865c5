"""Samples whose definitions size only by their inputs: the workbench tests run them at
a fraction of their bundled size (the others hard-code sizes in broadcast_in_dim)."""

SHRINKABLE = frozenset(
    {
        "dynamic_reshape",
        "issue785_gelu_bias_bwd",
        "issue785_reduction_pow",
        "resize_pad_to_broadcast_dynamic",
        "rope_issue2795",
        "transpose_add",
        "var_mean",
    }
)
