"""An example grpo-gym domain: unit conversion (``env.py``) and its pack (``pack/``)."""
