"""The threading HTTP server under the loopback test servers."""

from __future__ import annotations

import sys
from http.server import ThreadingHTTPServer
from typing import Any


class LoopbackServer(ThreadingHTTPServer):
    """A loopback server for bursts of concurrent clients, quiet when a cancelled client hangs up."""

    request_queue_size = 128  # the default (5) stalls bursts of concurrent connects for a second
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up (a cancelled case) is expected; anything else is printed as usual."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)
