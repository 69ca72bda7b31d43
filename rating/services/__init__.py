"""Writes of the rating app: the ledger (ledger.py), snapshots (refresh.py), released-session imports
(sessions_import.py), and the fits that run on demand (analysis.py). Import the module you need."""
