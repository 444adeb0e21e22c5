"""Offline demo tools: a safe calculator and a small encyclopedia (:mod:`.tools`)."""
