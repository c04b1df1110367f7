"""The lab: one results server for many appliances, on PostgreSQL (docs/lab.md)."""
