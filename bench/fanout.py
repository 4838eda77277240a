"""What handing each committed batch to N readers costs the core: down each
link (a frame per reader, as before decision 125) or once into the batch
ring (voter/batch_ring.py). Figures, not asserts.

The writer publishes batches at a fixed rate, as a leader's core does under
load, to N reader processes: with links, each reader reads and unpickles
its frames (the workers' FrameProtocol); with the ring, each reader looks
every FOLLOW_EVERY_S and copies what is new (RingReader). The writer's own
CPU time (user + system, from its process counters) per batch is the core's
cost; the readers' is reported beside it. Batches are real encoded
AlterPartition batches: 30 records (what a single-partition load gathers
per batch) and 200 (two 100-partition requests).

    python bench/fanout.py [--quick] [--readers 1,2,4,8,14]
"""

from __future__ import annotations

import argparse
import os
import resource
import socket
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from metadata_records.codec import encode_batch  # noqa: E402
from metadata_records.records import Batch, PartitionChangeRecord  # noqa: E402
from voter.batch_ring import FOLLOW_EVERY_S, BatchRing, RingMissed, RingReader  # noqa: E402
from voter.link import BATCHES, FrameProtocol, encode_frame  # noqa: E402


def payload(records: int) -> bytes:
    topics = [str(uuid.UUID(int=i + 1)) for i in range(20)]
    return encode_batch(
        Batch(
            5,
            1_764_000_000_000,
            tuple(
                PartitionChangeRecord(
                    partition_id=i % 100, topic_id=topics[i % 20], isr=(1, 2), leader=-2
                )
                for i in range(records)
            ),
        )
    )


def cpu_s(who: int = resource.RUSAGE_SELF) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def link_reader(sock: socket.socket) -> None:
    """A worker's end: frames in, unpickled (FrameProtocol's own parsing)."""
    protocol = FrameProtocol(lambda items: None, lambda why: None)
    while data := sock.recv(1 << 20):
        protocol.data_received(data)


def ring_reader(fd: int, stop: int, offset: int) -> None:
    reader = RingReader(fd)
    while True:
        try:
            for first, count, _ in reader.read(offset):
                offset = first + count
        except RingMissed:
            reader.pos = None
        if os.read(stop, 1) if _readable(stop) else False:
            return
        time.sleep(FOLLOW_EVERY_S)


def _readable(fd: int) -> bool:
    import select

    return bool(select.select([fd], [], [], 0)[0])


def run(mode: str, readers: int, body: bytes, count: int, batches: int, rate: float) -> dict:
    children, links, ring, stop_w, base = [], [], None, None, 0
    if mode == "none":
        readers = 0
    if mode == "ring":
        ring = BatchRing()
        # One lap first: a ring's first lap also faults its pages in, once
        # per serve process; the figures are for every lap after.
        base = (ring.size // len(body) + 2) * count
        for first in range(0, base, count):
            ring.publish(first, count, body)
        stop_r, stop_w = os.pipe()
    for _ in range(readers):
        if mode == "links":
            mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        pid = os.fork()
        if pid == 0:
            if mode == "links":
                mine.close()
                link_reader(theirs)
            else:
                ring_reader(os.dup(ring.fileno()), stop_r, base)
            os._exit(0)
        children.append(pid)
        if mode == "links":
            theirs.close()
            links.append(mine)
    frame_items = None
    start_cpu, start = cpu_s(), time.perf_counter()
    for i in range(batches):
        due = start + i / rate
        if (wait := due - time.perf_counter()) > 0:
            time.sleep(wait)
        first = base + i * count
        if mode == "links":
            frame_items = [(BATCHES, [(first, count, body)])]
            for sock in links:  # a frame each, as WorkerLink._flush sent them
                sock.sendall(encode_frame(frame_items))
        elif mode == "ring":
            ring.publish(first, count, body)
    writer_cpu = cpu_s() - start_cpu
    for sock in links:
        sock.close()
    if stop_w is not None:
        os.write(stop_w, b"x" * readers)
    before_children = cpu_s(resource.RUSAGE_CHILDREN)
    for pid in children:
        os.waitpid(pid, 0)
    readers_cpu = cpu_s(resource.RUSAGE_CHILDREN) - before_children
    return {
        "writer_us_per_batch": 1e6 * writer_cpu / batches,
        "readers_us_per_batch": 1e6 * readers_cpu / batches / max(readers, 1),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--readers", default="1,2,4,8,14")
    args = parser.parse_args(argv)
    batches = 300 if args.quick else 1500
    print(f"{os.cpu_count()} cores; {batches} batches per run at 200 batches/s")
    print(
        "core µs per batch: the writer's CPU per batch, less its pacing alone "
        "(a run that hands batches to nobody)"
    )
    print(
        f"{'records':>7} {'bytes':>7} {'readers':>7} | core µs per batch: links   ring | "
        "each reader: links   ring"
    )
    for records in (30, 200):
        body = payload(records)
        for readers in (int(n) for n in args.readers.split(",")):
            idle = run("none", 0, body, records, batches, 200.0)["writer_us_per_batch"]
            links = run("links", readers, body, records, batches, 200.0)
            ring = run("ring", readers, body, records, batches, 200.0)
            print(
                f"{records:>7} {len(body):>7} {readers:>7} | {'':>18}"
                f"{links['writer_us_per_batch'] - idle:>6.0f} "
                f"{ring['writer_us_per_batch'] - idle:>6.0f} | "
                f"{'':>12}{links['readers_us_per_batch']:>6.0f} "
                f"{ring['readers_us_per_batch']:>6.0f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
