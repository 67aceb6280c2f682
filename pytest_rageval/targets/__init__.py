"""targets: the system under test: what every client is (protocol), the request and response maps (maps) and
header lines (headers), the HTTP client (http_client) and the Python callable's (callable_client), a
``module:attr`` target imported (target_import), a configured target resolved to a client (resolve), one question
asked for ``rageval inspect`` (inspect_target), its first call and in-flight cap (first_call), a sync callable's daemon thread, the config matrix's
retrieval cache, and framework objects as targets (frameworks/).

Imports the foundations and evaluation; no pytest.
"""
