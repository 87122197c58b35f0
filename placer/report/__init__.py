"""Stage 8: what a person reads (tables) and what a script reads (JSON)."""
