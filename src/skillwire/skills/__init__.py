"""Internal: import the public names from :mod:`skillwire` (the front door); this package may change.

Skills: SKILL.md manifests, JSON Schema validation, templates, the registry and the skill runtime."""
