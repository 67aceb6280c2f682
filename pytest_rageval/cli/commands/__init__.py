"""The ``rageval`` commands, one module each: ``add_parser(sub)`` defines the command's sub-parser (its
arguments, help and ``run`` as ``func``) and ``run(args)`` does it, returning the exit status.

Every module is light to import (the standard library and ``cli.common`` at the top), so building the parser
for ``rageval --help`` loads no command's work: ``run`` imports it, from the subpackages or from the larger
commands' modules in ``cli/`` (rejudge, merge, rescore, label, inspect_target).
"""
