"""Iceberg topics: a topic with odradek.iceberg.mode set is written by its partitions' leaders into an Iceberg table,
exactly once, its snapshots recording the Kafka offsets they cover (docs/iceberg.md). `table` is the plain code (the
catalog, the schema and partition spec, records to Arrow rows, the offsets in a snapshot's summary), `avro`,
`json_schema`, `protobuf`, `columns` and `schema_sink` the schema modes (registry-framed values as typed columns,
the dead-letter table), `writer` the thread that commits, `beside` the task of `odradek serve` that starts and
stops it. pyiceberg and pyarrow come with the `iceberg` extra, imported only once a topic asks for it."""
