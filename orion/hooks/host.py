"""The host under one name: requests, tool contexts and turns carry it as ``host``, as the hooks
receive it. ``runtime``, its name before 0.2.0, still reads the same object, with a warning,
until 0.3.0."""

from __future__ import annotations

import warnings
from typing import Any


def runtime_alias() -> Any:
    """A read-only ``runtime`` attribute that is ``host``, with a DeprecationWarning."""

    def read(self: Any) -> Any:
        warnings.warn(f"{type(self).__name__}.runtime is now .host (the same object); "
                      ".runtime goes in 0.3.0", DeprecationWarning, stacklevel=2)
        return self.host

    return property(read, doc="The host under its name before 0.2.0 (deprecated).")
