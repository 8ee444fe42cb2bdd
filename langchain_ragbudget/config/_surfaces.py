"""The surface used when none is named, in a module that imports nothing.

The command line's parser shows it in `ragbudget ask --help`; reading it from here
keeps `ragbudget --help` from loading the configuration models.
"""

DEFAULT_SURFACE = "chat"
"""The surface used when none is named, and the one a new surface inherits from."""
