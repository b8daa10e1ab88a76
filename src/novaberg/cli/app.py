"""The ``novaberg`` command. Heavy modules load inside the commands, so start-up stays fast."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from typer.core import TyperCommand

from novaberg import __version__
from novaberg.cli.memory import app as memory_app
from novaberg.cli.proactive_cmd import app as proactive_app
from novaberg.cli.users_cmd import app as users_app

app = typer.Typer(
    name="novaberg",
    help="Nova, a local-first AI companion that talks with you and remembers you.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

UserOpt = Annotated[
    str | None, typer.Option("--user", "-u", help="Whose conversation and memory (NOVABERG_USER).")
]
VerboseOpt = Annotated[bool, typer.Option("--verbose", "-v", help="Log what happens to stderr.")]


def _version(value: bool) -> None:
    if value:
        typer.echo(f"novaberg {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version.")
    ] = False,
) -> None:
    """Nova, a local-first AI companion that talks with you and remembers you."""


@app.command()
def chat(
    conversation: Annotated[
        int | None, typer.Option("--conversation", "-c", help="Continue this conversation id.")
    ] = None,
    resume: Annotated[
        bool, typer.Option("--resume", "-r", help="Continue your latest conversation.")
    ] = False,
    user: UserOpt = None,
    verbose: VerboseOpt = False,
) -> None:
    """Talk with Nova: a streamed reply per message, a live line shows the running node.

    Type /new for a new conversation, /exit (or Ctrl-D) to leave. Ctrl-C during a reply aborts
    that turn (recorded as aborted, nothing half-stored); the next message works as usual.
    """
    from novaberg.cli.chat import run_chat

    run_chat(conversation=conversation, resume=resume, user=user, verbose=verbose)


@app.command()
def ask(
    text: Annotated[str, typer.Argument(help="The message for Nova.")],
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the turn as one JSON object (the contract).")
    ] = False,
    conversation: Annotated[
        int | None, typer.Option("--conversation", "-c", help="Continue this conversation id.")
    ] = None,
    user: UserOpt = None,
    verbose: VerboseOpt = False,
) -> None:
    """Run one turn and print Nova's reply (or, with --json, the whole turn record)."""
    from novaberg.cli.ask import run_ask

    run_ask(text, as_json=as_json, conversation=conversation, user=user, verbose=verbose)


@app.command()
def doctor(
    as_json: Annotated[bool, typer.Option("--json", help="Print the findings as JSON.")] = False,
) -> None:
    """Which backend would answer, is it reachable, the model's capabilities, what to fix."""
    from novaberg.cli.doctor import run_doctor

    run_doctor(as_json=as_json)


@app.command("eval")
def eval_cmd(
    as_json: Annotated[bool, typer.Option("--json", help="Print the rows as JSON.")] = False,
    scenario: Annotated[
        list[str] | None,
        typer.Option("--scenario", "-s", help="Run only this scenario (repeatable)."),
    ] = None,
    verbose: VerboseOpt = False,
) -> None:
    """Reproduce the seed's contamination table on the configured backend.

    Scenarios: appointment (stressed profile + tomorrow's birthday), knowledge (a plain
    question), personal_data (the user's own appointment), overwhelmed (salience of a stressed
    message), drift (a worry in the profile must not enter an unrelated answer). Each runs one
    turn in a temporary NOVABERG_HOME and reports rounds, calls, wall time, votes and salience
    beside the seed's before/after figures. Needs a capable model to mean much.
    """
    from novaberg.cli.eval_cmd import run_eval

    run_eval(as_json=as_json, only=scenario, verbose=verbose)


class SettingsHelp(TyperCommand):
    """``config --help`` lists every setting, generated from the settings model when asked
    (so that start-up does not load it)."""

    def format_help(self, ctx: Any, formatter: Any) -> None:  # click's, vendored by Typer
        from novaberg.cli.config_cmd import help_text

        self.help = help_text()
        super().format_help(ctx, formatter)


@app.command("config", cls=SettingsHelp)
def config_cmd(
    as_json: Annotated[bool, typer.Option("--json", help="Print the settings as JSON.")] = False,
) -> None:
    """Show the effective settings, where each came from and what each means."""
    from novaberg.cli.config_cmd import run_config

    run_config(as_json=as_json)


@app.command()
def stats(
    since: Annotated[
        str, typer.Option("--since", help="The window: 7d, 24h or 30m (days, hours, minutes).")
    ] = "7d",
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the figures as one JSON object.")
    ] = False,
    user: Annotated[
        str | None, typer.Option("--user", "-u", help="Only this user's turns (default: all).")
    ] = None,
) -> None:
    """How often each defence fired, over the recorded calls, turns and events.

    Per caller and backend the calls, p50/p95 latency and outcomes; follow-up calls, last
    resorts, corrections per judge, turns by status and background jobs by outcome."""
    from novaberg.cli.stats_cmd import run_stats

    run_stats(since=since, as_json=as_json, user=user)


@app.command()
def probe(
    model: Annotated[
        str | None, typer.Option("--model", "-m", help="The model to probe (default: configured).")
    ] = None,
    backend: Annotated[
        str | None,
        typer.Option("--backend", help="ollama or openai (default: the configured backend)."),
    ] = None,
    trials: Annotated[
        int, typer.Option("--trials", "-n", min=1, max=1000, help="Trials per condition.")
    ] = 20,
    timeout: Annotated[
        float, typer.Option("--timeout", min=1.0, help="Seconds each request may take, at most.")
    ] = 120.0,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the findings as one JSON object (the contract).")
    ] = False,
    verbose: VerboseOpt = False,
) -> None:
    """Measure your model server's quirks before trusting it.

    The think/content split, dropped tool calls, structured output, silent prompt truncation,
    the think flag, latency. Prints a verdict per fault and stores the run; exits 1 only when
    the server cannot be probed at all."""
    from novaberg.cli.probe_cmd import run_probe_cmd

    run_probe_cmd(
        backend=backend,
        model=model,
        trials=trials,
        timeout_s=timeout,
        as_json=as_json,
        verbose=verbose,
    )


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port (0: any free port).")] = 8484,
    verbose: VerboseOpt = False,
) -> None:
    """Serve Nova over HTTP: an OpenAI-compatible /v1 for front-ends and programs.

    Every /v1 request needs Authorization: Bearer KEY (novaberg users add NAME) and runs as
    that key's user. GET /healthz and /readyz need no key. With the voice extra, Nova hears
    and speaks there too: POST /v1/audio/transcriptions and /v1/audio/speech (Open WebUI's
    Audio settings: engine OpenAI, base URL this server's /v1, a key)."""
    from novaberg.cli.serve_cmd import run_serve

    run_serve(host=host, port=port, verbose=verbose)


@app.command()
def mcp(user: UserOpt = None, verbose: VerboseOpt = False) -> None:
    """Serve Nova's memory and turns to an MCP client over stdin/stdout, as one user.

    For Claude Desktop, Cursor, LM Studio and agent hosts that start a local server: tools
    recall, remember, forget, correct, retract, timeline, profile and talk, and resources
    nova://profile and nova://timeline (README: MCP). Over HTTP the same are at /mcp on
    `novaberg serve`, the key deciding the user."""
    from novaberg.cli.mcp_cmd import run_mcp

    run_mcp(user=user, verbose=verbose)


@app.command()
def worker(verbose: VerboseOpt = False) -> None:
    """Run memory jobs and second passes from the shared database, without serving HTTP.

    Beside one or more `novaberg serve` processes on one PostgreSQL database (each job runs
    once); stops on SIGTERM or Ctrl-C."""
    from novaberg.cli.worker_cmd import run_worker

    run_worker(verbose=verbose)


@app.command("import-chats")
def import_chats(
    file: Annotated[str, typer.Argument(help="The export file.")],
    fmt: Annotated[
        str,
        typer.Option(
            "--format", help="auto | openwebui | sillytavern | chatgpt | plain (see the README)."
        ),
    ] = "auto",
    remember: Annotated[
        bool,
        typer.Option(
            "--remember",
            help="Also weigh your imported messages (salience) and run the memory jobs over "
            "those worth remembering, at background priority; the cost in model calls is "
            "printed first. Not on the embedded model. Interrupted: run it again to go on.",
        ),
    ] = False,
    user: UserOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Bring your chats from Open WebUI, SillyTavern or ChatGPT: each becomes a conversation,
    found by its words as Nova's own history (checked whole first; importing twice adds
    nothing)."""
    from novaberg.cli.import_cmd import run_import

    run_import(file, fmt, user, remember, as_json)


@app.command("test-server")
def test_server(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port (0: any free port).")] = 11435,
    delay_ms: Annotated[float, typer.Option(help="Delay before every chat answer.")] = 0.0,
    reasoning_style: Annotated[
        str, typer.Option(help="/v1 thinking as: reasoning | reasoning_content | think_tags")
    ] = "reasoning",
) -> None:
    """Run the Ollama-protocol test server (scriptable, fault-injecting) for your own tests."""
    from novaberg.cli.test_server import run_test_server

    run_test_server(host=host, port=port, delay_ms=delay_ms, reasoning_style=reasoning_style)


app.add_typer(memory_app, name="memory")
app.add_typer(proactive_app, name="proactive")
app.add_typer(users_app, name="users")


def main() -> None:
    app()
