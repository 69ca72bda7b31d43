"""API views, one module per group of resources."""
