"""Stage 0: workload descriptions (models/*.toml) lowered to synthetic captures."""
