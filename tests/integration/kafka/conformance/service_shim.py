"""`test/service.py` for kafka-python 3.0.12's integration suite: the sdist ships the suite
without it. The suite only ever talks to an external broker here (KAFKA_URI), which needs
ExternalService; SpawnedService (starting Kafka or ZooKeeper from a Kafka distribution) is
refused with a sentence."""


class ExternalService:
    def __init__(self, host, port):
        self.host, self.port = host, port

    def start(self):
        pass

    def stop(self):
        pass

    def wait_for(self, pattern, timeout=30):
        return True

    def dump_logs(self):
        pass


class SpawnedService:
    def __init__(self, *args, **kwargs):
        raise RuntimeError("this run has no Kafka distribution to spawn: the suite runs against "
                           "TideMQ's gateway-kafka through KAFKA_URI")
