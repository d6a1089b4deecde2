"""``python -m goagent_py`` runs the ``goagent-py`` command."""

import sys

try:  # a Ctrl-C while the command imports ends it as one during a turn does: 130
    from goagent_py.cli.main import main
except KeyboardInterrupt:
    sys.exit(130)

sys.exit(main())
