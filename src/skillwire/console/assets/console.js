// skillwire console (placeholder, being written)
