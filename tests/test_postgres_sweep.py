"""Sweeps on a real PostgreSQL server: three worker processes on one study, one SIGKILLed
mid-trial. The server is a throwaway one started from the machine's PostgreSQL binaries
(`pg_config --bindir`) in a fresh data directory with a unix socket in a temp folder, and
stopped afterwards; the tests are skipped where the binaries or the driver are missing (CI has
both), with a reason that starts "UNGUARDED" and says why: there, the PostgreSQL promises (the
creation lock, workers sharing a study, a killed worker's trial re-run) are not checked, and
`tests/conftest.py` says so in the run's summary. The target is a FAKE (`ScriptedLM`): no model
runs.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from skillopt_dsl.optimizers.optuna_lr import open_storage
from skillopt_dsl.sweeps import load_sweep

pytestmark = pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")

LRS = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5)
"""The study's trials, enqueued up front: every run evaluates exactly these settings."""

GRACE_S = 2
"""A RUNNING trial silent for longer than this is failed and re-run (heartbeat every 1 s)."""

WORKER = """
import sys, time
from pathlib import Path
from skillopt_dsl.data import Splits
from skillopt_dsl.optimizers import GradientText, ReflectiveProposer
from skillopt_dsl.sweeps import run_sweep_worker
from skillopt_dsl.testing import ScriptedLM
from skillopt_dsl.testing.contract import (
    ContractParity, contract_examples, contract_reflector, contract_target,
)

storage, study, n_trials, role, flags, run_dir, grace = sys.argv[1:8]
flags = Path(flags)

class GatedReflector:
    # The FAKE optimizer model, held at its first call (inside this worker's first trial)
    # until the test says go; the victim is held until it is killed.

    def __init__(self):
        self.inner = contract_reflector()
        self.model = self.inner.model

    def generate(self, messages, params):
        mark = flags / f"{role}.started"
        if role != "solo" and not mark.exists():
            mark.touch()
            while role == "victim" or not (flags / "go").exists():
                time.sleep(0.05)
        return self.inner.generate(messages, params)

splits = Splits(contract_examples(0, 16), contract_examples(100, 10), contract_examples(200, 4))
run_sweep_worker(
    ContractParity(), splits, storage=storage, study_name=study, n_trials=int(n_trials),
    inner=GradientText(proposers=[ReflectiveProposer(read_successes=False)], epochs=2),
    lm=ScriptedLM(contract_target), optimizer_lm=GatedReflector(), sampler_seed=0, run_dir=run_dir,
    heartbeat_interval=1, grace_period=int(grace),
)
"""


UNGUARDED = (
    "UNGUARDED: the PostgreSQL promises (the creation lock, workers sharing one study, a killed "
    "worker's trial re-run) are not checked on this machine: "
)
"""The start of every skip reason here (`tests/conftest.py` counts them in the summary)."""


def _pg_bindir() -> Path | None:
    """The PostgreSQL server binaries' folder (`pg_config --bindir`, else Debian's layout)."""
    candidates: list[Path] = []
    pg_config = shutil.which("pg_config")
    if pg_config is not None:
        found = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True)
        candidates.append(Path(found.stdout.strip()))
    candidates += sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)
    needed = ("initdb", "pg_ctl", "postgres")
    return next((c for c in candidates if all((c / n).is_file() for n in needed)), None)


@pytest.fixture(scope="module")
def postgres_url() -> Iterator[str]:
    """A throwaway PostgreSQL server on a unix socket; yields its SQLAlchemy URL."""
    bindir = _pg_bindir()
    if bindir is None:
        pytest.skip(
            UNGUARDED + "PostgreSQL server binaries (initdb, pg_ctl, postgres) not found via "
            "`pg_config --bindir` or /usr/lib/postgresql/*/bin; install PostgreSQL to run them"
        )
    pytest.importorskip(
        "psycopg", reason=UNGUARDED + "no PostgreSQL driver: pip install -e '.[postgres]'"
    )
    as_postgres: list[str] = []
    root = Path(tempfile.mkdtemp(prefix="skillopt-pg-", dir="/tmp"))
    if os.geteuid() == 0:  # initdb refuses to run as root: run the server as `postgres`
        try:
            account = pwd.getpwnam("postgres")
        except KeyError:
            shutil.rmtree(root)
            pytest.skip(UNGUARDED + "running as root needs a 'postgres' user to own the server")
        os.chown(root, account.pw_uid, account.pw_gid)
        as_postgres = ["runuser", "-u", "postgres", "--"]
    data = root / "data"
    options = f"-k {root} -c listen_addresses='' -c fsync=off -c max_connections=100"
    start = [str(bindir / "pg_ctl"), "-D", str(data), "-l", str(root / "server.log")]
    try:
        _run([*as_postgres, str(bindir / "initdb"), "-D", str(data), "-A", "trust",
              "-U", "postgres", "-E", "UTF8", "--locale=C", "--no-sync"])  # fmt: skip
        _run([*as_postgres, *start, "-o", options, "-w", "-t", "60", "start"])
        yield f"postgresql+psycopg://postgres@/postgres?host={root}"
    finally:
        if (data / "postmaster.pid").exists():
            _run([*as_postgres, *start, "-m", "immediate", "-w", "stop"])
        shutil.rmtree(root, ignore_errors=True)


def _run(command: list[str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{command[0]} failed:\n{done.stdout}\n{done.stderr}"


def _enqueued_study(url: str, name: str) -> None:
    """Create the study with the settings of every trial enqueued (what each run evaluates)."""
    import optuna

    study = optuna.create_study(storage=open_storage(url), study_name=name, direction="maximize")
    for lr in LRS:
        study.enqueue_trial({"lr": lr})


def _worker(url: str, study: str, role: str, tmp: Path) -> subprocess.Popen[str]:
    script = tmp / "worker.py"
    if not script.exists():
        script.write_text(WORKER, encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    argv = [sys.executable, str(script), url, study, str(len(LRS)), role, str(tmp)]
    return subprocess.Popen(
        [*argv, str(tmp / f"run-{role}"), str(GRACE_S)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for(path: Path, workers: list[subprocess.Popen[str]], timeout_s: float = 60) -> None:
    """Wait for `path`, failing at once when a worker dies. A worker that has finished its
    work and exited cleanly is no failure (a fast racer ends its last round before a slow one
    writes its flag); what it failed to write, the deadline reports."""
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        for worker in workers:
            if worker.poll() not in (None, 0):
                raise AssertionError(f"a worker exited early:\n{worker.communicate()[1][-3000:]}")
        assert time.monotonic() < deadline, f"{path.name} did not appear in {timeout_s} s"
        time.sleep(0.05)


def _finish(worker: subprocess.Popen[str]) -> None:
    _, err = worker.communicate(timeout=120)
    assert worker.returncode == 0, err[-3000:]


def test_three_workers_one_killed_mid_trial(postgres_url: str, tmp_path: Path) -> None:
    """Kills: a sweep on PostgreSQL without heartbeats (the killed worker's trial stays RUNNING
    forever and its settings are never scored), a failed trial not re-run with its settings
    (`RetryFailedTrialCallback` missing), workers overshooting or duplicating trials, and any
    dependence of a trial's result on which worker ran it (best skill differs from one worker's)."""
    solo, shared = tmp_path / "solo", tmp_path / "shared"
    for folder in (solo, shared):
        folder.mkdir()
        _enqueued_study(postgres_url, folder.name)
    alone = _worker(postgres_url, "solo", "solo", solo)  # the reference, on its own study
    victim = _worker(postgres_url, "shared", "victim", shared)
    survivors = [_worker(postgres_url, "shared", r, shared) for r in ("worker-a", "worker-b")]
    for role in ("victim", "worker-a", "worker-b"):
        _wait_for(shared / f"{role}.started", [victim, *survivors])
    victim.send_signal(signal.SIGKILL)  # mid-trial: its target is inside an evaluation
    victim.wait(timeout=30)
    time.sleep(GRACE_S + 1.5)  # the victim's heartbeat is now stale
    (shared / "go").touch()
    for worker in [*survivors, alone]:
        _finish(worker)
    reference = load_sweep(postgres_url, "solo")

    result = load_sweep(postgres_url, "shared")
    complete = [t for t in result.trials if t.state.name == "COMPLETE"]
    failed = [t for t in result.trials if t.state.name == "FAIL"]
    seen = [(t.number, t.state.name, t.params) for t in result.trials]
    assert sorted(t.params["lr"] for t in complete) == sorted(LRS), f"lost or duplicated: {seen}"
    assert len({t.number for t in complete}) == len(LRS)
    killed = [t for t in failed if t.params]  # a surplus trial fails unrun, with no params
    assert len(killed) == 1 and killed[0].params in [t.params for t in complete], seen
    assert {t.state.name for t in result.trials} == {"COMPLETE", "FAIL"}, "a trial left behind"
    by_lr = {t.params["lr"]: (t.value, t.skill_hash) for t in complete}
    assert by_lr == {t.params["lr"]: (t.value, t.skill_hash) for t in reference.trials}
    assert result.best is not None and reference.best is not None
    assert (result.best.value, result.best.skill_hash) == (
        reference.best.value,
        reference.best.skill_hash,
    )


RACE_RECIPE = '''"""Parity with scripted fakes: the recipe of the four-worker race (tests only)."""
from skillopt_dsl.data import Splits
from skillopt_dsl.lm import LM
from skillopt_dsl.optimizers import GradientText, ReflectiveProposer
from skillopt_dsl.testing import ScriptedLM
from skillopt_dsl.testing.contract import (
    ContractParity, contract_examples, contract_reflector, contract_target,
)

module = ContractParity()
splits = Splits(contract_examples(0, 16), contract_examples(100, 10), contract_examples(200, 4))
lm = LM(ScriptedLM(contract_target))
optimizer_lm = LM(contract_reflector())
optimizer = GradientText(proposers=[ReflectiveProposer(read_successes=False)], epochs=1)
'''

STARTER = """
import sys, time
from pathlib import Path
from skillopt_dsl import cli
import optuna, psycopg, sqlalchemy  # imported before the start line: only the storage races

flags, role = Path(sys.argv[1]), sys.argv[2]
(flags / f"{role}.ready").touch()
while not (flags / "go").exists():
    time.sleep(0.001)
sys.argv = ["skillopt-dsl", *sys.argv[3:]]
cli.app(prog_name="skillopt-dsl")
"""


def _fresh_database(url: str, name: str) -> str:
    """Create database `name` on the server of `url`; its URL."""
    import sqlalchemy

    engine = sqlalchemy.create_engine(url, isolation_level="AUTOCOMMIT")
    with engine.connect() as connection:
        connection.execute(sqlalchemy.text(f'CREATE DATABASE "{name}"'))
    engine.dispose()
    return url.replace("/postgres?", f"/{name}?", 1)


def test_four_sweep_workers_started_at_once_on_a_fresh_database_all_run(
    postgres_url: str, tmp_path: Path
) -> None:
    """Kills: the schema (and the study, and its seed trial) created by every worker at once:
    on a fresh PostgreSQL database all but one died with `UniqueViolation ... pg_type_typname_
    nsp_index` while the tables were created. Four `skillopt-dsl sweep` workers, held at a
    start line until all have imported, then released together, must all finish the study."""
    url = _fresh_database(postgres_url, "race")
    recipe, starter = tmp_path / "race.py", tmp_path / "starter.py"
    recipe.write_text(RACE_RECIPE, encoding="utf-8")
    starter.write_text(STARTER, encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    roles = [f"w{i}" for i in range(4)]
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                str(starter),
                str(tmp_path),
                role,
                "sweep",
                str(recipe),
                "--n-trials",
                "4",
                "--storage",
                url,
                "--study",
                "race",
                "--run-dir",
                str(tmp_path / f"run-{role}"),
            ],
            env=env,
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for role in roles
    ]
    try:
        for role in roles:
            _wait_for(tmp_path / f"{role}.ready", workers, timeout_s=120)
        (tmp_path / "go").touch()
        outcomes = [worker.communicate(timeout=240) for worker in workers]
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
    failed = [err[-3000:] for worker, (_, err) in zip(workers, outcomes, strict=True)
              if worker.returncode != 0]  # fmt: skip
    assert not failed, "\n---\n".join(failed)
    result = load_sweep(url, "race")
    complete = [t for t in result.trials if t.state.name == "COMPLETE"]
    seen = [(t.number, t.state.name, t.params) for t in result.trials]
    assert len(complete) == 4, seen
    assert all(t.state.name == "COMPLETE" or not t.params for t in result.trials), seen
    seed = result.trials[0].params
    assert sum(t.params == seed for t in result.trials) == 1, f"seed enqueued twice: {seen}"


RACER = """
import sys, time
from pathlib import Path
import optuna
from skillopt_dsl.optimizers.optuna_lr import open_study

flags, role, urls = Path(sys.argv[1]), sys.argv[2], sys.argv[3:]
for index, url in enumerate(urls):
    (flags / f"{role}.ready{index}").touch()
    while not (flags / f"go{index}").exists():
        time.sleep(0.0005)
    open_study(url, "race", sampler=optuna.samplers.RandomSampler(seed=0),
               pruner=optuna.pruners.NopPruner(), first_trial={"lr": 0.3},
               heartbeat_interval=1, grace_period=2)
    (flags / f"{role}.done{index}").touch()
"""


def test_workers_opening_a_fresh_database_at_once_create_its_tables_once(
    postgres_url: str, tmp_path: Path
) -> None:
    """Kills: the tables created without the advisory lock (or a lock on nothing): of six
    processes released together onto a fresh database, four times over, some die of the
    pg_type race. All must open the one study, with its first trial enqueued once (the study's
    own race is forced in test_optuna_lr.py, where its window can be widened)."""
    rounds, names = 4, [f"r{i}" for i in range(6)]
    urls = [_fresh_database(postgres_url, f"open{index}") for index in range(rounds)]
    (tmp_path / "racer.py").write_text(RACER, encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    racers = [
        subprocess.Popen([sys.executable, str(tmp_path / "racer.py"), str(tmp_path), name, *urls],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for name in names
    ]  # fmt: skip
    try:
        for index in range(rounds):
            for name in names:
                _wait_for(tmp_path / f"{name}.ready{index}", racers, timeout_s=120)
            (tmp_path / f"go{index}").touch()
            for name in names:
                _wait_for(tmp_path / f"{name}.done{index}", racers, timeout_s=120)
        for racer in racers:
            _finish(racer)
    finally:
        for racer in racers:
            if racer.poll() is None:
                racer.kill()
    import optuna

    for url in urls:
        trials = optuna.load_study(study_name="race", storage=open_storage(url)).get_trials()
        enqueued = [(t.state.name, t.system_attrs.get("fixed_params")) for t in trials]
        assert enqueued == [("WAITING", {"lr": 0.3})], f"{url}: {enqueued}"
