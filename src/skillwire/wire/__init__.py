"""Internal: import the public names from :mod:`skillwire` (the front door); this package may change.

Sans-IO codecs: bytes in, values out. Nothing here imports a web framework."""
