"""Plumbing under the domain: settings, Redis keys, times, JSONL, logs, allocator, sized
LRU, the network guard, batching, failure wording and the MongoDB collections' indexes."""
