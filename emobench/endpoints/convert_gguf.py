"""Child-process entry point: convert a GGUF file into an HF folder vLLM can load.

Usage: python -m emobench.endpoints.convert_gguf GGUF_FILE OUT_DIR
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path


def convert(gguf: Path, out: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    # vLLM serves it in bfloat16 anyway; saving in it halves the folder and the load.
    model = model.to(torch.bfloat16)  # type: ignore[arg-type]  # the stubs type .to() as taking a model
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
    convert(Path(sys.argv[1]), Path(sys.argv[2]))
