"""The metadata-log pipeline: the export's flat schema, and the PySpark audit,
timelines and report over exported logs (docs/pipeline.md)."""
