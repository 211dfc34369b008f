"""What an output's metadata records of the software and the machine (ctxvar.versions): the installed version of
each package listed, torch's own full version and what it was built with, and the device's name."""

from __future__ import annotations

import platform
from importlib import metadata

import torch

from ctxvar import versions


def test_package_versions_name_python_every_package_and_torchs_build():
    found = versions.package_versions()
    assert set(found) == {"python", *versions.PACKAGES, "cuda", "cudnn"}
    assert found["python"] == platform.python_version()
    assert found["numpy"] == metadata.version("numpy")
    assert found["torch"] == torch.__version__  # with its build tag, which the distribution's metadata may lack
    assert found["cuda"] == (torch.version.cuda or "none")
    assert all(isinstance(value, str) and value for value in found.values())


def test_a_package_that_is_not_installed_is_recorded_as_such(monkeypatch):
    monkeypatch.setattr(versions, "PACKAGES", ("numpy", "no-such-package-of-ctxvar"))
    found = versions.package_versions()
    assert found["no-such-package-of-ctxvar"] == "not installed" and found["numpy"] == metadata.version("numpy")


def test_a_cpu_device_is_named_by_the_hosts_processor():
    name = versions.device_name(torch.device("cpu"))
    assert name == (platform.processor() or platform.machine() or "cpu") and name
