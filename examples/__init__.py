"""Example Wayline applications (``python examples/orders.py`` runs the demo)."""
