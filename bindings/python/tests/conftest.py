"""Shared fixtures of the package's tests: the repository, the `deloop`
binary the differential tests compare against, and the data folders.

Like the Rust suites (crates/deloop-testdata), a suite whose real data is
absent prints one line and skips, unless CI=true (or DELOOP_REQUIRE_DATA=1),
where it fails.
"""

import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]


def _flag(name):
    v = os.environ.get(name, "").strip().lower()
    return v not in ("", "0", "false")


def data_required():
    return _flag("CI") or _flag("DELOOP_REQUIRE_DATA")


def shared_data(rel, suite):
    """The real-data path `rel` under shared/ beside the checkout (or
    $DELOOP_SHARED_DIR), or a skip with one line naming what was skipped."""
    base = os.environ.get("DELOOP_SHARED_DIR") or str(ROOT / ".." / "shared")
    path = pathlib.Path(base) / rel
    if path.exists():
        return path
    msg = (
        f"{suite}: skipped, real data {path} not found (put deloop's shared data folder "
        "beside the checkout or set DELOOP_SHARED_DIR)"
    )
    if data_required():
        pytest.fail(msg + "; CI=true or DELOOP_REQUIRE_DATA=1 makes missing data a failure")
    print(msg, file=sys.stderr)
    pytest.skip(msg)


def corpus(name):
    """A vendored corpus (always in the checkout)."""
    path = ROOT / "testdata" / "corpora" / name
    assert path.is_dir(), f"vendored corpus {path} is missing from the checkout"
    return path


@pytest.fixture(scope="session")
def deloop_bin():
    """The `deloop` command line: $DELOOP_BIN, else target/debug/deloop
    (built here when missing)."""
    explicit = os.environ.get("DELOOP_BIN")
    if explicit:
        return explicit
    target = pathlib.Path(os.environ.get("CARGO_TARGET_DIR") or ROOT / "target")
    path = target / "debug" / "deloop"
    if not path.exists():
        subprocess.run(["cargo", "build", "-q", "-p", "deloop"], cwd=ROOT, check=True)
    return str(path)


def run_cli(deloop_bin, args, stdin):
    """Runs the command line; returns (exit code, stdout, stderr)."""
    data = stdin.encode() if isinstance(stdin, str) else stdin
    p = subprocess.run([deloop_bin, *args], input=data, capture_output=True, timeout=120)
    return p.returncode, p.stdout.decode(), p.stderr.decode()
