"""config: the plugin's settings, pytest-free.

``table.py`` declares every setting once (option, ini key, type, default, help); ``settings.py`` resolves
them into one frozen ``Settings``; ``pyproject.py`` finds and checks the ``[tool.rageval]`` table of
pyproject.toml; ``rootdir_check.py`` spots a path option that moved pytest's root folder.
"""
