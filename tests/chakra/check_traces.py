#!/usr/bin/env python3
"""`paratwin plan --emit chakra DIR` read with python3-protobuf, as Chakra's own Python tools read traces.

Usage: check_traces.py PARATWIN MODULE_DIR SCENARIO
  PARATWIN    the paratwin binary
  MODULE_DIR  where protoc put et_def_pb2.py (the build does, from plan/chakra/et_def.proto)
  SCENARIO    a scenario file; a small plan of it (8 ranks: tp 2, pp 2, dp 2) is emitted

Each file is decoded message by message (a varint length, then the message): the metadata, then nodes.
Checks that every dependency names an earlier node of the same file, that every send has exactly one
receive with the same source, destination, tag and size, and that the process groups named by the
collectives are those of the comm group file. Exits 77 (CTest's skip) when python3-protobuf is missing.
"""
import json
import os
import subprocess
import sys
import tempfile

SKIP = 77


def messages(data):
    """The length-delimited messages of a trace file, as bytes."""
    from google.protobuf.internal.decoder import _DecodeVarint32

    at = 0
    while at < len(data):
        size, at = _DecodeVarint32(data, at)
        if at + size > len(data):
            raise ValueError("truncated message at byte %d" % at)
        yield data[at : at + size]
        at += size


def read_trace(path, pb):
    chunks = list(messages(open(path, "rb").read()))
    meta = pb.GlobalMetadata()
    meta.ParseFromString(chunks[0])
    nodes = []
    for chunk in chunks[1:]:
        node = pb.Node()
        node.ParseFromString(chunk)
        nodes.append(node)
    return meta, nodes


def attr(node, name):
    for a in node.attr:
        if a.name == name:
            return getattr(a, a.WhichOneof("value"))
    return None


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    paratwin, module_dir, scenario = sys.argv[1:]
    try:
        import google.protobuf  # noqa: F401
    except ImportError:
        print("SKIP: python3-protobuf is not installed (Debian: apt-get install python3-protobuf)")
        return SKIP
    sys.path.insert(0, module_dir)
    import et_def_pb2 as pb

    failures = []
    with tempfile.TemporaryDirectory(prefix="paratwin_chakra_py_") as tmp:
        out = os.path.join(tmp, "traces")
        sets = ["plan.tp=2", "plan.pp=2", "plan.dp=2", "cluster.nodes=1", "training.global_batch=32"]
        command = [paratwin, "plan", scenario] + [a for s in sets for a in ("--set", s)] + ["--emit", "chakra", out]
        run = subprocess.run(command, capture_output=True, text=True)
        if run.returncode != 0:
            print(run.stdout, run.stderr)
            return 1
        groups = {k: v for k, v in json.load(open(os.path.join(out, "quickstart.comm_groups.json"))).items()}
        sends, receives = {}, {}
        ranks = 8
        for rank in range(ranks):
            meta, nodes = read_trace(os.path.join(out, "quickstart.%d.et" % rank), pb)
            if meta.version == "" or nodes[0].type != pb.METADATA_NODE:
                failures.append("rank %d: no metadata first" % rank)
            listed = {g["pg_name"]: g["ranks"] for g in json.loads(nodes[0].inputs.values[2:-2])}
            seen = set()
            for n in nodes:
                for d in list(n.data_deps) + list(n.ctrl_deps):
                    if d not in seen:
                        failures.append("rank %d node %d: dependency %d unresolved" % (rank, n.id, d))
                seen.add(n.id)
                if n.type in (pb.COMM_SEND_NODE, pb.COMM_RECV_NODE):
                    key = (attr(n, "comm_src"), attr(n, "comm_dst"), attr(n, "comm_tag"))
                    table = sends if n.type == pb.COMM_SEND_NODE else receives
                    if key in table:
                        failures.append("rank %d: transfer %s twice" % (rank, key))
                    table[key] = attr(n, "comm_size")
                if n.type == pb.COMM_COLL_NODE:
                    pg = attr(n, "pg_name")
                    if listed.get(pg) != groups.get(pg) or rank not in groups.get(pg, []):
                        failures.append("rank %d node %d: group %s not as in the comm group file" % (rank, n.id, pg))
        if not sends or sends != receives:
            failures.append("sends and receives do not pair: %d sends, %d receives" % (len(sends), len(receives)))
        if os.path.exists(os.path.join(out, "quickstart.%d.et" % ranks)):
            failures.append("more files than ranks")
    for f in failures[:20]:
        print("FAIL:", f)
    print("%d ranks, %d transfers, %d process groups: %s" % (ranks, len(sends), len(groups), "bad" if failures else "ok"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
