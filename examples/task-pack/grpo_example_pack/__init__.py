"""The "example" task pack: this package's folder holds ``pack.toml`` and its JSONL splits."""
