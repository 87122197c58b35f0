"""Stage 2: what a capture costs on a machine (the reference compiler's ranking model, docs/reference.md §3).

``placer.cost.model`` costs phases and whole programs, ``placer.cost.state`` re-costs one phase incrementally while
a relay rewrite changes it, ``placer.cost.sharing`` finds the phase rows that share one table. The formula itself
(table bytes, controls, per-tile cycles) is written once, as methods of the machine's constants
(:class:`placer.machine.CostConstants`, :class:`placer.machine.Exchange`).
"""
