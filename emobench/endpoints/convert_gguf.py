"""Child-process entry point: convert a GGUF file into an HF folder vLLM can load.

Usage: python -m emobench.endpoints.convert_gguf GGUF_FILE OUT_DIR DTYPE   (float32 or bfloat16)
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path


def convert(gguf: Path, out: Path, dtype: str) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    # Saved in the dtype vLLM will serve, so the config's torch_dtype matches and nothing is cast on load.
    model = model.to(getattr(torch, dtype))
    # The weights are de-quantised on load; drop the GGUF quantizer so they save as plain safetensors.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    tmp = Path(tempfile.mkdtemp(prefix=out.name + ".", dir=out.parent))
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / ".complete").write_text(gguf.name + "\n")
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)  # atomic: a half-written folder is never seen as the cache
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    convert(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3])
