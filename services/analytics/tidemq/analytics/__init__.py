"""TideMQ analytics: the `tidemq` Spark data source (batch and streaming) and Spark jobs.

Entry points: `tidemq.analytics.session.build_session` (a session with the source
registered), `tidemq.analytics.source.TideMQDataSource`, `python -m
tidemq.analytics.tag_counts`. See docs/analytics.md.
"""
