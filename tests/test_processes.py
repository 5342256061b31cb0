"""Worker processes: never started where they would run a user's script again, and never
left behind when the process that started them dies."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import types
from pathlib import Path

import pytest

import prolas.processes as processes
from tests.conftest import ROOT


def _fake_main(monkeypatch, **attrs) -> None:
    main = types.ModuleType("__main__")
    for key, value in attrs.items():
        setattr(main, key, value)
    monkeypatch.setitem(sys.modules, "__main__", main)
    monkeypatch.setattr(processes, "_GUARDED_MAIN", False)


def test_which_main_modules_a_worker_would_run_again(monkeypatch) -> None:
    _fake_main(monkeypatch, __spec__=None)  # python -c, stdin, a notebook's kernel
    assert processes.main_module_rerun_by_workers() is None
    _fake_main(monkeypatch, __spec__=types.SimpleNamespace(name="pkg.__main__"))
    assert processes.main_module_rerun_by_workers() is None  # python -m pkg
    _fake_main(monkeypatch, __spec__=types.SimpleNamespace(name="tool"))
    assert processes.main_module_rerun_by_workers() == "tool"  # python -m tool (a module)
    _fake_main(monkeypatch, __spec__=None, __file__="/home/me/analysis.py")
    assert processes.main_module_rerun_by_workers() == "/home/me/analysis.py"
    processes.main_module_is_guarded()  # prolas's command line, or a script that says so
    assert processes.main_module_rerun_by_workers() is None


@pytest.mark.parametrize(
    "source, judged",
    [
        ("import prolas\nprolas.KernelSearch().fit('data.csv')\n", True),
        ("import prolas\nif __name__ == '__main__':\n    prolas.KernelSearch()\n", False),
        ("import prolas\nif '__main__' == __name__:\n    prolas.KernelSearch()\n", False),
        ("def broken(:\n", False),  # cannot be parsed: not judged
    ],
)
def test_an_unguarded_script_is_the_one_without_a_main_block(
    monkeypatch, tmp_path, source, judged
) -> None:
    script = tmp_path / "analysis.py"
    script.write_text(source)
    _fake_main(monkeypatch, __spec__=None, __file__=str(script))
    assert processes.unguarded_main_script() == (str(script) if judged else None)
    _fake_main(monkeypatch, __spec__=None)  # python -c: nothing to import again
    assert processes.unguarded_main_script() is None


def _run(tmp_path, code: str) -> subprocess.CompletedProcess:
    """``python analysis.py`` on two cores; its output goes to files, not pipes, so the
    run ends with the script even if its workers do not (they would hold a pipe open)."""
    script = tmp_path / "analysis.py"
    script.write_text(textwrap.dedent(code))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "2"}
    out, err = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
    with out.open("w") as o, err.open("w") as e:
        code = subprocess.run(
            [sys.executable, str(script)], stdout=o, stderr=e, timeout=300, env=env
        )
    return subprocess.CompletedProcess(code.args, code.returncode, out.read_text(), err.read_text())


@pytest.mark.slow
def test_a_script_without_a_main_guard_runs_once(tmp_path) -> None:
    """A plain script fits on two cores: its top level runs once (a worker process would
    import it again and run its search a second time), with no warning."""
    done = _run(
        tmp_path,
        """
        import numpy as np
        import prolas
        print("top level", flush=True)
        x = np.linspace(0, 10, 120)
        y = np.sin(2 * np.pi * x / 2.5) + 0.2 * x + 0.1 * np.random.default_rng(0).normal(size=120)
        ks = prolas.KernelSearch(method="cks", budget=4, restarts=4).fit(x=x, y=y)
        print("best", ks.best_.expression, flush=True)
        """,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("top level") == 1, done.stdout
    assert done.stdout.count("best") == 1
    assert "worker process" not in done.stderr and "Traceback" not in done.stderr, done.stderr


@pytest.mark.slow
def test_workers_asked_for_from_an_unguarded_script_are_refused_in_one_line(tmp_path) -> None:
    """``workers=2`` from a script with no main block: each worker would run the whole
    script again (its search included, silently: three searches for one). Refused before
    any worker starts, saying what to do; the script's top level ran once."""
    done = _run(
        tmp_path,
        """
        import numpy as np
        import prolas
        print("top level", flush=True)
        x = np.linspace(0, 10, 60)
        ks = prolas.KernelSearch(method="cks", budget=4, workers=2).fit(x=x, y=np.sin(x))
        print("best", ks.best_.expression, flush=True)
        """,
    )
    assert done.returncode == 1 and done.stdout == "top level\n", (done.stdout, done.stderr)
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("prolas.search.executors.ExecutorError: worker processes import")
    assert 'no `if __name__ == "__main__":` block' in last and "use one worker" in last


def _gone(pid: int) -> bool:
    """Exited: no such process, or a zombie waiting for a parent to collect it."""
    stat = Path(f"/proc/{pid}/stat")
    if stat.parent.parent.exists():  # Linux: read the state, a zombie has exited
        try:
            return stat.read_text().rsplit(")", 1)[1].split()[0] == "Z"
        except FileNotFoundError:
            return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.slow
def test_workers_exit_when_their_parent_is_killed(tmp_path) -> None:
    """SIGKILL leaves no cleanup to the parent: a search's pool workers and a fit's split
    worker end on their own (else they would wait for work forever, holding memory)."""
    done = _run(
        tmp_path,
        """
        import os, signal
        if __name__ == "__main__":
            from prolas.gp import split
            from prolas.search.executors import ProcessPool

            pool = ProcessPool(2)
            pids = {pool.submit(os.getpid).result() for _ in range(6)}
            assert split.wait_ready(1, timeout=120), split.disabled()
            pids.add(split._POOL.submit(os.getpid).result())
            print(" ".join(map(str, sorted(pids))), flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        """,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    pids = [int(p) for p in done.stdout.split()]
    assert len(pids) >= 2
    deadline = time.monotonic() + 30
    while not all(_gone(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    alive = [p for p in pids if not _gone(p)]
    for p in alive:  # not to leave them to the next test
        os.kill(p, signal.SIGKILL)
    assert not alive, f"workers {alive} outlived their parent"
