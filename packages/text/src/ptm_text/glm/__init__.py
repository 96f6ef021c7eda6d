"""GLM (Du et al., 2022): autoregressive blank infilling on ptm's shared encoder."""
