"""Pure data and rules of the A2A protocol: models, the task-state table, operations, versions."""
