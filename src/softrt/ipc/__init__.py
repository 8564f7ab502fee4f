"""Inter-process communication between the real-time worker and the supervisor."""
