"""The study domain: studies, taxonomy, participants, agents, tasks, episodes, payments, audit — and the small
shared pieces every app builds on (file checks, roles, invitations). Imports no other app of the project."""
