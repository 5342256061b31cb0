"""The CLI end to end on real data, and every bad-input case as a one-line error."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from prolas.cli import main
from prolas.report import validate_result_json

AIRLINE = str(ROOT / "data" / "airline.csv")


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.slow
def test_fit_cks_end_to_end_writes_valid_result(tmp_path, capsys) -> None:
    out = tmp_path / "res"
    code, stdout, err = run(
        capsys,
        "fit",
        AIRLINE,
        "--search",
        "cks",
        "--budget",
        "6",
        "--restarts",
        "2",
        "--out",
        str(out),
        "--quiet",
    )
    assert code == 0, err
    doc = json.loads((out / "result.json").read_text())
    validate_result_json(doc)
    assert doc["search"]["method"] == "cks" and doc["search"]["evaluations"] == 6
    assert len(doc["history"]) == 6
    assert stdout.strip() == doc["best"]["expression"]
    for name in ("report.md", "fit.png", "components.png", "convergence.png"):
        assert (out / name).stat().st_size > 1000


def test_fit_refuses_to_overwrite_without_force(tmp_path, capsys) -> None:
    out = tmp_path / "res"
    out.mkdir()
    (out / "result.json").write_text("{}")
    (out / "mine.txt").write_text("keep me")
    quick_fit = ("fit", AIRLINE, "--search", "random", "--budget", "2", "--restarts", "1")
    code, _, err = run(capsys, *quick_fit, "--out", str(out), "--quiet")
    assert code != 0 and "--force" in err and err.count("\n") == 1
    assert (out / "result.json").read_text() == "{}"
    code, _, err = run(capsys, *quick_fit, "--out", str(out), "--quiet", "--force")
    assert code == 0, err
    assert (out / "mine.txt").read_text() == "keep me"  # other files are never touched
    validate_result_json(json.loads((out / "result.json").read_text()))


@pytest.mark.parametrize(
    ("content", "extra", "fragment"),
    [
        (None, [], "file not found"),
        ("a,b\nx,y\nz,w\n", [], "no numeric column"),
        ("x,y\n1,2\n2,3\n3,4\n4,5\n5,6\n", ["--y", "value"], "columns are 'x', 'y'"),
        ("x,y\n1,2\n2,nan\n3,4\n4,5\n5,6\n6,1\n", [], "NaN/inf"),
        ("x,y\n1,2\n2,3\n3,4\n", [], "at least 5"),
        ("x,y\n1,2\n2,2\n3,2\n4,2\n5,2\n6,2\n", [], "constant"),
        ("x,y\n1,2\n2,3\n3,1\n4,5\n5,6\n", ["--warm-start", "11"], "(--warm-start) must be"),
        ("x,y\n1,2\n2,3\n3,1\n4,5\n5,6\n", ["--base-kernels", "SE,FOO"], "unknown kernel 'FOO'"),
        # a text y column is an error naming it and its first bad line, never a silent
        # fit of another column (issue 16)
        ("x,y\n1,a\n2,b\n3,c\n4,d\n5,e\n6,f\n", [], "column 'y' is not numeric (CSV line 2"),
        ("x,y\n1,a\n2,b\n3,c\n4,d\n5,e\n6,f\n", ["--y", "y"], "column 'y' is not numeric"),
        # values near the float limit: no room to standardise, extrapolate and plot
        (
            "x,y\n" + "".join(f"{i},{(-1) ** i}e308\n" for i in range(8)),
            [],
            "column 'y' has 8 value(s) beyond 1e+300",
        ),
        (
            "x,y\n" + "".join(f"{1 + i / 10}e308,{(i * 7) % 5}\n" for i in range(8)),
            [],
            "column 'x' has 8 value(s) beyond 1e+300",
        ),
    ],
)
def test_bad_input_one_line_error(tmp_path, capsys, content, extra, fragment) -> None:
    path = tmp_path / "data.csv"
    if content is not None:
        path.write_text(content)
    code, stdout, err = run(
        capsys,
        "fit",
        str(path),
        "--search",
        "cks",
        "--budget",
        "1",
        "--out",
        str(tmp_path / "o"),
        "--quiet",
        *extra,
    )
    assert code != 0
    assert fragment in err and err.count("\n") == 1 and err.startswith("prolas: error:")
    assert "Traceback" not in err and stdout == ""
    assert not (tmp_path / "o").exists()  # a rejected command creates no output directory


def test_dropna_fits_after_dropping(tmp_path, capsys) -> None:
    path = tmp_path / "d.csv"
    rows = "\n".join(f"{i},{(i * 7) % 5 + 0.1 * i}" for i in range(12))
    path.write_text("x,y\n" + rows + "\n12,nan\n")
    code, _, err = run(
        capsys,
        "fit",
        str(path),
        "--search",
        "random",
        "--budget",
        "2",
        "--restarts",
        "1",
        "--out",
        str(tmp_path / "o"),
        "--dropna",
        "--quiet",
    )
    assert code == 0, err


@pytest.mark.slow
def test_warnings_are_one_line_for_the_user(tmp_path) -> None:
    """prolas's own warnings print as `prolas: warning: ...` without Python's source line
    (a real process: pytest records warnings in-process); another package's keep their
    category and origin."""
    path = tmp_path / "d.csv"
    rows = "\n".join(f"{i // 2},{(i * 7) % 5 + 0.1 * i}" for i in range(12))
    path.write_text("x,y\n" + rows + "\n12,nan\n")
    argv = ["fit", str(path), "--search", "random", "--budget", "1", "--restarts", "1"]
    argv += ["--out", str(tmp_path / "o"), "--dropna"]
    done = subprocess.run([sys.executable, "-m", "prolas", *argv], capture_output=True, text=True)
    err = done.stderr
    assert done.returncode == 0, err
    lines = err.splitlines()
    assert any(line.startswith("prolas: warning: ") and "dropped 1 row" in line for line in lines)
    assert any(line.startswith("prolas: warning: ") and "duplicate x" in line for line in lines)
    assert "UserWarning" not in err and ".py:" not in err and "from_arrays(" not in err
    # standard error is a pipe, not a terminal: progress as whole lines, no tqdm redraws
    assert "\r" not in err
    # the line shows the fit it counts (its best BIC), not the one before
    progress = [line for line in lines if line.startswith("search: 1/1 fit (100 %), ")]
    assert len(progress) == 1 and "; best BIC " in progress[0], err
    from prolas.cli import _format_warning

    text = _format_warning("deprecated\n thing", FutureWarning, "/x/site-packages/other/mod.py", 7)
    assert text == "prolas: warning: deprecated thing (FutureWarning, mod.py:7)\n"


def test_describe(capsys) -> None:
    code, out, _ = run(capsys, "describe", "(SE + PER) × lin")
    assert code == 0 and "canonical: LIN*PER + LIN*SE" in out and "k:         8" in out
    code, out, _ = run(capsys, "describe", "(lin + c) * wn + se")  # WN alone: the noise
    assert code == 0 and "canonical: LIN*WN + SE" in out and "k:         5" in out
    code, _, err = run(capsys, "describe", "SE + + PER")
    assert code != 0 and "position" in err and err.count("\n") == 1


@pytest.mark.slow
def test_console_script_help_and_bad_input() -> None:
    exe = Path(sys.executable).parent / "prolas"
    help_text = subprocess.run([exe, "fit", "--help"], capture_output=True, text=True, check=True)
    assert "--budget" in help_text.stdout and "--search" in help_text.stdout
    bad = subprocess.run([exe, "fit", "nope.csv"], capture_output=True, text=True)
    assert bad.returncode != 0 and bad.stderr.strip() == "prolas: error: nope.csv: file not found"
    # python -m prolas is the same command
    module = subprocess.run(
        [sys.executable, "-m", "prolas", "fit", "nope.csv"], capture_output=True, text=True
    )
    assert module.returncode == bad.returncode and module.stderr == bad.stderr


def test_train_vae_and_list_checkpoints(tmp_path, capsys) -> None:
    stem = tmp_path / "ckpt" / "tiny"
    tiny = ("train-vae", "--grammar", "small", "--samples", "400", "--out", str(stem), "--quiet")
    code, _, err = run(capsys, *tiny, "--epochs", "2", "--latent-dim", "2")
    assert code == 0, err
    assert stem.with_suffix(".pt").stat().st_size > 0
    meta = json.loads(stem.with_suffix(".json").read_text())
    assert meta["model"]["latent_dim"] == 2
    code, out, _ = run(capsys, "checkpoints", "--dir", str(stem.parent))
    assert code == 0 and "tiny" in out and "latent_dim: 2" in out
    # an existing checkpoint is never overwritten without --force
    before = stem.with_suffix(".pt").read_bytes()
    code, _, err = run(capsys, *tiny, "--epochs", "1")
    assert code != 0 and "--force" in err and stem.with_suffix(".pt").read_bytes() == before
    code, _, err = run(
        capsys, "train-vae", "--grammar", "nope.toml", "--out", str(tmp_path / "x"), "--quiet"
    )
    assert code != 0 and "grammar file not found" in err and err.count("\n") == 1


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["fit", AIRLINE, "--seed", "-1"], "argument --seed: expected an integer >= 0, got -1"),
        (
            ["fit", AIRLINE, "--search-windows", "-1"],
            "argument --search-windows: expected an integer >= 0, got -1",
        ),
        (
            ["fit", AIRLINE, "--budget", "0"],
            "argument --budget: expected a positive integer, got 0",
        ),
        (
            ["bench", "--fit-seed", "-2", "--out", "X"],
            "argument --fit-seed: expected an integer >= 0",
        ),
        (
            ["train-vae", "--seed", "x", "--out", "X"],
            "argument --seed: expected an integer, got 'x'",
        ),
    ],
)
def test_negative_or_non_integer_counts_and_seeds_are_usage_errors_before_any_fit(
    tmp_path, capsys, argv, fragment
) -> None:
    # a negative seed used to reach the fits, fail every one of them and end in a
    # misleading "every evaluation failed" message
    argv = [a.replace("X", str(tmp_path / "out")) for a in argv]
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    # argparse's usage block, then one error line that names the argument
    last = err.strip().splitlines()[-1]
    assert last.startswith("prolas ") and ": error: " in last and fragment in last
    assert not (tmp_path / "out").exists()
