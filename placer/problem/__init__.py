"""Stage 2: what a capture costs on a machine (the reference compiler's ranking model, BRIEF §3)."""
