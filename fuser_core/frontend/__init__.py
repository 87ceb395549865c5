"""nvFuser's Python frontend: FusionDefinition, its handles and ops, and FusionCache."""
