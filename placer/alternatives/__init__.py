"""Stage 3: replica groups, their segmentations, and the relay rewrites that can replace their multicasts."""
