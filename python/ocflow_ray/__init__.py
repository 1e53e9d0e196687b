"""The Ray engine of ``ocflow batch`` (``python -m ocflow_ray``): one Ray task per flow, scheduled
across a Ray cluster. A package of its own, apart from the operation library a step runs: it needs
only the standard library and ``ray``, and ships its code to the workers by value. The protocol
and the runner are in :mod:`ocflow_ray.runner`."""
