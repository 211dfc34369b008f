"""Integration tests of the package's reliability across its subpackages: every guard, and hostile inputs."""
