"""Unit tests of the project as a whole: its layers and imports, docs, README, style, environments and tiers."""
