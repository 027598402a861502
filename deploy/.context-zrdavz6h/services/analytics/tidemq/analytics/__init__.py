"""TideMQ analytics: the `tidemq` Spark data source (batch and streaming) and Spark jobs.

Entry points: `tidemq.analytics.session.build_session` (a session with the source
registered), `tidemq.analytics.source.TideMQDataSource`, `python -m
tidemq.analytics.tag_counts`. See docs/analytics.md.
"""

import os

# A job talks to TideMQ over gRPC and then pyspark forks to exec its JVM (with preexec_fn).
# With gRPC's fork support on (its default) such a child may crash before the exec
# (grpc/grpc#43055) and Spark reports "Java gateway process exited before sending its port
# number". Nothing here forks to go on using gRPC, so it is turned off — before any import
# of grpc, which is why it is here.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
