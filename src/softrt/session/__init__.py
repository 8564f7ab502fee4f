"""Sessions: arm → run → stop, in ``finally`` (session layer)."""
