"""Merge a LoRA adapter into its base model and save the merged model
(safetensors, with its tokenizer and chat template) for
convert_hf_to_gguf.py.

    python merge.py --model DIR --gguf-file base.gguf --adapter ADAPTER --out MERGED
"""

import argparse
from pathlib import Path

import torch
from peft import PeftModel
from transformers import AutoModelForCausalLM, AutoTokenizer


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="directory of the base model (or its GGUF file's directory)")
    ap.add_argument("--gguf-file", help="load the base from this GGUF file in --model (de-quantized)")
    ap.add_argument("--chat-template", type=Path, help="chat template to save with the tokenizer")
    ap.add_argument("--adapter", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    load = {"gguf_file": a.gguf_file} if a.gguf_file else {}
    tokenizer = AutoTokenizer.from_pretrained(a.model, **load)
    if a.chat_template is not None:
        tokenizer.chat_template = a.chat_template.read_text()
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float32, **load)
    if a.gguf_file and getattr(model, "hf_quantizer", None) is not None:
        # As in the recipe: the de-quantized GGUF weights are plain floats,
        # but the model is still marked quantized, which PEFT's merge refuses.
        model.hf_quantizer.remove_quantization_config(model)
        model.config._is_quantized = False
    merged = PeftModel.from_pretrained(model, a.adapter).merge_and_unload()
    merged.save_pretrained(a.out, safe_serialization=True)
    tokenizer.save_pretrained(a.out)
    print(a.out)


if __name__ == "__main__":
    main()
