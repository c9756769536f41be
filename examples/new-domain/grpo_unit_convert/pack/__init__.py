"""The "unit-conversion" pack: this folder holds ``pack.toml`` and its JSONL splits."""
