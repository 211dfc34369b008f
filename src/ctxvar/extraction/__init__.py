"""Extraction: one model's float64 sums over one shard, on the device."""
