"""The reference compiler's B1024 scheduler, ported rule for rule (``--rules reference``, docs/ordering.md "The
reference's rules"), and placer's search for better orders under the same rules.

``reference`` is the port: the order, the timing of one transfer at a time (``materialize``, compiled in
``_materialize``), the bounds and the row encoding; ``hostbound`` is a lower bound per relay host. The order search
(``improve.OrderSearch``) builds candidate lists (``hosts``, ``slots``, ``calendar``, ``nondelay``) and times each
by those rules."""
