"""The loopback chat-completions endpoint of Orion's tests: it ships with the step library now
(:mod:`orion.testing.sse_server`, whose docstring documents it), so a team's features can use
it too; the tests import it from here as before."""

from orion.testing.sse_server import *  # noqa: F401,F403
from orion.testing.sse_server import OMIT, sse_server  # noqa: F401
