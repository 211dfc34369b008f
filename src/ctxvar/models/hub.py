"""The Hugging Face Hub: whether it can be used now (decided in seconds rather than after a minute of retries),
which commit a revision names, and where a model's files sit in the cache."""

from __future__ import annotations

import json
import os
import re
import socket
import time
from urllib.parse import urlparse

UNREACHABLE_KEPT_S = 60.0  # how long a failed connection stands for the Hub's answer: one start's revisions
unreachable_since: float | None = None  # when a connection last failed (unavailable_reason)


def offline() -> bool:
    """``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``) as set now, not only at import time."""
    from huggingface_hub import constants

    flag = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    return bool(constants.is_offline_mode()) or flag.upper() in {"1", "ON", "YES", "TRUE"}


def hub_reachable(timeout: float = 5.0) -> bool:
    """Whether a TCP connection to the Hub endpoint (``HF_ENDPOINT``) opens within ``timeout``."""
    from huggingface_hub import constants

    url = urlparse(constants.ENDPOINT)
    try:
        socket.create_connection(
            (url.hostname, url.port or (443 if url.scheme == "https" else 80)), timeout=timeout
        ).close()
        return True
    except OSError:
        return False


def unavailable_reason() -> str | None:
    """Why the Hub cannot be used (offline mode, or no connection), or None if it can. A failed connection stands
    for :data:`UNREACHABLE_KEPT_S`: a start that resolves many revisions tries once, not once each (a name
    that cannot be resolved takes its resolver's timeout every time)."""
    global unreachable_since
    if offline():
        return "HF_HUB_OFFLINE is set"
    if unreachable_since is not None and time.monotonic() - unreachable_since < UNREACHABLE_KEPT_S:
        return "the Hugging Face Hub cannot be reached"
    if not hub_reachable():
        unreachable_since = time.monotonic()
        return "the Hugging Face Hub cannot be reached"
    unreachable_since = None
    return None


def model_file(source: str, filename: str, revision: str = "main") -> str | None:
    """Local path of ``filename`` of a model: in the directory ``source``, else in the HF cache; None if neither has."""
    path = os.path.join(source, filename)
    if not os.path.isfile(path):
        from huggingface_hub import try_to_load_from_cache

        try:
            path = try_to_load_from_cache(source, filename, revision=revision)
        except ValueError:  # not a valid repo id either
            return None
    return path if isinstance(path, str) and os.path.isfile(path) else None


def model_json(source: str, filename: str, revision: str = "main") -> dict | None:
    """``filename`` of a model (see :func:`model_file`) parsed as a JSON object; None if absent or unreadable."""
    path = model_file(source, filename, revision)
    try:
        with open(path, encoding="utf-8") as handle:
            value = json.load(handle)
    except (TypeError, OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


COMMIT = re.compile(r"[0-9a-f]{40}")


def cached_commit(repo_id: str, revision: str = "main", repo_type: str = "model") -> str | None:
    """The commit the HF cache holds for ``revision`` of ``repo_id`` (its ``refs/<revision>`` file), the revision
    itself if it is a full commit hash; None if the cache has no such ref."""
    if COMMIT.fullmatch(revision):
        return revision
    try:
        with open(cached_ref(repo_id, revision, repo_type), encoding="utf-8") as handle:
            commit = handle.read().strip()
    except (OSError, ValueError):
        return None
    return commit if COMMIT.fullmatch(commit) else None


def cached_ref(repo_id: str, revision: str, repo_type: str = "model") -> str:
    """The HF cache's file that names the commit of ``revision`` of ``repo_id`` (``refs/<revision>``)."""
    return os.path.join(repo_folder(repo_id, repo_type), "refs", revision)


def repo_folder(repo_id: str, repo_type: str = "model", cache=None) -> str:
    """The folder of ``repo_id`` in the HF cache (``cache``, else ``HF_HUB_CACHE`` as set now): ``models--org--name``
    holding ``refs/``, ``snapshots/<commit>/`` and ``blobs/``."""
    from huggingface_hub import constants

    return os.path.join(cache or constants.HF_HUB_CACHE, f"{repo_type}s--{repo_id.replace('/', '--')}")


def resolved_commit(
    repo_id: str, revision: str = "main", repo_type: str = "model", recorded: str | None = None
) -> str | None:
    """The commit ``revision`` of ``repo_id`` names now: asked of the Hub when it can be reached, else ``recorded``
    (what an earlier start of the same run found, :func:`ctxvar.run.hf_cache.recorded_commit`), else read from the
    HF cache (:func:`cached_commit`); None when none of them knows it (the job that loads it then says why).
    Nothing is written into the HF cache: a dry run, and the start of each cluster job, leave it as it was."""
    if COMMIT.fullmatch(revision):
        return revision
    if unavailable_reason() is None:
        from huggingface_hub import HfApi

        try:
            info = HfApi().repo_info(repo_id, revision=revision, repo_type=repo_type, timeout=10)
        except Exception:  # not found, gated, a network error: loading names the cause
            info = None
        if info is not None:
            return info.sha if isinstance(info.sha, str) and COMMIT.fullmatch(info.sha) else None
    return (
        recorded
        if isinstance(recorded, str) and COMMIT.fullmatch(recorded)
        else cached_commit(repo_id, revision, repo_type)
    )
