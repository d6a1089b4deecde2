"""``python -m goagent_py`` runs the ``goagent-py`` command."""

import sys

from goagent_py.cli.main import main

sys.exit(main())
