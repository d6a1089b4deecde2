"""``goagent-py serve``: the built-in chat page and API for the CLI's agent, on uvicorn."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import getpass
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from goagent_py.errors import ConfigurationError, MissingExtraError
from goagent_py.serve._auth import (
    Auth,
    NoAuth,
    TokenAuth,
    TrustedProxyAuth,
    UsersFileAuth,
    hash_password,
    is_loopback,
)

__all__ = ["add_serve_arguments", "build_auth", "event_loop_factory", "run_serve", "serve_workers"]


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``serve`` sub-command's options (for ``cli.build_parser``)."""
    from goagent_py.cli._common import port_number

    parser.add_argument("--provider", help="anthropic:MODEL, openai:MODEL, ollama:MODEL or local")
    parser.add_argument(
        "--base-url",
        help="the API root of an OpenAI-compatible server, e.g. http://127.0.0.1:8080/v1 "
        "(OPENAI_BASE_URL is read when not given)",
    )
    parser.add_argument(
        "--memory",
        choices=("statements", "all", "none"),
        default="statements",
        help="what long-term memory keeps of each user's messages: first-person statements "
        "(default), every exchange, or nothing; recalled across the user's threads",
    )
    parser.add_argument(
        "--recall-threshold",
        type=float,
        default=0.3,
        help="least similarity for a memory to be recalled (default 0.3; -1 recalls the top 3)",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=port_number, default=8765)
    parser.add_argument("--db", help="threads database file (default: in the data folder)")
    parser.add_argument("--system", help="system prompt")
    parser.add_argument(
        "--auth", choices=["none", "token", "users", "proxy"], default="none",
        help="none (local clients only), token (GOAGENT_SERVE_TOKEN or --token), users "
        "(--users-file of scrypt hashes), proxy (--proxy-header from 127.0.0.1)",
    )  # fmt: skip
    parser.add_argument("--token", help="the bearer token for --auth token (16+ characters)")
    parser.add_argument("--users-file", help="user:scrypt$... lines for --auth users")
    parser.add_argument("--proxy-header", default="X-Forwarded-User")
    parser.add_argument("--allowed-host", action="append", default=[], help="extra Host name")
    parser.add_argument(
        "--add-user", metavar="NAME", help="print a users-file line for NAME (asks a password)"
    )
    parser.add_argument(
        "--max-connections",
        type=_at_least_one("connections"),
        default=1000,
        metavar="N",
        help="connections and requests served at once; past it a 503 (default 1000; each open "
        "chat stream holds one)",
    )
    parser.add_argument(
        "--workers",
        type=_at_least_one("worker processes"),
        default=1,
        metavar="N",
        help="worker processes serving the one socket (default 1; Linux only above 1): a "
        "thread's run stays in the worker that started it, and requests about it are sent "
        "there; see docs/serve.md",
    )
    parser.add_argument(
        "--loop",
        choices=("auto", "uvloop", "asyncio"),
        default="auto",
        help="the event loop: uvloop when it is installed (auto, the default, as uvicorn's own "
        "command picks), or the standard library's asyncio",
    )


def _at_least_one(what: str) -> Callable[[str], int]:
    """An argparse ``type`` for a whole number from 1 (``--max-connections``, ``--workers``);
    ``what`` names the thing counted in its error message."""

    def parse(text: str) -> int:
        if not text.isdigit() or int(text) < 1:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number of {what} from 1")
        return int(text)

    return parse


def event_loop_factory(choice: str = "auto") -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The event loop ``serve`` runs on (for ``asyncio.Runner``): uvloop's when ``choice`` is
    ``"uvloop"``, or ``"auto"`` and uvloop is importable; None (the standard loop) otherwise.

    uvloop is what ``uvicorn[standard]`` brings and what uvicorn's own command runs on; the
    CLI runs every command in one ``asyncio.run``, so serve picks its loop before that.

    Raises:
        MissingExtraError: ``"uvloop"`` asked for and not installed.
    """
    if choice == "asyncio":
        return None
    try:
        import uvloop
    except ImportError as exc:
        if choice == "uvloop":
            raise MissingExtraError(
                "uvloop", "serve", feature="goagent-py serve --loop uvloop"
            ) from exc
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def build_auth(args: argparse.Namespace) -> Auth:
    """The auth mode the options ask for; a public address without auth is refused.

    Raises:
        ConfigurationError: a mode without its secret, or a non-loopback host with no auth.
    """
    import os

    mode = args.auth
    if mode == "none":
        if not is_loopback(args.host):
            raise ConfigurationError(
                f"--host {args.host} is not a loopback address: pick --auth token, users or "
                "proxy (serving without auth is only allowed on 127.0.0.1)"
            )
        return NoAuth()
    if mode == "token":
        token = args.token or os.environ.get("GOAGENT_SERVE_TOKEN", "")
        if len(token) < 16:
            raise ConfigurationError(
                "--auth token needs --token or GOAGENT_SERVE_TOKEN (16+ chars)"
            )
        return TokenAuth({token: "user"})
    if mode == "users":
        if not args.users_file:
            raise ConfigurationError("--auth users needs --users-file")
        return UsersFileAuth(args.users_file)
    return TrustedProxyAuth(header=args.proxy_header)


def _db_path(db: str | None, home: Path) -> Path:
    path = Path(db).expanduser() if db else home / "serve.db"
    if path.is_dir():
        raise ConfigurationError(
            f"--db {db} is a folder: give a file, e.g. --db {path / 'serve.db'}"
        )
    from goagent_py.cli._common import make_parent

    return make_parent(path)


async def run_serve(args: argparse.Namespace) -> int:
    """Serve the CLI's agent (provider picked like ``chat``) until interrupted; the exit code."""
    if args.add_user:
        password = getpass.getpass(f"password for {args.add_user}: ")
        print(f"{args.add_user}:{hash_password(password)}")
        return 0
    auth = build_auth(args)
    try:
        import uvicorn
    except ImportError as exc:
        raise MissingExtraError("uvicorn", "serve", feature="goagent-py serve") from exc
    from goagent_py.agent import Agent
    from goagent_py.cli._agent import agent_kit, build_agent
    from goagent_py.cli._common import data_home, listen_socket, listening_url, pick_provider
    from goagent_py.cli._setup import (
        embedder_problem,
        loading_embedder,
        long_term_memory,
        write_policy,
    )
    from goagent_py.serve.app import ThreadContext, create_app

    try:
        picked = await pick_provider(args.provider, getattr(args, "base_url", None))
    except MissingExtraError as exc:
        if args.provider:
            raise
        # Nothing configured: the fallback is the embedded model, whose extra is not there.
        raise ConfigurationError(
            "no model to serve: set ANTHROPIC_API_KEY or OPENAI_API_KEY (or OPENAI_BASE_URL "
            "for a local OpenAI-compatible server), start Ollama, pass --provider, or install "
            f'"goagent-py[serve,local]" for the embedded model ({exc})'
        ) from exc
    home = data_home()
    db = _db_path(args.db, home)
    closers: list[Any] = []
    memory_mode = getattr(args, "memory", "statements")
    embedder = loading_embedder() if picked.small or memory_mode != "none" else None
    from goagent_py.serve._supervise import worker_context

    worker = worker_context()
    first = worker is None or worker.index == 0  # of serve --workers N, one says it
    if embedder is None and (picked.small or memory_mode != "none") and first:
        off = ["long-term memory is off"] if memory_mode != "none" else []
        off += ["the model is offered every tool"] if picked.small else []
        print(f"({' and '.join(off)}: {embedder_problem()})", file=sys.stderr)
    long_term = None
    if embedder is not None and memory_mode != "none":
        threshold = getattr(args, "recall_threshold", 0.3)
        vectors = db.with_name(db.stem + "-memories.db")
        from goagent_py.cli._memory import chat_decider

        long_term = await long_term_memory(
            vectors,
            embedder,
            closers,
            threshold=None if threshold < 0 else threshold,
            decider=chat_decider("rules", picked.provider, picked.model),  # as the chat's default
        )
    kit = agent_kit(picked, embedder=embedder, system=args.system)  # the agent of chat too

    def factory(ctx: ThreadContext) -> Agent:
        return build_agent(
            kit,
            name=ctx.memory_scope,  # long-term memory is per user, across their threads
            short_term_memory=ctx.short_term_memory,
            long_term_memory=long_term,
            write_policy=write_policy(memory_mode) if long_term is not None else None,
        )

    app = create_app(
        factory,
        storage_path=str(db),
        auth=auth,
        allowed_hosts=tuple(args.allowed_host) + ((args.host,) if args.host != "0.0.0.0" else ()),
        model_name=picked.model,
        long_term_memory=long_term,
    )
    config: Any = uvicorn.Config(
        app,
        host=args.host,
        port=args.port,
        log_level="warning",
        limit_concurrency=getattr(args, "max_connections", 1000),  # uvicorn's default: none
    )
    if worker is not None:  # one of serve --workers N's processes
        try:
            return await serve_in_worker(app, config)
        finally:
            for closer in reversed(closers):
                await closer.aclose()
    try:
        listening = listen_socket(args.host, args.port, backlog=config.backlog)
    except ConfigurationError:
        for closer in reversed(closers):
            await closer.aclose()
        await app.aclose()
        raise
    url = listening_url(args.host, listening)

    def announce() -> None:
        print(
            f"goagent-py serve — provider {picked.name} ({picked.model}); threads in {db}\n"
            f"open {url}/",
            file=sys.stderr,
        )
        if long_term is not None:
            print(f"long-term memory ({memory_mode}) in {vectors}", file=sys.stderr)

    try:
        signalled = await _serve_until_signalled(uvicorn.Server(config), announce, [listening])
    finally:
        listening.close()
        for closer in reversed(closers):
            await closer.aclose()
    return 128 + signalled if signalled else 0  # 130 for Ctrl-C, as the shell reports it


def serve_workers(args: argparse.Namespace, argv: list[str]) -> int:
    """``goagent-py serve --workers N`` (N > 1): bind the socket once, then run the command
    ``argv`` in N worker processes serving it (:mod:`goagent_py.serve._supervise`) until
    SIGINT or SIGTERM; the exit code.

    Raises:
        ConfigurationError: a bad auth option or address (before any worker starts).
    """
    build_auth(args)  # its errors before any worker starts
    try:
        import uvicorn  # noqa: F401
    except ImportError as exc:
        raise MissingExtraError("uvicorn", "serve", feature="goagent-py serve") from exc
    from goagent_py.serve.app import _require_starlette

    _require_starlette()
    from goagent_py.cli._common import listen_socket, listening_url
    from goagent_py.serve._supervise import supervise

    backlog = 2048  # uvicorn.Config's default, what each worker's config has
    with listen_socket(args.host, args.port, backlog=backlog) as listening:
        url = listening_url(args.host, listening)

        def announce(pids: list[int]) -> None:
            print(
                f"goagent-py serve — {len(pids)} worker processes ({', '.join(map(str, pids))})\n"
                f"open {url}/",
                file=sys.stderr,
                flush=True,
            )

        return supervise(
            "goagent_py.cli.main:main",
            argv,
            listening=listening,
            workers=args.workers,
            announce=announce,
        )


async def serve_in_worker(app: Any, config: Any, *, also: Sequence[socket.socket] = ()) -> int:
    """Serve ``app`` (a :class:`~goagent_py.serve.app.ServeApp`) with uvicorn's ``config`` in
    a worker of ``serve --workers N``: on the parent's socket and this worker's private one,
    forwarding requests about threads other workers run (:mod:`goagent_py.serve._cluster`),
    until SIGINT or SIGTERM; the exit code (128 + the signal). ``also``: more listening
    sockets served as the parent's is (tests reach one worker through one)."""
    import uvicorn

    from goagent_py.serve._cluster import Cluster, ClusterApp
    from goagent_py.serve._supervise import ready, worker_context

    ctx = worker_context()
    assert ctx is not None
    cluster = Cluster(ctx)
    try:
        await cluster.attach(app.server)
        private = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        private.bind(cluster.socket_path)
        private.listen(config.backlog)
        public = socket.socket(fileno=ctx.listen_fd)
        config.app = ClusterApp(app, cluster, app.server)
        try:
            signalled = await _serve_until_signalled(
                uvicorn.Server(config), lambda: ready(ctx), [public, private, *also]
            )
        finally:
            private.close()
            public.close()
    finally:
        await cluster.aclose()
    return 128 + signalled if signalled else 0


async def _serve_until_signalled(
    server: Any, announce: Callable[[], None], listening: list[socket.socket] | None = None
) -> int:
    """Run uvicorn's ``server`` until SIGINT or SIGTERM; the signal that ended it, else 0.
    ``announce`` (the address) is called once the handlers are in: a signal sent as soon as
    the address shows ends the server cleanly, never the process by the signal's default.

    A Ctrl-C before this point was the runner's: it cancels the CLI's task, and the cancel lands
    at the task's next ``await``. Were that inside uvicorn's startup, the lifespan task it had
    just started was left waiting and the runner cancelled it too, and uvicorn logged "ERROR:
    Traceback ... CancelledError". So the handlers that stop the server go in first, then one
    ``await`` takes a cancel already pending, before uvicorn starts anything. uvicorn's own
    ``capture_signals`` is not used: it raises the caught signal again once the server is
    done, for the runner to turn into KeyboardInterrupt.
    """
    caught: list[int] = []
    handle_exit = server.handle_exit

    def on_signal(sig: int, frame: Any) -> None:
        caught.append(sig)
        handle_exit(sig, frame)

    server.capture_signals = contextlib.nullcontext
    with _signal_handlers(on_signal):
        announce()
        await asyncio.sleep(0)
        await server.serve(sockets=listening)
    return caught[0] if caught else 0


@contextlib.contextmanager
def _signal_handlers(handler: Callable[[int, Any], None]) -> Iterator[None]:
    """SIGINT and SIGTERM go to ``handler`` (main thread only), the previous ones after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
