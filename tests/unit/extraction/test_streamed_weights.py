"""Which checkpoint key each tensor of a model built on ``meta`` is read from (:func:`checkpoint_keys`): its own
name or the base model's prefix and its name, exactly one, of exactly its shape; anything else is refused with
what, so that the job loads the whole model instead of guessing."""

from __future__ import annotations

import pytest
import torch

from ctxvar.extraction.layer_major import Unrecognised
from ctxvar.extraction.streamed_weights import StoredTensor, checkpoint_keys


def empty(config):
    from accelerate import init_empty_weights
    from transformers import AutoModel

    with init_empty_weights(include_buffers=False):
        return AutoModel.from_config(config)


@pytest.fixture(scope="module")
def llama():
    from transformers import LlamaConfig

    config = LlamaConfig(
        hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32, vocab_size=50
    )
    return empty(config)


def stored(model, prefix: str = "", **changes) -> dict[str, StoredTensor]:
    """The headers of a checkpoint that holds ``model``'s tensors under ``prefix``, with ``changes`` (name →
    StoredTensor, or None to leave it out)."""
    tensors = {
        f"{prefix}{name}": StoredTensor("model.safetensors", "F32", tuple(tensor.shape), 0, 4 * tensor.numel())
        for name, tensor in model.state_dict().items()
    }
    tensors.update(changes)
    return {name: tensor for name, tensor in tensors.items() if tensor is not None}


def test_a_causal_lm_checkpoint_maps_under_its_prefix_and_its_head_is_left_alone(llama):
    head = StoredTensor("model.safetensors", "F32", (50, 16), 0, 3200)
    keys = checkpoint_keys(llama, stored(llama, "model.", **{"lm_head.weight": head}))
    assert keys["layers.1.mlp.up_proj.weight"] == "model.layers.1.mlp.up_proj.weight"
    assert set(keys) == set(llama.state_dict()) and "rotary_emb.inv_freq" not in keys  # a buffer not saved
    assert checkpoint_keys(llama, stored(llama))["norm.weight"] == "norm.weight"


@pytest.mark.parametrize(
    "changes, refused",
    [
        ({"layers.0.self_attn.q_proj.weight": None}, "1 of its tensors are not in the files under their names"),
        (
            {"model.layers.0.input_layernorm.weight": StoredTensor("f", "F32", (16,), 0, 64)},
            "1 of its tensors are in the files with and without the prefix: layers.0.input_layernorm.weight",
        ),
        (
            {"layers.1.mlp.down_proj.weight": StoredTensor("f", "F32", (32, 16), 0, 2048)},
            r"have another shape or dtype in the files: layers.1.mlp.down_proj.weight F32 \(32, 16\), \(16, 32\)",
        ),
        (
            {"layers.1.mlp.down_proj.weight": StoredTensor("f", "F8_E8M0", (16, 32), 0, 512)},
            "have another shape or dtype in the files",
        ),
        (
            {"layers.2.mlp.up_proj.weight": StoredTensor("f", "F32", (32, 16), 0, 2048)},
            "the files hold 1 tensor.s. of layers it does not build: layers.2.mlp.up_proj.weight",
        ),
    ],
)
def test_a_tensor_not_found_exactly_is_refused_by_name(llama, changes, refused):
    with pytest.raises(Unrecognised, match=refused):
        checkpoint_keys(llama, stored(llama, **changes))


def test_a_family_whose_weights_transformers_converts_is_refused():
    """Mixtral's experts are fused from per-expert tensors on loading: no key of the model is in the files."""
    from transformers import MixtralConfig

    model = empty(
        MixtralConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32, vocab_size=50)
    )
    with pytest.raises(Unrecognised, match="transformers converts MixtralModel's weights on loading"):
        checkpoint_keys(model, stored(model))
    assert all(parameter.device == torch.device("meta") for parameter in model.parameters())


def test_a_pre_quantized_checkpoint_is_refused():
    """A block-FP8 checkpoint (Qwen3-8B-FP8, DeepSeek-V3) keeps each weight's name and shape, its scales beside it
    (``weight_scale_inv``, no place in a model built without the quantizer): read and cast without them, every
    weight would be wrong by its block's scale. transformers' quantizer dequantizes it; the model is loaded whole."""
    from transformers import LlamaConfig

    config = LlamaConfig(
        hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32, vocab_size=50
    )
    config.quantization_config = {"quant_method": "fp8", "weight_block_size": [128, 128]}
    model = empty(config)
    scales = {
        f"{name}_scale_inv": StoredTensor("f", "F32", (1, 1), 0, 4)
        for name, tensor in model.state_dict().items()
        if tensor.dim() == 2
    }
    with pytest.raises(Unrecognised, match="its checkpoint is quantized .fp8.: transformers dequantizes it"):
        checkpoint_keys(model, stored(model, **scales))


def test_a_model_built_on_meta_keeps_in_float32_what_from_pretrained_keeps_in_float32(tmp_path):
    """RWKV's ``_keep_in_fp32_modules`` (time_decay, time_first) load in float32 in a float16 job: streamed blocks
    read in the placeholders' dtype, so a placeholder in float16 would give other numbers than the whole model."""
    from transformers import RwkvConfig, RwkvModel

    from ctxvar.models import loading

    config = RwkvConfig(
        vocab_size=50, hidden_size=16, num_hidden_layers=2, attention_hidden_size=16, intermediate_size=32
    )
    RwkvModel(config).save_pretrained(tmp_path)
    entry = {"id": "rwkv"}
    whole = loading.load_model(entry, str(tmp_path), "float16", torch.device("cpu")).state_dict()
    built = loading.empty_model(entry, str(tmp_path), "float16").state_dict()
    assert whole["blocks.1.attention.time_decay"].dtype == torch.float32
    assert {name: tensor.dtype for name, tensor in built.items()} == {
        name: tensor.dtype for name, tensor in whole.items()
    }


def rewritten_header(path, change) -> None:
    """The safetensors file ``path`` with its header changed by ``change`` (a function of the header's dict)."""
    import json
    import struct

    data = path.read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + length])
    change(header)
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + data[8 + length :])


@pytest.mark.parametrize(
    "change",
    [
        lambda header: header["b"].update(data_offsets=header["a"]["data_offsets"]),  # two tensors on one range
        lambda header: header["a"].update(shape=[2]),  # fewer numbers than its bytes hold
    ],
    ids=["overlapping", "bytes-beyond-shape"],
)
def test_a_header_whose_tensors_do_not_tile_the_data_exactly_is_damaged(tmp_path, change):
    """As safetensors refuses it (the whole model would not load): the blocks read from it would be other bytes
    than their own, or fail with a traceback."""
    from safetensors.torch import save_file

    from ctxvar.errors import ModelLoadError
    from ctxvar.extraction.streamed_weights import stored_tensors

    path = tmp_path / "model.safetensors"
    save_file({"a": torch.arange(4.0), "b": torch.arange(4.0) + 4}, path)
    assert stored_tensors([path])["b"].end == path.stat().st_size  # as saved: the tensors tile the data
    rewritten_header(path, change)
    with pytest.raises(ModelLoadError, match="is damaged"):
        stored_tensors([path])
