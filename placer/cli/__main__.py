"""``python -m placer.cli``: the same as the ``placer`` console script."""

from placer.cli import main

main()
