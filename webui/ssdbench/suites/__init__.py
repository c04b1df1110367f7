"""Suites: the locked suite files, loading, validating and hashing them, and the Storage Bench traces they play."""
