"""A sharded model's checkpoint folder, self-verifying: the manifest and the shard files name each other.

The folder holds one file per shard and ``checkpoint.json``, the manifest: a random checkpoint
id, the shard plan, a digest of the task graph, and each shard file's name, size and SHA-256;
its own digest covers all of it. Each shard file carries its identity (the checkpoint id, its
shard number, the number of shards, the plan's digest, its task count): in the model file's
metadata, or beside the model in a pickle. A restore reads a shard file only at the size the
manifest gives, checks its checksum, and the shard's actor checks its identity; so a shard file
swapped with another, duplicated, taken from another checkpoint, or a plan edited in the
manifest is refused (docs/reliability.md, "Dask checkpoints").
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
from pathlib import Path

import numpy as np

from ..graph import TaskGraph
from ._plan import ShardPlan

#: a shard's formats: omtl's model file (runs no code when read) or pickle (any learner)
SAFE, PICKLE = "omtl", "pickle"

CHECKPOINT_MANIFEST = "checkpoint.json"
#: The manifest's layout; a manifest of another version is refused.
MANIFEST_VERSION = 2

_FIELDS = {"version", "id", "seq", "format", "n_tasks", "learner", "graph", "plan", "shards", "n_features_in",
           "label_form", "digest"}


def new_checkpoint_id() -> str:
    return secrets.token_hex(16)


def _sha256_json(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def plan_digest(shard_of) -> str:
    return _sha256_json([int(s) for s in shard_of])


def graph_digest(graph: TaskGraph) -> str:
    """A digest of the task graph (kind, size and arrays): a checkpoint restores into the graph it was written for."""
    h = hashlib.sha256(f"{graph.kind}:{graph.n_tasks}".encode())
    for name, dtype in (("edges", np.int64), ("weights", np.float64), ("matrix", np.float64)):
        a = getattr(graph, name)
        h.update(f";{name}:".encode())
        if a is not None:
            a = np.ascontiguousarray(a, dtype=dtype)
            h.update(repr(a.shape).encode())
            h.update(a.tobytes())
    return h.hexdigest()


def shard_identity(checkpoint_id: str, shard: int, plan: ShardPlan) -> dict:
    """What a shard file says about itself (checked by the actor that loads it)."""
    return {"checkpoint": checkpoint_id, "shard": int(shard), "n_shards": plan.n_shards,
            "plan": plan_digest(plan.shard_of), "n_tasks": int(plan.tasks[shard].size)}


def manifest_digest(manifest: dict) -> str:
    """The SHA-256 of the manifest's fields other than ``digest`` (canonical JSON)."""
    return _sha256_json({k: v for k, v in manifest.items() if k != "digest"})


def file_entry(name: str, data: bytes) -> dict:
    return {"file": name, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def new_manifest(**fields) -> bytes:
    manifest = {"version": MANIFEST_VERSION, **fields}
    manifest["digest"] = manifest_digest(manifest)
    return json.dumps(manifest).encode()


def _malformed(path, why: str):
    raise ValueError(f"{path}: not a valid omtl checkpoint ({CHECKPOINT_MANIFEST}: {why})")


def read_manifest(path: Path) -> dict:
    """The checkpoint's manifest, its fields and its digest checked (shard files are plain names
    in the folder, the plan one shard per task)."""
    try:
        with open(Path(path) / CHECKPOINT_MANIFEST, "rb") as f:
            text = f.read(1 << 26)  # the manifest lists the plan and one line per shard
    except FileNotFoundError:
        raise ValueError(f"{path} holds no checkpoint ({CHECKPOINT_MANIFEST} is missing)") from None
    try:
        manifest = json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        _malformed(path, f"unreadable, {exc}")
    if not isinstance(manifest, dict):
        _malformed(path, "not a JSON object")
    if manifest.get("version") != MANIFEST_VERSION:
        _malformed(path, f"version {manifest.get('version')!r}, this omtl reads version {MANIFEST_VERSION}")
    if set(manifest) != _FIELDS:
        _malformed(path, f"its fields are not {sorted(_FIELDS)}")
    if manifest["digest"] != manifest_digest(manifest):
        _malformed(path, "its digest does not match its contents: it was edited or damaged")
    shards, plan = manifest["shards"], manifest["plan"]
    entry_ok = lambda e: (isinstance(e, dict) and set(e) == {"file", "bytes", "sha256"}  # noqa: E731
                          and isinstance(e["file"], str) and e["file"] and Path(e["file"]).name == e["file"]
                          and not e["file"].startswith(".") and _is_count(e["bytes"]) and isinstance(e["sha256"], str))
    if not isinstance(shards, list) or not shards or not all(entry_ok(e) for e in shards) \
            or len({e["file"] for e in shards}) != len(shards):
        _malformed(path, "malformed list of shard files")
    if not isinstance(manifest["id"], str) or not _is_count(manifest["seq"]) or manifest["format"] not in (SAFE, PICKLE) \
            or not _is_count(manifest["n_tasks"]):
        _malformed(path, "malformed id, seq, format or n_tasks")
    shard_of = plan.get("shard_of") if isinstance(plan, dict) else None
    if not isinstance(shard_of, list) or len(shard_of) != manifest["n_tasks"] \
            or not all(_is_count(v) and v < len(shards) for v in shard_of) or len(set(shard_of)) != len(shards):
        _malformed(path, "the shard plan does not give each task one of the shards, every shard a task")
    return manifest


def _is_count(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def checked_plan(path: Path, manifest: dict, graph: TaskGraph) -> ShardPlan:
    """The manifest's plan, for this graph: same graph, every connected component on one shard."""
    if manifest["n_tasks"] != graph.n_tasks:
        raise ValueError(f"{path}: the checkpoint holds {manifest['n_tasks']} tasks, this model {graph.n_tasks}")
    if manifest["graph"] != graph_digest(graph):
        raise ValueError(f"{path}: the checkpoint was written for another task graph than this model's")
    shard_of = np.asarray(manifest["plan"]["shard_of"], dtype=np.int64)
    comp = np.asarray(graph.components, dtype=np.int64)
    lowest, highest = np.full(graph.n_tasks, len(manifest["shards"])), np.full(graph.n_tasks, -1)
    np.minimum.at(lowest, comp, shard_of)
    np.maximum.at(highest, comp, shard_of)
    if np.any(lowest[comp] != highest[comp]):
        raise ValueError(f"{path}: the checkpoint's shard plan splits a connected component of the task graph")
    return ShardPlan.from_shard_of(shard_of, len(manifest["shards"]))


def read_shard_files(path: Path, manifest: dict) -> list[bytes]:
    """Each shard file's bytes, read no further than the manifest's size, checked against its checksum."""
    blobs = []
    for entry in manifest["shards"]:
        file = Path(path) / entry["file"]
        try:
            size = os.stat(file).st_size
        except FileNotFoundError:
            raise ValueError(f"{path}: the checkpoint's shard file {entry['file']} is missing") from None
        if size != entry["bytes"]:
            raise ValueError(f"{path}: the checkpoint's shard file {entry['file']} holds {size} bytes, the manifest says "
                             f"{entry['bytes']}: it was replaced or damaged")
        with open(file, "rb") as f:
            data = f.read(entry["bytes"])
        if hashlib.sha256(data).hexdigest() != entry["sha256"]:
            raise ValueError(f"{path}: the checkpoint's shard file {entry['file']} does not match the manifest's "
                             "checksum: it was replaced (by another shard's or another checkpoint's file) or damaged")
        blobs.append(data)
    return blobs


def check_identity(found, expected: dict) -> None:
    """Raises ValueError unless a shard file's identity is the one its place in the checkpoint gives."""
    if found != expected:
        if not isinstance(found, dict):
            raise ValueError("the checkpoint's shard file names no shard (it was not written by checkpoint())")
        raise ValueError(
            f"the checkpoint's shard file at shard {expected['shard']} is shard {found.get('shard')!r} of "
            f"checkpoint {found.get('checkpoint')!r} (plan {str(found.get('plan'))[:12]}), expected shard "
            f"{expected['shard']} of checkpoint {expected['checkpoint']!r} (plan {expected['plan'][:12]})"
        )
