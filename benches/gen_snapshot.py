#!/usr/bin/env python3
"""Writes a node-load snapshot (docs/snapshot-format.md) for load tests.

Usage: gen_snapshot.py NODES OUT [SEED] [--room]

A realistic mix: CPU busy 0.05..0.95 (most nodes moderately busy, a tail of hot ones),
network traffic against 10 or 25 Gbit/s NICs, memory, 16/32/64-core nodes, three zones,
a Flink pool and a general pool, some GPU nodes with a NoSchedule taint, some spot nodes with
a PreferNoSchedule taint, and a few cordoned nodes. No `taken_at`: the file stays fresh.

--room: every node has 100,000 cores (capacity and allocatable), so no burst fills the
cluster: each pod the ledger charges moves a node's utilisation by about 2e-5, and every review
of a load test stays a full decision naming a first tier (the steady-state rows of load.sh).
"""

import json
import random
import sys


ROOM_CORES = 100_000


def node(i: int, rng: random.Random, room: bool) -> dict:
    name = f"worker-{i:05d}"
    cpu = min(0.95, max(0.05, rng.betavariate(2.2, 3.0)))
    capacity = rng.choice([1.25e9, 1.25e9, 3.125e9])
    network = capacity * min(0.97, rng.betavariate(1.6, 4.0))
    n = {
        "name": name,
        "cpu": round(cpu, 4),
        "network_bytes_per_second": round(network),
        "network_capacity_bytes_per_second": capacity,
        "memory": round(min(0.97, max(0.05, rng.betavariate(3.0, 3.0))), 4),
        "cpu_capacity_cores": rng.choice([16, 32, 32, 64]),
        "labels": {
            "kubernetes.io/hostname": name,
            "node-pool": "flink" if rng.random() < 0.85 else "general",
            "topology.kubernetes.io/zone": f"zone-{'abc'[i % 3]}",
        },
    }
    if room:
        n["cpu_capacity_cores"] = ROOM_CORES
        n["allocatable"] = {"cpu": str(ROOM_CORES), "memory": "100000Gi", "pods": "1000000"}
    r = rng.random()
    if r < 0.04:
        n["taints"] = [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
    elif r < 0.07:
        n["taints"] = [{"key": "spot", "effect": "PreferNoSchedule"}]
    if rng.random() < 0.02:
        n["unschedulable"] = True
    return n


def main() -> int:
    room = "--room" in sys.argv[1:]
    args = [a for a in sys.argv[1:] if a != "--room"]
    if len(args) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    count = int(args[0])
    seed = int(args[2]) if len(args) == 3 else 42
    rng = random.Random(seed)
    snapshot = {"nodes": [node(i, rng, room) for i in range(count)]}
    with open(args[1], "w", encoding="utf-8") as out:
        json.dump(snapshot, out, separators=(",", ":"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
