"""The package's version, in the lowest layer: every stamp that names it imports it from here."""

__version__ = "0.1.0"
