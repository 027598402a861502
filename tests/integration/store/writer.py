"""Crash-test writer: appends random batches with SYNC_FLUSH and logs every acknowledgement.

Run as `python writer.py DATA_DIR ACK_LOG SEED [APPENDERS [MAX_BATCH [threads|asyncio]]]`
(defaults 4 appender threads, batches of 1-6 records); it appends until killed. With `asyncio`
the appenders are tasks on one event loop awaiting append_batch_async. Each acknowledged
batch becomes one line in ACK_LOG, written only after the append returned PUT_OK:
    queue_id first_queue_offset phys:size:crc,phys:size:crc,...
where crc is crc32 of the producer's bytes with the broker-stamped fields zeroed.
"""

from __future__ import annotations

import asyncio
import os
import random
import sys
import threading
import zlib
from pathlib import Path

from tidemq.broker.store import AppendStatus, FlushMode, MessageStore, StoreConfig
from tidemq.common import record

TOPIC = "crash"
QUEUES = 4
STAMPED = ((8, 16), (20, 36), (56, 72))  # crc+queue_id, queue/physical offset, store ts+host


def producer_view(raw: bytes) -> bytes:
    view = bytearray(raw)
    for start, end in STAMPED:
        view[start:end] = bytes(end - start)
    return bytes(view)


def store_config(data_dir: Path) -> StoreConfig:
    return StoreConfig(
        data_dir=data_dir, segment_size=256 * 1024, flush_mode=FlushMode.SYNC,
        consume_queue_units_per_file=200, index_slots=256, index_entries=2000,
        checkpoint_interval_ms=50, max_message_size=16 * 1024,
    )


def main() -> None:
    data_dir, ack_path, seed = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    threads_count = int(sys.argv[4]) if len(sys.argv) > 4 else 4
    max_batch = int(sys.argv[5]) if len(sys.argv) > 5 else 6
    on_loop = len(sys.argv) > 6 and sys.argv[6] == "asyncio"
    store = MessageStore(store_config(data_dir), record.pack_host("127.0.0.1", 10911))
    store.start()
    ack_fd = os.open(ack_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    ack_lock = threading.Lock()
    print("ready", flush=True)

    def next_batch(rng: random.Random) -> tuple[int, list[bytes]]:
        raws = []
        for _ in range(rng.randint(1, max_batch)):
            body = rng.randbytes(rng.randint(1, 3000))
            message = record.OutgoingMessage(TOPIC, body, tags=rng.choice(["a", "b"]),
                                             keys=[f"k{rng.randrange(50)}"])
            raws.append(record.encode_message(message)[0])
        return rng.randrange(QUEUES), raws

    def acknowledge(queue_id: int, raws: list[bytes], result) -> None:
        if result.status is not AppendStatus.PUT_OK:
            return
        units = ",".join(
            f"{phys}:{len(raw)}:{zlib.crc32(producer_view(raw))}"
            for phys, raw in zip(result.physical_offsets, raws, strict=True)
        )
        with ack_lock:
            os.write(ack_fd, f"{queue_id} {result.first_queue_offset} {units}\n".encode())

    def produce(worker: int) -> None:
        rng = random.Random(seed * 1000 + worker)
        while True:
            queue_id, raws = next_batch(rng)
            acknowledge(queue_id, raws,
                        store.append_batch(TOPIC, queue_id, b"".join(raws), len(raws)))

    async def produce_on_loop(worker: int) -> None:
        rng = random.Random(seed * 1000 + worker)
        while True:
            queue_id, raws = next_batch(rng)
            acknowledge(queue_id, raws, await store.append_batch_async(
                TOPIC, queue_id, b"".join(raws), len(raws)))

    if on_loop:
        async def all_tasks() -> None:
            await asyncio.gather(*(produce_on_loop(n) for n in range(threads_count)))
        asyncio.run(all_tasks())
        return
    threads = [threading.Thread(target=produce, args=(n,), daemon=True)
               for n in range(threads_count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


if __name__ == "__main__":
    main()
