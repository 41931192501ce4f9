"""Task, context, message and artifact ids (``new_id``): time-ordered UUIDs whose random part comes from the
operating system's CSPRNG, read a block at a time per thread (issue 31), each byte used once, never shared
with a forked child."""

from __future__ import annotations

import os
import threading
import uuid

from skillwire.protocol.models import RANDOM_BLOCK, new_id


def test_ids_are_version_7_uuids_in_time_order_and_never_repeat() -> None:
    ids = [new_id() for _ in range(3 * RANDOM_BLOCK)]  # several blocks of random bytes
    assert len(set(ids)) == len(ids)
    assert all(uuid.UUID(i).version == 7 and uuid.UUID(i).variant == uuid.RFC_4122 for i in ids[:500])
    stamps = [uuid.UUID(i).int >> 80 for i in ids]
    assert stamps == sorted(stamps)


def test_threads_draw_their_own_random_bytes() -> None:
    made: list[list[str]] = [[] for _ in range(4)]

    def make(into: list[str]) -> None:
        into.extend(new_id() for _ in range(1000))

    threads = [threading.Thread(target=make, args=(into,)) for into in made]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    every = [i for ids in made for i in ids]
    assert len(set(every)) == len(every) == 4000


def test_a_forked_child_does_not_reuse_its_parents_random_bytes() -> None:
    new_id()  # the parent now holds unused random bytes
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child process
        os.write(write, new_id().encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        childs = pipe.read()
    os.waitpid(child, 0)
    parents = new_id()
    # both took the next id after the fork: with one shared pool, their random parts would be equal
    assert childs.split("-")[-1] != parents.split("-")[-1]
