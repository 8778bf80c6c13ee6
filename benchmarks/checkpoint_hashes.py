"""Content hashes of seeded ``privaudit train`` checkpoints: evidence that a refactoring changed no result.

Trains four small federations with fixed seeds — FedAvg, Upcycled-FedProx with output perturbation, PFA and
PrivateFL-CDP — each with ``privaudit train … --save-client-updates``, and prints, per run, the sha256 of every
safetensors file of its checkpoint (models and client releases) and of the privacy ledger in its manifest, plus one
digest over all of them. Run it before and after a change and compare the digests: equal digests mean bit-identical
checkpoints. Timestamps, wall times and provenance are left out of the digest (they change between any two runs).

Usage: ``.venv/bin/python benchmarks/checkpoint_hashes.py [--out DIR] [--json PATH] [--only NAME ...]``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from safetensors import safe_open

RUNS = {
    "fedavg": ["--algorithm", "fedavg", "--dataset", "digits", "--num-clients", "4", "--rounds", "3",
               "--local-epochs", "1"],
    "upcycled-fedprox+output-perturbation": ["--algorithm", "upcycled-fedprox", "--dataset", "synthetic:iid",
                                             "--rounds", "6", "--privacy", "output-perturbation", "--noise", "0.8",
                                             "--clip", "10", "--local-epochs", "2", "--stragglers", "0.3"],
    "pfa": ["--algorithm", "pfa", "--dataset", "digits", "--num-clients", "6", "--rounds", "3", "--local-epochs", "1"],
    "privatefl-cdp": ["--algorithm", "privatefl", "--privacy", "cdp", "--dataset", "digits", "--num-clients", "4",
                      "--rounds", "3", "--clients-per-round", "0.5", "--sampling", "poisson", "--epsilon", "8"],
}


def tensors_digest(path: Path) -> str:
    """sha256 over a safetensors file's metadata and tensors in sorted order (its header's key order is not stable:
    the writer serialises a hash map, so two writes of the same tensors can differ byte for byte)."""
    digest = hashlib.sha256()
    with safe_open(str(path), framework="numpy") as handle:
        digest.update(json.dumps(handle.metadata() or {}, sort_keys=True).encode())
        for name in sorted(handle.keys()):
            array = handle.get_tensor(name)
            digest.update(f"{name}|{array.dtype}|{array.shape}".encode())
            digest.update(array.tobytes())
    return digest.hexdigest()


def checkpoint_digest(folder: Path) -> dict[str, str]:
    """Content hash of every safetensors file and of the manifest's ledger, by relative path."""
    out = {str(p.relative_to(folder)): tensors_digest(p) for p in sorted(folder.rglob("*.safetensors"))}
    manifest = json.loads((folder / "manifest.json").read_text())
    ledger = manifest.get("ledger")
    out["manifest.json#ledger"] = hashlib.sha256(json.dumps(ledger, sort_keys=True).encode()).hexdigest()
    return out


def train(name: str, args: list[str], out: Path) -> dict[str, str]:
    folder = out / name
    command = [sys.executable, "-m", "privaudit", "train", *args, "--seed", "0", "--out", str(folder),
               "--save-client-updates", "--overwrite", "--quiet"]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{name}: privaudit train failed ({done.returncode}):\n{done.stderr}")
    return checkpoint_digest(folder)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="where to keep the checkpoints (default: a temporary folder)")
    parser.add_argument("--json", type=Path, help="also write every file's hash")
    parser.add_argument("--only", nargs="+", choices=sorted(RUNS), help="train only these runs")
    args = parser.parse_args()
    names = args.only or list(RUNS)
    with tempfile.TemporaryDirectory() as scratch:
        out = args.out or Path(scratch)
        hashes = {name: train(name, RUNS[name], out) for name in names}
    print("| run | files | digest |\n|---|---|---|")
    for name, files in hashes.items():
        digest = hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()
        print(f"| {name} | {len(files)} | `{digest[:16]}` |")
    if args.json:
        args.json.write_text(json.dumps(hashes, indent=1))


if __name__ == "__main__":
    main()
