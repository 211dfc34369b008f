"""A model's weight hash made once, by a CPU job of its own, for all of its extraction jobs.

Rule ``digest_weights`` hashes the files an extraction job loads the model from (:func:`digest_weights`: the
model built on ``meta``, so that the Hub's files are downloaded as ``from_pretrained`` would, and no tensor is
read into memory) and records, beside the hash, each file's state (:func:`ctxvar.models.hashing.file_state`). An
extraction job that loaded its model from files in the recorded states takes the recorded hash
(:func:`recorded_sha256`) and reads no weight a second time; one whose files differ in any way (another path,
inode, size, mtime or ctime: a file replaced, written to or downloaded anew) hashes what it loaded itself, as a job
without a digest does, so a partial's ``weights_sha256`` always names the files its model was loaded from.
"""

from __future__ import annotations

import logging

import torch

from ctxvar.errors import CtxvarError, first_line
from ctxvar.files.atomic import read_json, write_json
from ctxvar.models import hashing, loading

log = logging.getLogger(__name__)

META = torch.device("meta")
# The parts of hashing.file_state a digest compares: not the device number, which a network file system numbers
# per client (the digest and the extraction may run on different nodes of a cluster).
COMPARED = slice(1, None)


def digest_weights(entry: dict, source: str, out_path, threads: int = 1) -> dict:
    """Hash the weight files the extraction jobs of model ``entry`` load it from (``source``: Hub id or folder)
    and write ``{"model_id", "source", "weights_sha256", "files": [{"path", "state"}], "why"}`` to ``out_path``
    (:func:`ctxvar.files.atomic.write_json`: written whole or not at all, with its checksum). ``state``: inode,
    size, mtime_ns and ctime_ns of the file when it was hashed. The hash does not depend on the job's dtype (a key
    of the partials of its own). A model this job cannot hash (a model class that cannot be built on ``meta``, a
    download that fails) gets ``weights_sha256`` null and the reason in ``why``: its extraction jobs, which load
    it as they always do, hash it themselves (and report what stops them). Returns the record."""
    record = {"model_id": entry["id"], "source": source, "weights_sha256": None, "files": [], "why": None}
    try:
        model = loading.load_model(entry, source, "float32", META)  # downloads and checks the files, reads no tensor
        files = hashing.weight_files(entry, source, model)
        record["weights_sha256"] = hashing.weights_sha256(files, threads)
        record["files"] = [
            {"path": path, "state": list(state[COMPARED])} for path, state in zip(files.paths, files.states)
        ]
    except Exception as error:  # the extraction jobs hash the weights themselves, and name what stops them
        record["why"] = first_line(error)
        log.warning(
            "model %r: the weights were not hashed here (%s); its extraction jobs hash them", entry["id"], record["why"]
        )
    write_json(record, out_path)
    log.info("model %r: weights %s, from %d file(s)", entry["id"], record["weights_sha256"], len(record["files"]))
    return record


def recorded_sha256(digest_path, files: hashing.WeightFiles) -> str | None:
    """The ``weights_sha256`` of the digest at ``digest_path`` when it was made from ``files`` as they are (the
    same paths in the same order, each in the same state but for the device number); None otherwise, the log
    saying why (the job then hashes its files itself)."""
    try:
        record = read_json(digest_path)
        recorded = [(item["path"], tuple(item["state"])) for item in record["files"]]
        digest = record["weights_sha256"]
    except (CtxvarError, ValueError, KeyError, TypeError) as error:
        log.warning(
            "%s: the weight digest %s cannot be used (%s); hashing the weights here", files.what, digest_path, error
        )
        return None
    if digest is None:
        log.info("%s: %s holds no hash (%s); hashing the weights here", files.what, digest_path, record.get("why"))
        return None
    loaded = [(path, state[COMPARED]) for path, state in zip(files.paths, files.states)]
    if recorded != loaded:
        changed = sorted({path for path, _ in set(recorded) ^ set(loaded)})
        log.warning(
            "%s: the weight files changed since %s hashed them (%s: replaced, written to or downloaded anew); "
            "hashing the weights here",
            files.what,
            digest_path,
            ", ".join(changed),
        )
        return None
    return digest
