"""The staff console: dashboard, REST API, exports, payouts, the domain admin and the demo loader."""
