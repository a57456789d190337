"""Spark with Odradek: format("odradek"), a Python data source with the contract of Spark's format("kafka") (source,
sink, options, the leader fetcher that decodes into Arrow, the broker lookups in kafka_io), the session helpers,
the shipped pipelines and their event generators, and the workers' Python default that the installed
odradek-spark.pth loads (worker_python). Nothing here imports pyspark until a Spark feature is used."""
