"""Placer's chunk model of an exchange phase (``--rules model``, docs/ordering.md "Placer's chunk model"): each
stream's wave held as one block with a flat latency. Its B1024 greedy (``greedy``), lower bounds (``bounds``), the
CP-SAT orders (``cpsat``, ``justify``, driven by ``search``) and the table rows a chunk schedule encodes (``rows``).
It is faster than the reference's rules (``placer.refschedule``) and is where CP-SAT improves an order; the
ordering stage (``placer.ordering``) times that order by the reference's rules before comparing it."""
