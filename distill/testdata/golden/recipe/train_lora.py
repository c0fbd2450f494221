# /// script
# requires-python = ">=3.10"
# dependencies = [
#     "trl>=1.0",
#     "peft>=0.15",
#     "datasets>=3.0",
#     "transformers>=5.0",
#     "accelerate>=1.0",
#     "pyarrow>=15",
# ]
# ///
"""LoRA fine-tuning of a context compressor on this dataset.

Written by `optimize distill`. The settings are those of ACON appendix D.3
(LoRA r 16, alpha 32, lr 1e-4, 3 epochs, batch 4, max length 10000,
5% linear warmup, weight decay 0.01, AdamW), used there unchanged for every
student model. The data are conversational prompt-completion rows, so the
loss covers the teacher's compression only, never the compressor input.

    uv run recipe/train_lora.py --model Qwen/Qwen3-8B
    python recipe/train_lora.py --model Qwen/Qwen3-8B --output-dir lora-compressor

A smoke run on a CPU: a local GGUF file (transformers de-quantizes it), a
chat template for a base model that has none, two optimizer steps of one row:

    python recipe/train_lora.py --model DIR --gguf-file model.gguf \
        --chat-template gemma.jinja --max-steps 2 --max-length 2560 --batch-size 1

Rows longer than --max-length would lose their completion; TRL leaves them out.
"""

import argparse
from pathlib import Path

import pyarrow.parquet as pq
import torch
from datasets import load_dataset
from peft import LoraConfig
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import SFTConfig, SFTTrainer

DATASET_DIR = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="Qwen/Qwen3-8B", help="student base model (Hub id or path)")
    parser.add_argument("--data", type=Path, default=DATASET_DIR, help="dataset directory (holds data/*.parquet)")
    parser.add_argument("--output-dir", default="lora-compressor", help="where the adapter is saved")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--gguf-file", help="load --model from this GGUF file in the --model directory")
    parser.add_argument("--chat-template", type=Path, help="Jinja chat template file, for a model without one")
    parser.add_argument("--max-steps", type=int, default=-1, help="stop after N optimizer steps (-1: the epochs)")
    parser.add_argument("--max-length", type=int, default=10000, help="truncate rows to N tokens")
    parser.add_argument("--batch-size", type=int, default=4, help="rows per device and step")
    args = parser.parse_args()

    paths = {split: args.data / "data" / f"{split}.parquet" for split in ("train", "validation")}
    # datasets refuses a split file without rows ("corresponds to no data"):
    # an empty validation split is left out, and evaluation skipped.
    files = {split: str(p) for split, p in paths.items() if pq.ParquetFile(p).metadata.num_rows > 0}
    if "train" not in files:
        parser.error(f"{paths['train']} has no rows: nothing to train on")
    data = load_dataset("parquet", data_files=files)
    # Only the conversation trains; the metadata columns stay in the files.
    data = data.select_columns(["prompt", "completion"])
    # A step-limited run is a smoke test: it skips the evaluation pass.
    eval_data = data["validation"] if "validation" in data and args.max_steps < 0 else None

    peft_config = LoraConfig(
        r=16,
        lora_alpha=32,
        lora_dropout=0.0,
        target_modules="all-linear",
        task_type="CAUSAL_LM",
    )
    bf16 = torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    load = {"gguf_file": args.gguf_file} if args.gguf_file else {}
    tokenizer = AutoTokenizer.from_pretrained(args.model, **load)
    if args.chat_template is not None:
        tokenizer.chat_template = args.chat_template.read_text()
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.bfloat16 if bf16 else torch.float32, **load)
    if args.gguf_file and all(p.is_floating_point() for p in model.parameters()):
        # The GGUF weights were de-quantized on load, but the model is still
        # marked as quantized, which Trainer refuses to train.
        model.hf_quantizer.remove_quantization_config(model)
        model.config._is_quantized = False
    config = SFTConfig(
        output_dir=args.output_dir,
        learning_rate=1e-4,
        num_train_epochs=3,
        max_steps=args.max_steps,
        per_device_train_batch_size=args.batch_size,
        per_device_eval_batch_size=args.batch_size,
        max_length=args.max_length,
        # A float below 1 is a share of the steps; transformers 5 removed
        # warmup_ratio.
        warmup_steps=0.05,
        lr_scheduler_type="linear",
        weight_decay=0.01,
        optim="adamw_torch",
        completion_only_loss=True,
        bf16=bf16,
        eval_strategy="epoch" if eval_data is not None else "no",
        save_strategy="epoch",
        logging_steps=10,
        seed=args.seed,
        report_to="none",
    )
    trainer = SFTTrainer(
        model=model,
        processing_class=tokenizer,
        args=config,
        train_dataset=data["train"],
        eval_dataset=eval_data,
        peft_config=peft_config,
    )
    trainer.train()
    trainer.save_model(args.output_dir)


if __name__ == "__main__":
    main()
