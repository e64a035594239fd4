#!/usr/bin/env python3
"""Dump Megatron-Bridge run_config.yaml (via ConfigContainer.to_yaml) for real recipes, CPU-only.

Usage (from /tmp/bridgedump):
  PYTHONPATH=/tmp/bridgedump/stubs:/tmp/bridgedump/bridge/src:/tmp/bridgedump/mlm \
  HF_HUB_OFFLINE=1 venv/bin/python out/make_dump.py            # both recipes, each in its own subprocess
  ... venv/bin/python out/make_dump.py qwen3|deepseek_v3       # one recipe
"""
import os
import subprocess
import sys
import traceback

HERE = "/tmp/bridgedump"
OUT = os.path.join(HERE, "out")

RECIPES = {
    # name: (module, function, world_size, output file)
    "qwen3": ("megatron.bridge.recipes.qwen.h100.qwen3_moe",
              "qwen3_30b_a3b_pretrain_16gpu_h100_bf16_config", 16,
              "qwen3_30b_a3b_pretrain_16gpu.run_config.yaml"),
    "deepseek_v3": ("megatron.bridge.recipes.deepseek.h100.deepseek_v3",
                    "deepseek_v3_pretrain_1024gpu_h100_bf16_config", 1024,
                    "deepseek_v3_pretrain_1024gpu.run_config.yaml"),
}

# HF hub id -> local dir holding only config.json (copied from /work/main/testdata/hf/*.json)
LOCAL_HF = {
    "Qwen/Qwen3-30B-A3B": os.path.join(HERE, "hf/qwen3-30b-a3b"),
    "deepseek-ai/DeepSeek-V3": os.path.join(HERE, "hf/deepseek-v3"),
}


def install_patches():
    # (1) transformer_engine import stub (see stubs/te_stub.py)
    import te_stub
    te_stub.install()

    # (2) AutoConfig.from_pretrained: redirect hub ids to local config dirs (no network).
    #     `revision` is dropped for local dirs (it is meaningless there); afterwards
    #     config._name_or_path is set back to the hub id so provenance matches a real run.
    import transformers
    orig = transformers.AutoConfig.from_pretrained.__func__

    def patched(cls, pretrained_model_name_or_path, *args, **kwargs):
        key = str(pretrained_model_name_or_path)
        if key in LOCAL_HF:
            kwargs.pop("revision", None)
            cfg = orig(cls, LOCAL_HF[key], *args, **kwargs)
            cfg._name_or_path = key
            return cfg
        return orig(cls, pretrained_model_name_or_path, *args, **kwargs)

    transformers.AutoConfig.from_pretrained = classmethod(patched)

    # (3) torch.cuda.get_device_properties: no GPU here. ConfigContainer.validate() ->
    #     validate_flex_dispatcher_backend() reads device 0's properties only to check the
    #     flex/hybridep backend is supported (it raises or returns; it changes nothing when
    #     the backend is set). Report an H100 (sm90), the recipes' target hardware.
    import types as _types
    import torch
    _h100 = _types.SimpleNamespace(name="NVIDIA H100 80GB HBM3", major=9, minor=0,
                                   total_memory=80 * 1024**3, multi_processor_count=132)
    torch.cuda.get_device_properties = lambda device=None: _h100
    return te_stub


def run_one(name):
    module, fn, world, fname = RECIPES[name]
    # No torch.distributed: Bridge's safe_get_world_size() falls back to WORLD_SIZE.
    os.environ["WORLD_SIZE"] = str(world)
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("LOCAL_RANK", "0")
    te_stub = install_patches()

    import importlib
    from megatron.bridge.training.config import runtime_config_update

    recipe = getattr(importlib.import_module(module), fn)
    cfg = recipe()
    print(f"[{name}] recipe built: model={type(cfg.model).__module__}.{type(cfg.model).__qualname__}")

    rcu_ok = False
    try:
        runtime_config_update(cfg)
        rcu_ok = True
        print(f"[{name}] runtime_config_update: OK (data_parallel_size={cfg.data_parallel_size})")
    except Exception:
        print(f"[{name}] runtime_config_update FAILED:")
        traceback.print_exc()

    path = os.path.join(OUT, fname if rcu_ok else fname.replace(".yaml", ".pre_runtime_update.yaml"))
    cfg.to_yaml(path)
    print(f"[{name}] wrote {path}")
    touched = sorted({m for m, a in te_stub.STUB_LOG})
    print(f"[{name}] transformer_engine stub modules touched: {len(touched)}")
    return 0


def main():
    if len(sys.argv) > 1:
        sys.exit(run_one(sys.argv[1]))
    rc = 0
    for name in RECIPES:
        r = subprocess.call([sys.executable, __file__, name])
        print(f"=== {name}: exit {r}")
        rc |= r
    sys.exit(rc)


if __name__ == "__main__":
    main()
