"""Sans-IO codecs: bytes in, values out. Nothing here imports a web framework."""
