"""Statistics: sums files, the exact merge, per-type Q/M/V, per-layer statistics, geometry and TwoNN."""
