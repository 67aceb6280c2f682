"""targets: the system under test: the HTTP and callable RAG clients, a configured target resolved to a client
(resolve), its first call and in-flight cap (first_call), a sync callable's daemon thread, the config matrix's
retrieval cache, and framework objects as targets (frameworks/).

Imports the foundations and evaluation; no pytest.
"""
