"""One writer per output directory (prolas.output_lock).

Laws: while a process holds an output directory, a second run on it is refused in one
line and writes nothing there; once the holder ends (normally or killed), the next run
gets the directory.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from conftest import QUICK_CKS, ROOT

from prolas.cli import main
from prolas.errors import OutputExistsError, ProlasError
from prolas.output_lock import LOCK_NAME, OutputBusyError, claim_output_dir, hold_output_dir

AIRLINE_TRAIN = str(ROOT / "data" / "airline_train.csv")

#: A child process that holds OUT's lock until its stdin closes or it is killed. It
#: imports the lock's module without running prolas/__init__ (which loads torch, seconds).
HOLDER = """
import sys, types
from pathlib import Path
package = types.ModuleType("prolas")
package.__path__ = [sys.argv[2]]
sys.modules["prolas"] = package
from prolas.output_lock import hold_output_dir
with hold_output_dir(Path(sys.argv[1]), "test holder"):
    print("held", flush=True)
    sys.stdin.readline()
"""


def child_env() -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }


@contextmanager
def held_by_child(out: Path) -> Iterator[subprocess.Popen]:
    """A child process holding ``out``'s lock for the ``with`` block (then killed)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(out), str(ROOT / "prolas")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=child_env(),
    )
    try:
        assert proc.stdout.readline() == "held\n"
        yield proc
    finally:
        proc.kill()
        proc.wait(timeout=30)


def refusal(out: Path) -> str:
    with pytest.raises(OutputBusyError) as info:
        with hold_output_dir(out, "second"):
            pass
    msg = str(info.value)
    assert "\n" not in msg
    return msg


def test_a_second_holder_is_refused_until_the_first_ends(tmp_path) -> None:
    out = tmp_path / "out"
    with held_by_child(out) as child:
        msg = refusal(out)
        assert f"pid {child.pid}: test holder" in msg and "another --out" in msg
        child.stdin.close()  # the holder leaves its block normally
        assert child.wait(timeout=30) == 0
    assert not (out / LOCK_NAME).exists()  # a normal end removes the file
    with hold_output_dir(out, "next") as path:
        assert path.read_text().startswith(f"pid {os.getpid()}: next")


def test_a_killed_holder_leaves_nothing_that_blocks(tmp_path) -> None:
    out = tmp_path / "out"
    with held_by_child(out) as child:
        refusal(out)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
        assert (out / LOCK_NAME).exists()  # the file stays, its lock died with the holder
        with hold_output_dir(out, "after the crash"):
            pass


def test_the_lock_is_per_directory_and_released_on_errors(tmp_path) -> None:
    with hold_output_dir(tmp_path / "a", "one"), hold_output_dir(tmp_path / "b", "two"):
        pass
    with pytest.raises(RuntimeError), hold_output_dir(tmp_path / "a", "fails"):
        raise RuntimeError("inside the run")
    with hold_output_dir(tmp_path / "a", "again"):
        pass
    (tmp_path / "file").write_text("")
    with pytest.raises(OutputExistsError, match="not a directory"):
        with hold_output_dir(tmp_path / "file", "x"):
            pass
    with pytest.raises(ProlasError, match="cannot create --out"):  # a one-line error
        with hold_output_dir(tmp_path / "file" / "sub", "x"):
            pass


def test_an_earlier_result_is_protected_under_the_lock(tmp_path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "result.json").write_text("{}")
    with pytest.raises(OutputExistsError, match="--force"):
        with claim_output_dir(out, "fit", force=False, resume=False):
            pass
    assert not (out / LOCK_NAME).exists()
    for force, resume in ((True, False), (False, True)):
        with claim_output_dir(out, "fit", force=force, resume=resume):
            assert (out / LOCK_NAME).exists()
    with claim_output_dir(tmp_path / "missing", "fit", force=False, resume=True):
        pass  # resuming creates nothing: the journal reports the missing run
    assert not (tmp_path / "missing").exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["fit", AIRLINE_TRAIN, *QUICK_CKS],
        ["fit", AIRLINE_TRAIN, *QUICK_CKS, "--force"],
        ["fit", AIRLINE_TRAIN, *QUICK_CKS, "--resume"],
        ["compare", AIRLINE_TRAIN, "--methods", "cks", "--seeds", "1", "--budget", "1"],
        ["bench", "--data-dir", str(ROOT / "data"), "--seeds", "1", "--budget", "1"],
    ],
    ids=["fit", "fit --force", "fit --resume", "compare", "bench"],
)
def test_every_journalling_command_is_refused_on_a_held_directory(tmp_path, capsys, argv) -> None:
    out = tmp_path / "out"
    with held_by_child(out) as child:
        code = main([*argv, "--out", str(out), "--quiet"])
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1 and err.startswith("prolas: error:")
        assert f"in use by a running prolas (pid {child.pid}" in err
        assert sorted(p.name for p in out.iterdir()) == [LOCK_NAME]  # nothing written


@pytest.mark.slow
def test_two_real_fits_on_one_directory(tmp_path) -> None:
    """A running `prolas fit` holds --out: a second one (even with --force) is refused in
    one line and the first's journal stays its own; after the first is killed, a run gets
    the directory."""
    out = tmp_path / "out"
    exe = Path(sys.executable).parent / "prolas"
    first = subprocess.Popen(
        [exe, "fit", AIRLINE_TRAIN, "--search", "cks", "--budget", "500", "--restarts", "1"]
        + ["--workers", "1", "--out", str(out), "--quiet"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=child_env(),
    )
    try:
        journal = out / "journal.jsonl"
        deadline = time.monotonic() + 120
        while not (journal.exists() and journal.read_text().count("\n") >= 2):
            assert first.poll() is None and time.monotonic() < deadline
            time.sleep(0.2)
        second = subprocess.run(
            [exe, "fit", AIRLINE_TRAIN, *QUICK_CKS, "--force", "--out", str(out), "--quiet"],
            capture_output=True,
            text=True,
            timeout=120,
            env=child_env(),
        )
        assert second.returncode == 2 and second.stdout == ""
        assert second.stderr.count("\n") == 1 and f"(pid {first.pid}: prolas fit" in second.stderr
        assert first.poll() is None  # the first run goes on
    finally:
        first.kill()
        first.wait(timeout=60)
    # one search's journal: one header, evaluations 1, 2, ... each once (the last line
    # may be cut by the kill)
    lines = journal.read_text().splitlines()
    assert sum("prolas_journal" in line for line in lines) == 1
    indices = []
    for line in lines[1:]:
        try:
            indices.append(json.loads(line)["index"])
        except json.JSONDecodeError:
            assert line is lines[-1]
    assert indices == list(range(1, len(indices) + 1))
    code = main(["fit", AIRLINE_TRAIN, *QUICK_CKS, "--force", "--out", str(out), "--quiet"])
    assert code == 0 and (out / "result.json").exists()
