# models.smk's wildcard constraints and the Gaussian null's type keying.


def models_made_by(rule):
    """A wildcard constraint matching the ids of the models whose kind ``rule`` makes (and nothing when none)."""
    ids = [mid for mid, entry in MODELS.items() if kind_of(entry).made_by == rule]
    return "|".join(map(re.escape, ids)) or "(?!)"


def type_keying(wildcards):
    """tokens.merge_markers and the rule that keys token types (a new rule rebuilds the model), for the Gaussian
    null, whose per-type means follow the types."""
    if not kind_of(MODELS[wildcards.model]).type_keyed:
        return None
    return {"merge_markers": config["tokens"]["merge_markers"], "rule": TYPE_KEY_RULE}


def digest_mem_mb(wildcards, attempt):
    """The weight digest's host memory, from the model's shape."""
    return estimates.digest_mem_mb(estimates.model_shape(MODELS[wildcards.model], model_source(wildcards)), attempt)


def digest_runtime(wildcards, attempt):
    """The weight digest's minutes: a Hub checkpoint's download and one read of its files."""
    shape = estimates.model_shape(MODELS[wildcards.model], model_source(wildcards))
    return estimates.digest_runtime_min(shape, attempt)
