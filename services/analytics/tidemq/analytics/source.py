"""The `tidemq` Spark data source (pyspark's Python Data Source API): what Spark registers.
Batch reads are `reading` (its docstring lists the read options), Structured Streaming
`streaming`, writes `sink`.

    spark.dataSource.register(TideMQDataSource)
    df = (spark.read.format("tidemq").option("namesrv", "127.0.0.1:9876")
          .option("topic", "orders").load())
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource, DataSourceReader
from tidemq.analytics.reading import ReadOptions, TideMQBatchReader
from tidemq.common.errors import InvalidArgument

FORMAT = "tidemq"


class TideMQDataSource(DataSource):
    """format("tidemq"): a topic read as rows, one per message (schema: decode.spark_schema;
    `.schema(...)` picks some of its columns, decode.projection), and written from rows named
    like the Kafka sink's columns (`sink`)."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self):
        from tidemq.analytics.decode import spark_schema

        return spark_schema()

    def reader(self, schema) -> DataSourceReader:
        from tidemq.analytics.decode import projection

        return TideMQBatchReader(ReadOptions.parse(dict(self.options)), projection(schema))

    def writer(self, schema, overwrite: bool):
        from tidemq.analytics.sink import TideMQBatchWriter

        return TideMQBatchWriter(_write_options(schema, overwrite, dict(self.options)))

    def streamWriter(self, schema, overwrite: bool):
        from tidemq.analytics.sink import TideMQStreamWriter

        return TideMQStreamWriter(_write_options(schema, overwrite, dict(self.options)))

    def streamReader(self, schema):
        from tidemq.analytics.decode import projection
        from tidemq.analytics.streaming import TideMQStreamReader

        return TideMQStreamReader(ReadOptions.parse(dict(self.options)), projection(schema))


def _write_options(schema, overwrite: bool, options: dict[str, str]):
    from tidemq.analytics.sink import WriteOptions, check_columns

    if overwrite:
        raise InvalidArgument("format 'tidemq' only appends: a topic cannot be overwritten "
                              "(use mode('append'))")
    opts = WriteOptions.parse(options)
    check_columns(schema, opts)
    return opts
