"""`clustersim serve [--host 127.0.0.1] [--port 8765] [--out DIR]`: the local what-if web app."""

from __future__ import annotations

import errno
import ipaddress
import socket
from pathlib import Path

import click

from clustersim.errors import InputError
from clustersim.hardware.load import add_profile_file
from clustersim.output_file import check_output_path

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
DEFAULT_OUT = "clustersim-serve"


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _check_bind(host: str, port: int) -> None:
    """Refuse (exit 2) an address that cannot be bound, before uvicorn starts."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise InputError("--host", host, f"an address or host name of this machine ({exc})") from None
    family, kind, proto, _, addr = infos[0]
    with socket.socket(family, kind, proto) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(addr)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise InputError("--port", port, f"a free port ({exc.strerror})") from None
            raise InputError("--host", host, f"an address this machine can listen on ({exc.strerror or exc})") from None


def _check_out(out: str) -> Path:
    p = Path(out)
    if p.exists() and not p.is_dir():
        raise InputError("--out", out, "a folder (this is a file)")
    parent = p.resolve().parent
    if not p.exists() and not parent.is_dir():
        raise InputError("--out", out, "a folder in an existing directory")
    try:   # a folder where no page can be saved (/proc, /sys, read-only) is refused now, not at "Save"
        check_output_path(p / "page.html", "--out")
    except InputError as exc:
        raise InputError("--out", out, f"a folder where pages can be saved ({exc.allowed})") from None
    return p


def _scenarios_dir() -> Path | None:
    """The source checkout's scenarios/ folder, if clustersim runs from one."""
    folder = Path(__file__).resolve().parents[2] / "scenarios"
    return folder if folder.is_dir() else None


@click.command("serve")
@click.option("--host", default=DEFAULT_HOST, show_default=True,
              help="Address to listen on. Anything but loopback lets other machines use the app.")
@click.option("--port", type=click.IntRange(1, 65535), default=DEFAULT_PORT, show_default=True)
@click.option("--out", default=DEFAULT_OUT, show_default=True, type=click.Path(file_okay=False),
              help="The folder where 'Save to folder' writes scenarios and reports (and nowhere else).")
@click.option("--profile", "profiles", multiple=True, type=click.Path(dir_okay=False),
              help="Extra hardware profile YAML (as for `clustersim run`).")
def serve(host: str, port: int, out: str, profiles: tuple[str, ...]) -> None:
    """Start the local what-if web app: pick a model, a cluster and a layout, move the sliders."""
    try:
        import uvicorn

        from clustersim.serve.app import LOOPBACK_HOSTS, create_app
    except ImportError as exc:  # the serve extra is not installed
        raise InputError("serve", f"without {exc.name or 'starlette and uvicorn'}",
                         "the web app's packages (starlette, uvicorn): pip install 'clustersim[serve]'") from None
    for p in profiles:
        add_profile_file(p)
    out_dir = _check_out(out)
    _check_bind(host, port)
    loopback = _is_loopback(host)
    if not loopback:
        click.echo(f"warning: listening on {host}: anyone who can reach this machine on port {port} can use the app",
                   err=True)
    hosts = list(LOOPBACK_HOSTS) if loopback else ["*"]
    app = create_app(out_dir, _scenarios_dir(), allowed_hosts=hosts)
    shown = f"[{host}]" if ":" in host else host
    click.echo(f"clustersim serve: http://{shown}:{port}/  (output folder {out_dir.resolve()}; Ctrl-C stops)",
               err=True)
    uvicorn.run(app, host=host, port=port, log_level="warning", server_header=False, access_log=False)
