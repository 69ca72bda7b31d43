"""Assigning a worker's next episode: task matching, the pairing design and the posterior it reads."""
