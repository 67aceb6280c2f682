"""Command lines whose path option moved pytest's root folder (pure: no pytest).

pytest picks its rootdir from the command line's paths before any plugin's options exist, so the value of
``--rageval-output /abs/dir`` (written with a space) is read as a test path, and can become the root: the
eval-set globs and every relative path then resolve against it. The ``=`` form cannot do that.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Sequence
from pathlib import Path

from .table import path_options

__all__ = ["PATH_OPTIONS", "root_moved_by"]

#: the plugin's options that take a path
PATH_OPTIONS = path_options()


#: files pytest reads its configuration from (the folder of the nearest one is its root)
CONFIG_FILES = ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")


def root_moved_by(args: Sequence[str], paths: Sequence[Path], rootdir: Path) -> str | None:
    """Why ``rootdir`` moved because of a path option written with a space (one line naming the ``=`` form), or
    None. ``args`` is the raw command line, ``paths`` the test paths it names (the invocation folder when none).

    pytest's root is the folder of the nearest configuration file at or above the paths' common folder, else that
    folder. A value outside that folder changed the common folder; the root moved when it is not that one.
    """
    common = Path(os.path.commonpath([str(p.resolve()) for p in paths]))
    expected = next(
        (folder for folder in (common, *common.parents) if any((folder / name).is_file() for name in CONFIG_FILES)),
        common,
    )
    if rootdir.resolve() == expected:
        return None
    for option, value in itertools.pairwise(args):
        if option not in PATH_OPTIONS or value.startswith("-"):
            continue
        folder = Path(value) if Path(value).is_absolute() else paths[0] / value
        try:
            folder = folder.resolve()
            if folder.is_file():
                folder = folder.parent
        except OSError:
            continue
        if folder.exists() and folder != common and common not in folder.parents:
            return (
                f"pytest took the value of {option} ({value}) for a test path and moved its root folder "
                f"(rootdir) to {rootdir}, before this plugin's options were known: write {option}={value}"
            )
    return None
