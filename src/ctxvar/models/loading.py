"""Load models and tokenizers the way Hugging Face users do, with one-line errors.

``from_pretrained`` with an explicit ``revision``, ``dtype`` and
``trust_remote_code`` (False unless the config says so per model). The HF cache
and ``HF_HUB_OFFLINE`` apply. A Hub id that is neither cached nor reachable fails
at once instead of retrying for a minute.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re

import torch

from ctxvar.config.entries import load_revision
from ctxvar.errors import ModelLoadError, first_line
from ctxvar.models import completeness, hub
from ctxvar.models.gaussian_null_config import register_config
from ctxvar.models.load_errors import load_error
from ctxvar.models.transformers_log import transformers_into_log

log = logging.getLogger(__name__)

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
# Models whose position ids start after the padding index (RoBERTa-style).
PADDING_OFFSET_POSITIONS = {"roberta", "xlm-roberta", "camembert", "xlm-roberta-xl"}


def resolve_device(device: str) -> torch.device:
    """``auto`` → CUDA if available, else CPU. Asking for CUDA without one is an error."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise ModelLoadError("device: 'cuda' requested but torch sees no CUDA device; set device: auto or cpu")
    return torch.device(device)


def load(entry: dict, source: str, dtype: str, device: torch.device):
    """``(tokenizer, model)`` for a model entry; ``source`` is a Hub id or a local directory. Both are whole
    and fit each other, or :class:`ModelLoadError` says why (see :mod:`ctxvar.models.completeness`)."""
    tokenizer, model = load_tokenizer(entry, source), load_model(entry, source, dtype, device)
    check_tokenizer_fits(tokenizer, model, entry, source)
    return tokenizer, model


def described(entry: dict, source: str) -> str:
    """How errors name a model: ``model 'id' (source)``."""
    return f"model {entry['id']!r} ({source})"


def use_safetensors() -> bool | None:
    """``from_pretrained``'s ``use_safetensors``: None (safetensors where the checkpoint has them, else a
    ``pytorch_model.bin`` checkpoint read by torch's weights-only unpickler, which runs no code the file names:
    transformers' own order) with a torch whose weights-only unpickler transformers trusts (2.6 or later), else
    True: an older torch's unpickler can be made to run code (CVE-2025-32434)."""
    from ctxvar.models.hashing import weights_only_is_safe

    return None if weights_only_is_safe() else True


def torch_kernels_only() -> dict:
    """``from_pretrained``'s ``use_kernels=False`` where the installed transformers takes it (it does from the
    release that added Hub kernels, and from 5.x on it turns them on by default when the ``kernels`` package is
    installed): the model's own torch code, never layers replaced by kernels fetched from the Hub, which change the
    numbers, need the network and refuse a model built on ``meta``. Nothing on a transformers without them."""
    from transformers import PreTrainedModel

    return {"use_kernels": False} if hasattr(PreTrainedModel, "set_use_kernels") else {}


def _options(entry: dict, source: str) -> dict:
    options = {
        "revision": load_revision(entry),
        "trust_remote_code": bool(entry.get("trust_remote_code", False)),
    }
    if os.path.isdir(source):
        options.pop("revision")
    return options


def load_tokenizer(entry: dict, source: str):
    from transformers import AutoTokenizer

    tokenizer = _from_pretrained(AutoTokenizer, source, entry, _options(entry, source))
    custom_code_warning(entry, source, "tokenizer_config.json", tokenizer)
    revision = load_revision(entry)
    found = [name for name in completeness.tokenizer_file_names(tokenizer) if hub.model_file(source, name, revision)]
    completeness.check_tokenizer_files(tokenizer, found, described(entry, source))
    return tokenizer


def check_tokenizer_fits(tokenizer, model, entry: dict, source: str) -> None:
    """Refuse a tokenizer whose ids do not fit the model's embedding (see :mod:`ctxvar.models.completeness`)."""
    completeness.check_tokenizer_fits(tokenizer, model, described(entry, source))


def load_config(entry: dict, source: str):
    """The model's config (its config.json), as :func:`load_model` builds the model from."""
    from transformers import AutoConfig

    return _from_pretrained(AutoConfig, source, entry, _options(entry, source))


def load_model(entry: dict, source: str, dtype: str, device: torch.device):
    """The model in eval mode on ``device``, in ``dtype``, built from every tensor it needs and nothing else.

    ``device_map`` makes transformers build the model on the meta device (no random
    initialisation) and copy each tensor of the (possibly sharded) safetensors files
    straight to ``device`` in ``dtype``: the host never holds a copy of the model.
    A pooler is not built where the class allows (``add_pooling_layer=False``), and
    transformers' loading report is read: a tensor missing, of another shape, or of a
    layer the config does not build stops the job (:mod:`ctxvar.models.completeness`).
    """
    from transformers import AutoModel

    what = described(entry, source)
    config = checked_config(entry, source)
    options = {
        "config": config,
        "dtype": DTYPES[dtype],
        "use_safetensors": use_safetensors(),
        "device_map": {"": str(device)},
        "output_loading_info": True,
        "ignore_mismatched_sizes": True,  # reported as mismatched_keys and refused below, with their shapes
        **pooler_option(config),
        **torch_kernels_only(),
    }
    with transformers_into_log():
        model, info = _from_pretrained(AutoModel, source, entry, {**_options(entry, source), **options})
    completeness.check_loaded_whole(model, info, what)
    custom_code_warning(entry, source, "config.json", model)
    return model.eval()


def checked_config(entry: dict, source: str):
    """The config :func:`load_model` builds the model from, once a model directory's weight files are not
    ambiguous (:func:`ctxvar.models.completeness.check_checkpoint_files`); an encoder-decoder is refused."""
    if os.path.isdir(source):
        completeness.check_checkpoint_files(source, described(entry, source))
    config = load_config(entry, source)
    if getattr(config, "is_encoder_decoder", False):
        raise ModelLoadError(
            f"model {entry['id']!r} is an encoder-decoder ({config.model_type}); its forward pass has no single "
            "stack of hidden states per token: use an encoder or decoder model"
        )
    return config


def pooler_option(config) -> dict:
    """``add_pooling_layer=False`` where the class takes it (:func:`builds_pooler_optionally`), else nothing."""
    return {"add_pooling_layer": False} if builds_pooler_optionally(config) else {}


def empty_model(entry: dict, source: str, dtype: str):
    """The model :func:`load_model` builds, in eval mode, with no weight read: every parameter on the ``meta``
    device in ``dtype``, the buffers real (on the CPU) and computed by the model's own code (rotary
    ``inv_freq``, position ids), as accelerate's ``init_empty_weights(include_buffers=False)`` builds them.
    Its parameters are filled from the files by :mod:`ctxvar.extraction.streamed_weights`."""
    from transformers import AutoModel

    config = checked_config(entry, source)
    trust = {"trust_remote_code": True} if entry.get("trust_remote_code") else {}
    try:
        return empty_from_config(config, dtype, **trust)
    except Exception as error:  # transformers raises many types; all mean "cannot build"
        raise load_error(described(entry, source), source, AutoModel, error) from error


def empty_from_config(config, dtype: str, **options):
    """:func:`empty_model`'s model built from a transformers ``config`` (``options``: ``from_config``'s own, such
    as ``trust_remote_code``): what a job's model holds, sized with no weight read and no file."""
    from accelerate import init_empty_weights
    from transformers import AutoModel

    register_null_model()
    with init_empty_weights(include_buffers=False), transformers_into_log():
        model = AutoModel.from_config(config, dtype=DTYPES[dtype], **pooler_option(config), **options)
    keep_in_float32(model, DTYPES[dtype])
    return model.eval()


def keep_in_float32(model, dtype: torch.dtype) -> None:
    """Cast to float32, in place, the tensors of ``model``'s ``state_dict`` that ``from_pretrained`` loads in
    float32 whatever ``dtype`` (the class's ``_keep_in_fp32_modules`` in float16, ``_keep_in_fp32_modules_strict``
    in float16 and bfloat16: its dtype plan, whose patterns it searches in each key). ``from_config`` does not:
    without this, a model built on ``meta`` would hold (and read streamed weights into) another dtype than the
    model loaded whole, and give other numbers."""
    plan = getattr(model, "_get_dtype_plan", lambda _: {})(dtype)
    patterns = [re.compile(pattern.replace("*", ".*")) for pattern, kept in plan.items() if kept == torch.float32]
    for name, tensor in model.state_dict(keep_vars=True).items():
        if not tensor.is_floating_point() or tensor.dtype == torch.float32:
            continue
        if not any(pattern.search(name) for pattern in patterns):
            continue
        owner, _, leaf = name.rpartition(".")
        module = model.get_submodule(owner)
        if leaf in module._parameters:
            module._parameters[leaf] = torch.nn.Parameter(tensor.detach().to(torch.float32), requires_grad=False)
        else:
            module._buffers[leaf] = tensor.to(torch.float32)


def load_with_head(entry: dict, source: str, dtype: str, alone: str | None = None):
    """``(model, loading report)``: the model with its language-modelling head, on the CPU in ``dtype``, in eval
    mode, for its input and output embedding matrices (``get_input_embeddings``, ``get_output_embeddings``).

    The head class is the causal- or masked-LM class that config.json's ``architectures`` names (the class the
    files were saved from). A checkpoint saved without a head (``BertModel``, a sentence encoder) holds no output
    matrix: it is loaded as the base model, whose output matrix is None, even where its config ties one to the
    input matrix. The loading report is read: an embedding matrix missing from the files, or a tensor of
    another shape (transformers would initialise either at random), stops the job
    (:func:`ctxvar.models.completeness.check_matrices_loaded`; ``alone``: why the matrices were not read alone,
    which names the cause when an embedding matrix has another row count than config.json builds).
    """
    from transformers import AutoConfig

    what = described(entry, source)
    if os.path.isdir(source):
        completeness.check_checkpoint_files(source, what)
    config = _from_pretrained(AutoConfig, source, entry, _options(entry, source))
    model_class = head_class(config, what)
    options = {
        "config": config,
        "dtype": DTYPES[dtype],
        "use_safetensors": use_safetensors(),
        "device_map": {"": "cpu"},
        "output_loading_info": True,
        "ignore_mismatched_sizes": True,  # reported as mismatched_keys and refused below, with their shapes
        **torch_kernels_only(),
    }
    with transformers_into_log():
        model, info = _from_pretrained(model_class, source, entry, {**_options(entry, source), **options})
    completeness.check_matrices_loaded(model, info, what, alone)
    return model.eval(), info


def head_class(config, what: str):
    """The class :func:`load_with_head` builds a model of ``config`` with: the causal- or masked-LM class of
    transformers that config.json's ``architectures`` names (the class the files were saved from), else the base
    model class (``AutoModel``: no output matrix), which the log says."""
    from transformers import AutoModel, AutoModelForCausalLM, AutoModelForMaskedLM

    saved_as = getattr(config, "architectures", None) or ()
    named = [
        cls
        for cls in (AutoModelForCausalLM, AutoModelForMaskedLM)
        if type(config) in cls._model_mapping and cls._model_mapping[type(config)].__name__ in saved_as
    ]
    if not named:
        log.info(
            "%s: config.json's architectures (%s) name no language-modelling head of transformers: the files hold "
            "no output matrix; the input matrix alone is measured",
            what,
            ", ".join(saved_as) or "none",
        )
    return (named or [AutoModel])[0]


def builds_pooler_optionally(config) -> bool:
    """Whether the base model class transformers maps ``config`` to takes ``add_pooling_layer`` (BERT, RoBERTa,
    XLM-R, ALBERT, …); False for classes it does not know (custom code)."""
    import inspect

    from transformers import AutoModel

    try:
        model_class = AutoModel._model_mapping[type(config)]
    except (KeyError, ValueError):
        return False
    return "add_pooling_layer" in inspect.signature(model_class.__init__).parameters


def register_null_model() -> None:
    """The Gaussian null model's classes for transformers' Auto classes, which read its type from config.json;
    imported here, not at the top: tokenizer-only jobs then skip transformers' modeling code."""
    from ctxvar.models.gaussian_null import register

    register()


@contextlib.contextmanager
def no_safetensors_conversion():
    """Within the block, transformers starts no safetensors conversion of a checkpoint it reads from
    ``pytorch_model.bin`` (``DISABLE_SAFETENSORS_CONVERSION``): online, it would call the Hub's API with the user's
    token and ask the conversion bot to open a pull request on the model's repository, on a thread the job then
    waits for. A job only reads the files."""
    before = os.environ.get(NO_CONVERSION)
    os.environ[NO_CONVERSION] = "1"
    try:
        yield
    finally:
        if before is None:
            del os.environ[NO_CONVERSION]
        else:
            os.environ[NO_CONVERSION] = before


NO_CONVERSION = "DISABLE_SAFETENSORS_CONVERSION"


def _from_pretrained(cls, source: str, entry: dict, options: dict):
    with no_safetensors_conversion():
        return _read_pretrained(cls, source, entry, options)


def _read_pretrained(cls, source: str, entry: dict, options: dict):
    register_config()  # the Gaussian null model's type, read from config.json by the Auto classes
    if hasattr(cls, "_model_mapping"):  # an AutoModel… class: it builds the model
        register_null_model()
    what = described(entry, source)
    if os.path.isdir(source):
        try:
            return cls.from_pretrained(source, **options)
        except Exception as error:  # transformers, safetensors and json raise many types; all mean "cannot load"
            raise load_error(what, source, cls, error) from error
    try:
        return cls.from_pretrained(source, local_files_only=True, **options)
    except OSError:
        pass  # not cached (or not complete): go to the Hub
    except Exception as error:  # cached, but a cached file is damaged
        config = hub.model_file(source, "config.json", load_revision(entry))
        raise load_error(what, os.path.dirname(config) if config else source, cls, error) from error
    reason = hub.unavailable_reason()
    if reason:
        raise ModelLoadError(
            f"{what} is not in the HF cache and {reason}; download it where the Hub is reachable "
            "(it is then cached), point models[].name at a local directory, or run the offline demo: "
            "snakemake --cores 2 --configfile config/demo.yaml"
        )
    try:
        return cls.from_pretrained(source, **options)
    except Exception as error:
        raise ModelLoadError(
            f"{what}: cannot be loaded from the Hub ({first_line(error)}); check the name and revision"
        ) from error


def custom_code_warning(entry: dict, source: str, filename: str, loaded: object) -> None:
    """Warn when ``filename`` of the model names custom code (``auto_map``) that was not run, because
    ``trust_remote_code`` is off, and transformers' built-in class (``loaded``'s) was used instead."""
    if entry.get("trust_remote_code"):
        return
    auto_map = (hub.model_json(source, filename, load_revision(entry)) or {}).get("auto_map")
    if auto_map:
        log.warning(
            "model %r: %s names custom code (%s) that runs only with trust_remote_code: true; "
            "transformers' built-in %s was used instead",
            entry["id"],
            filename,
            auto_map,
            type(loaded).__name__,
        )


def max_positions(config) -> int | None:
    """Longest input in tokens the model's position embeddings allow (None: unbounded)."""
    limit = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
    if limit and getattr(config, "model_type", None) in PADDING_OFFSET_POSITIONS:
        limit -= (config.pad_token_id or 0) + 1
    return limit


def last_hidden_width(model: torch.nn.Module) -> int:
    """The width of the last entry of ``output_hidden_states``: the model's ``hidden_size``, or, where the model's
    tail projects it to another width (OPT's ``project_out`` when ``word_embed_proj_dim`` differs, as in
    facebook/opt-350m), that projection's ``out_features``."""
    for name, module in model.named_modules():
        if name.rsplit(".", 1)[-1] == "project_out" and isinstance(module, torch.nn.Linear):
            return module.out_features
    return model.config.hidden_size


def ends_in_final_norm(model: torch.nn.Module) -> bool:
    """Whether the last hidden state is the output of a final norm (pre-LN decoders: GPT-2's ``ln_f``,
    GPT-NeoX's ``final_layer_norm``, Llama's ``norm``, OPT's with ``do_layer_norm_before``).

    transformers applies such a norm to the last entry of ``hidden_states``; the
    other entries are the raw residual stream. Recognised as a normalisation module
    outside the per-layer lists (no numeric name part) and outside the embeddings.
    Post-LN encoders (BERT, RoBERTa) have none: every layer ends in its own LayerNorm.
    A model may declare it with a boolean ``ends_in_final_norm`` attribute.
    """
    declared = getattr(model, "ends_in_final_norm", None)
    if isinstance(declared, bool):
        return declared
    for name, module in model.named_modules():
        parts = name.split(".")
        if (
            "Norm" in type(module).__name__
            and not any(p.isdigit() for p in parts)
            and not any("emb" in p.lower() for p in parts)
        ):
            return True
    return False


ATTENTION_KINDS = ("causal", "bidirectional", "none")  # models.csv's ``attention``


def declared_attention(model: torch.nn.Module) -> str | None:
    """How the model's positions see each other, as the model says it: "causal" (a decoder: each position attends
    to itself and the positions before it), "bidirectional" (an encoder: to every position) or "none" (no
    attention between positions, the Gaussian null); None where it says nothing.

    A model may declare it with an ``attention_kind`` attribute (one of :data:`ATTENTION_KINDS`); else
    transformers' ``is_causal`` on its self-attention modules (cross-attention left out) says it, when they all
    agree. Some families set no such flag (DeBERTa-v2, MPNet, BLOOM, MPT, XLNet in transformers 5):
    :func:`ctxvar.extraction.passes.attention_kind` runs those.
    """
    declared = getattr(model, "attention_kind", None)
    if declared in ATTENTION_KINDS:
        return declared
    flags = {
        module.is_causal
        for name, module in model.named_modules()
        if isinstance(getattr(module, "is_causal", None), bool) and "cross" not in name.lower()
    }
    return {frozenset({True}): "causal", frozenset({False}): "bidirectional"}.get(frozenset(flags))


def pad_id(tokenizer) -> int:
    """Padding id; models without one (GPT-2) pad with eos, which the attention mask hides."""
    for candidate in (tokenizer.pad_token_id, tokenizer.eos_token_id, tokenizer.sep_token_id):
        if candidate is not None:
            return candidate
    return 0
