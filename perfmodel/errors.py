"""The one exception type that carries a message meant for a person.

Library code raises PerfModelError for anything a user can cause (bad plan,
unknown preset, impossible configuration); the CLI turns it into a one-line
message and exit code 1, never a traceback.
"""


class PerfModelError(Exception):
    """A user-facing error: the message names the field and the fix."""
