"""The test suite's pytest wiring."""

import httpx

pytest_plugins = ["pytester"]


def _load_httpx_lazily_imported_modules() -> None:
    """Make one refused loopback request so httpx and httpcore load their lazy modules now.

    ``pytester``'s in-process runs restore ``sys.modules`` afterwards: modules first imported inside
    such a run are dropped, and a later import makes new exception classes that httpx's error mapping
    does not know, so a refused connection would escape as a raw ``httpcore.ConnectError``.
    """
    try:
        httpx.get("http://127.0.0.1:9/", timeout=0.5)
    except httpx.HTTPError:
        pass


_load_httpx_lazily_imported_modules()
