"""``python -m softrt``: the same as the ``softrt`` command."""

from .cli import main

main()
