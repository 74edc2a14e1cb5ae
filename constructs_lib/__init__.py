"""Reusable constructs with typed props. Stacks in ``stacks/`` only compose these."""
