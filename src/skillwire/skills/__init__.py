"""Skills: SKILL.md manifests, JSON Schema validation, templates, the registry and the skill runtime."""
