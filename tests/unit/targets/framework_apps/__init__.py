"""RAG apps built with the real frameworks over the bundled demo corpus, named as targets by the framework tests."""
