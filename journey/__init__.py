"""The participant-facing site: sign-in pages and the worker journey (join, consent, profile, tasks, uploads)."""
