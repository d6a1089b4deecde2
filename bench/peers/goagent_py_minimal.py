"""peerbench: goagent_py on `MinimalProvider` (see goagent_py.py), as a worker of its own.

The same script as goagent_py.py with PEERBENCH_GOAGENT_PROVIDER=minimal, so one interleaved run
measures both fakes side by side: `run_all.sh goagent_py goagent_py_minimal ...`. Its record is
framework "goagent_py-minimal"; ratios in RESULTS.md stay against the ScriptedProvider row.
"""

import os
import runpy
from pathlib import Path

os.environ["PEERBENCH_GOAGENT_PROVIDER"] = "minimal"
runpy.run_path(str(Path(__file__).with_name("goagent_py.py")), run_name="__main__")
