"""ControllerClient: the master's in-sync set changes go to the active controller first.

The controller lives in one of the name servers (whichever holds its lease); the others answer
FAILED_PRECONDITION / NOT_CONTROLLER. Each name server is asked in turn, starting with the one
that answered last, so a controller failover costs one extra call. A refusal (STALE_EPOCH,
NOT_MASTER, INVALID_IN_SYNC_SET) means this replica must keep its old set.
"""

from __future__ import annotations

from tidemq.common import errors
from tidemq.common.logs import get_logger
from tidemq.common.rpc import RpcClient
from tidemq.v1 import nameserver_pb2, nameserver_pb2_grpc

log = get_logger(__name__)


class ControllerClient:
    def __init__(self, name_servers: list[str], *, timeout_s: float = 3.0) -> None:
        self._clients = [RpcClient(addr, nameserver_pb2_grpc.NameServerServiceStub,
                                   timeout=timeout_s, retries=0) for addr in name_servers]
        self._preferred = 0

    def alter_in_sync(self, broker_name: str, epoch: int, master: int,
                      in_sync: frozenset[int] | set[int],
                      incarnations: dict[int, str] | None = None) -> bool:
        """True once the controller recorded `in_sync` (each member counted under the
        incarnation its handshake gave); False if refused or unreachable."""
        request = nameserver_pb2.AlterInSyncSetRequest(
            broker_name=broker_name, epoch=epoch, master=master, in_sync=sorted(in_sync),
            incarnations=incarnations or {})
        for step in range(len(self._clients)):
            index = (self._preferred + step) % len(self._clients)
            client = self._clients[index]
            try:
                client.call("AlterInSyncSet", request, idempotent=True)
            except errors.PreconditionFailed as exc:
                if exc.code == "NOT_CONTROLLER":
                    continue
                log.warning("in-sync change refused", group=broker_name, epoch=epoch,
                            in_sync=sorted(in_sync), error=str(exc))
                return False
            except errors.InvalidArgument as exc:
                log.warning("in-sync change refused", group=broker_name, error=str(exc))
                return False
            except (errors.ServiceUnavailable, errors.DeadlineExceeded):
                continue
            self._preferred = index
            return True
        log.warning("no active controller answered; in-sync set unchanged", group=broker_name)
        return False
