"""``python -m ocflow_ray``: the runner ``ocflow batch --engine ray`` starts."""

import sys

from ocflow_ray.runner import main

sys.exit(main())
