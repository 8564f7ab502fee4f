"""The real-time loop and its worker process."""
