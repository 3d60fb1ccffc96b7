#!/usr/bin/env python3
"""Writes a busy cluster's node-load snapshot (docs/snapshot-format.md) for `simulate`.

Usage: gen_busy_cluster.py NODES SEED OUT [--cool-first] [--heat-bands=N]

Three zones of 16-, 32- and 64-core nodes. Real CPU: a tenth of the nodes 0.85-0.98 busy, 35 %
0.55-0.85, 40 % 0.30-0.55, the rest 0.05-0.30; requests 25-65 % of allocatable; 3 % of the
NICs near saturation; one cool node in 25 cordoned or tainted. Seeded: the same arguments
write the same file.

--cool-first: the load follows the names, coolest first, as when the cool nodes joined the
cluster together. With `simulate --listed-in-name-order` the scheduler then holds the cool
nodes side by side, which a webhook that takes each node to be anywhere cannot know.

--heat-bands=N: each node labelled `heat-band` with its CPU's band of N (0 coolest), for a pod
template's own preferred terms on it (docs/design.md, "Limits").
"""

import json
import random
import sys


def busy(rng: random.Random) -> float:
    draw = rng.random()
    if draw < 0.10:
        return rng.uniform(0.85, 0.98)
    if draw < 0.45:
        return rng.uniform(0.55, 0.85)
    if draw < 0.85:
        return rng.uniform(0.30, 0.55)
    return rng.uniform(0.05, 0.30)


def main(argv: list[str]) -> int:
    args = [a for a in argv[1:] if not a.startswith("--")]
    flags = [a for a in argv[1:] if a.startswith("--")]
    bands = [a.removeprefix("--heat-bands=") for a in flags if a.startswith("--heat-bands=")]
    known = all(a == "--cool-first" or a.startswith("--heat-bands=") for a in flags)
    if len(args) != 3 or not known or not all(b.isdigit() and int(b) > 0 for b in bands):
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    count, seed, out = int(args[0]), int(args[1]), args[2]
    rng = random.Random(seed)
    cpus = [busy(rng) for _ in range(count)]
    if "--cool-first" in argv:
        cpus.sort()
    nodes = []
    for i, cpu in enumerate(cpus):
        name = f"node-{i:05d}"
        cores = rng.choice([16, 32, 64])
        capacity = 1.25e9
        saturated = rng.random() < 0.03
        network = capacity * (rng.uniform(0.93, 0.99) if saturated else rng.uniform(0.05, 0.5))
        requested = rng.uniform(0.25, 0.65)
        node = {
            "name": name,
            "cpu": round(cpu, 4),
            "network_bytes_per_second": round(network),
            "network_capacity_bytes_per_second": capacity,
            "memory": 0.4,
            "cpu_capacity_cores": cores,
            "labels": {
                "kubernetes.io/hostname": name,
                "topology.kubernetes.io/zone": f"zone-{'abc'[i % 3]}",
            },
            "allocatable": {"cpu": str(cores), "memory": f"{cores * 4}Gi", "pods": "110"},
            "requested": {
                "cpu": f"{int(cores * requested * 1000)}m",
                "memory": f"{int(cores * 4 * requested)}Gi",
                "pods": "5",
            },
        }
        if cpu < 0.3 and rng.random() < 0.04:
            if rng.random() < 0.5:
                node["unschedulable"] = True
            else:
                node["taints"] = [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]
        if bands:
            count_of_bands = int(bands[-1])
            band = int(round(cpu, 4) * count_of_bands)
            node["labels"]["heat-band"] = str(min(count_of_bands - 1, band))
        nodes.append(node)
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"nodes": nodes}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
