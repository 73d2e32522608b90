"""A few GRPO steps of the embedded SmolLM2-135M on CPU, rewarded by emobench episodes.

    python -m emobench.env.train_example --steps 2 --out runs/train-example

The simulated user and the judge run on a vLLM server (configs/train.yaml); the policy is the
same model in process (transformers), trained by TRL's GRPOTrainer. Every rollout is a whole
episode driven by the policy's own replies. The trainer's log (printed, and kept in
OUT/log_history.json) carries the episode return, each reward component and the per-turn
rewards (`emobench/turn{t}/...`). This demonstrates the plumbing; it does not make a 135M
model empathetic.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from emobench.env.host import load_training_config, open_host
from emobench.env.trl import EnvThread, make_rollout_func, reward_funcs
from emobench.run.runner import ROOT


def train(config_path: Path, out: Path, steps: int, generations: int, max_new_tokens: int) -> list[dict[str, Any]]:
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from emobench.endpoints.embedded import prepare_embedded_model

    config, rewards = load_training_config(config_path)
    env_thread = EnvThread(open_host(config, rewards, log_dir=out / "logs"))
    try:
        folder = prepare_embedded_model("float32")
        tokenizer = AutoTokenizer.from_pretrained(folder, padding_side="left")
        tokenizer.pad_token = tokenizer.pad_token or tokenizer.eos_token
        model = AutoModelForCausalLM.from_pretrained(folder, dtype="float32")
        cases = [case.id for case in env_thread.host.cases()]
        funcs, weights = reward_funcs()
        args = GRPOConfig(
            output_dir=str(out), max_steps=steps, per_device_train_batch_size=generations,
            num_generations=generations, learning_rate=1e-6, beta=0.0, temperature=1.0, top_p=1.0,
            max_completion_length=max_new_tokens * config.max_turns * 4, logging_steps=1, save_strategy="no",
            report_to="none", use_cpu=True, bf16=False, gradient_checkpointing=False, reward_weights=weights, seed=0,
            dataloader_num_workers=0,
        )
        trainer = GRPOTrainer(
            model=model, reward_funcs=list[Any](funcs), args=args, processing_class=tokenizer,
            train_dataset=Dataset.from_dict({"prompt": cases * steps * generations}),
            rollout_func=make_rollout_func(env_thread, max_new_tokens=max_new_tokens),
        )
        trainer.train()
        history: list[dict[str, Any]] = trainer.state.log_history
    finally:
        env_thread.close()
    (out / "log_history.json").write_text(json.dumps(history, indent=1))
    return history


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=ROOT / "configs" / "train.yaml")
    parser.add_argument("--out", type=Path, default=Path("runs") / "train-example")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--generations", type=int, default=2, help="rollouts per case (the GRPO group)")
    parser.add_argument("--max-new-tokens", type=int, default=48)
    ns = parser.parse_args()
    ns.out.mkdir(parents=True, exist_ok=True)
    for entry in train(ns.config, ns.out, ns.steps, ns.generations, ns.max_new_tokens):
        print(json.dumps(entry))


if __name__ == "__main__":
    main()
