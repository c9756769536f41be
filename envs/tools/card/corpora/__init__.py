"""The report card's shipped corpora (JSONL files; a package so that a wheel carries them)."""
