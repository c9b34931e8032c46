import os
import sys

# `python -m ckptlint` puts the working directory first on sys.path, so a click.py or json.py of the
# linted project would be imported, and run, in place of ckptlint's own. Linting never imports the
# project (Python's -P semantics); --confirm puts the project on sys.path itself, in its own processes.
if sys.path and os.path.abspath(sys.path[0] or os.curdir) == os.getcwd():
    del sys.path[0]

from ckptlint.cli import main  # noqa: E402

main()
