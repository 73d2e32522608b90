"""emobench's agent loop driven by verl's own AgentLoopWorker, in .venv-verl.

verl's config is composed from configs/verl/grpo_emobench.yaml (on verl's ppo_trainer), its
dataset class reads the parquet emobench.env.verl_data writes, and its worker finds the loop in
its registry through configs/verl's agent-loop entry. The policy server is the loopback fake
OpenAI server behind an LLMServerClient (the class verl's rollout servers are reached through);
the simulated user and the judge are the same fake server, reached by emobench's own clients.
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml
from hydra import compose, initialize_config_dir
from transformers import AutoConfig, AutoTokenizer
from verl.experimental.agent_loop import agent_loop
from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
from verl.protocol import DataProto
from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn
from verl.workers.rollout.llm_server import LLMServerClient
from verl.workers.rollout.replica import TokenOutput

from emobench.endpoints.embedded import find_gguf
from emobench.env import verl_loop
from emobench.env.verl_data import write_dataset
from emobench.errors import InputError
from emobench.records import Episode
from emobench.run.runner import ROOT
from tests.conftest import write_config
from tests.fake_openai import FakeOpenAIServer, FakeState, default_responder

END = "<|im_end|>"
GROUP = 2  # rollouts per prompt, as rollout.n


def responder(body: dict[str, Any]) -> str:
    """The policy's replies carry a reasoning block and differ by request seed; verdicts and user
    moves vary by seed too, so the two rollouts of a group take different paths."""
    seed = int(body.get("seed") or 0)
    kind = (body.get("response_format") or {}).get("json_schema", {}).get("name")
    if kind is None:
        return f"<think>plan {seed}</think>That sounds heavy ({seed % 13}). What weighs most?"
    if kind == "mdep_verdict":
        def axis(p: int, r: int) -> dict[str, Any]:
            return {"progress": p, "regression": r, "evidence": "that sounds heavy" if p or r else "", "reason": "x"}
        return json.dumps({"C": axis(1 + seed % 2, 0), "A": axis(seed % 3, 0), "P": axis(0, seed % 2)})
    if kind == "user_move":
        return json.dumps({"message": f"Maybe ({seed % 89}).", "meter_delta": seed % 7 - 2, "inner": "x", "leave": False})
    return default_responder(body)


class LoopbackPolicy(LLMServerClient):
    """verl's server client, answering from the loopback server: the prompt's tokens go out as
    text, the reply comes back as the tokenizer's ids closed by the end-of-turn token."""

    def __init__(self, config: Any, base_url: str, tokenizer: Any) -> None:
        super().__init__(config, load_balancer_handle=None)
        self.base_url, self.tokenizer = base_url, tokenizer
        self.calls: list[dict[str, Any]] = []
        self.sent = 0  # each request's seed: concurrent episodes get distinct replies

    def _post(self, prompt: str, seed: int) -> str:
        body = json.dumps({"model": "policy", "seed": seed, "messages": [{"role": "user", "content": prompt}]}).encode()
        request = urllib.request.Request(f"{self.base_url}/chat/completions", body, {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as response:
            return str(json.load(response)["choices"][0]["message"]["content"])

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any],
                       **kwargs: Any) -> TokenOutput:
        seed, self.sent = self.sent, self.sent + 1
        text = await asyncio.to_thread(self._post, self.tokenizer.decode(prompt_ids), seed)
        ids = [*self.tokenizer.encode(text, add_special_tokens=False), self.tokenizer.convert_tokens_to_ids(END)]
        self.calls.append({"request_id": request_id, "prompt_ids": list(prompt_ids), "ids": ids, "text": text})
        logprobs = [-0.25] * len(ids) if sampling_params.get("logprobs") else None
        return TokenOutput(token_ids=ids, log_probs=logprobs, stop_reason="completed")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The embedded SmolLM2's tokenizer and config as an HF folder (no weights: nothing runs it)."""
    out = tmp_path_factory.mktemp("smollm2")
    gguf = find_gguf()
    AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name).save_pretrained(out)
    config = AutoConfig.from_pretrained(gguf.parent, gguf_file=gguf.name)
    config.architectures = ["LlamaForCausalLM"]
    config.save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def server() -> Any:
    with FakeOpenAIServer(FakeState(responder=responder)) as fake:
        yield fake


def _setup(tmp: Path, model: Path, url: str) -> tuple[Any, Path, Path]:
    env_cfg = write_config(tmp / "env.yaml", url, probe=False, max_turns=3, min_turns=2, seeds=[0, 1],
                           reward={"meter": 0.5})
    records = tmp / "episodes"
    loops = tmp / "agent_loops.yaml"
    loops.write_text(yaml.safe_dump([{"name": "emobench", "_target_": "emobench.env.verl_loop.EmobenchAgentLoop",
                                      "config": str(env_cfg), "records": str(records)}]))
    data = tmp / "train.parquet"
    write_dataset(env_cfg, data)
    with initialize_config_dir(config_dir=str(ROOT / "configs" / "verl"), version_base=None):
        cfg = compose(config_name="grpo_emobench", overrides=[
            f"actor_rollout_ref.model.path={model}", f"data.train_files={data}", f"data.val_files={data}",
            f"actor_rollout_ref.rollout.agent.agent_loop_config_path={loops}", "data.max_response_length=1024",
        ])
    return cfg, data, records


def test_grpo_batch_plays_whole_episodes_through_verls_worker(model_dir: Path, server: Any, tmp_path: Path) -> None:
    cfg, data, records = _setup(tmp_path, model_dir, server.base_url)
    server.state.requests.clear()
    policy = LoopbackPolicy(cfg, server.base_url, None)
    worker = AgentLoopWorker(cfg, llm_client=policy)
    policy.tokenizer = tok = worker.tokenizer
    assert agent_loop._agent_loop_registry["emobench"]["_target_"] == "emobench.env.verl_loop.EmobenchAgentLoop"

    dataset = RLHFDataset([str(data)], tok, cfg.data, processor=None)
    assert len(dataset) == 4  # the demo split's two cases x seeds 0 and 1
    batch = DataProto.from_single_dict(collate_fn([dataset[0], dataset[3]]), meta_info={"global_steps": 1})
    batch = batch.repeat(repeat_times=GROUP, interleave=True)

    async def play() -> DataProto:
        try:
            return await worker.generate_sequences(batch)
        finally:
            await verl_loop.close_hosts()

    out = asyncio.run(play())
    rows = len(out)
    assert rows == 2 * GROUP
    episodes = [Episode.model_validate_json(line) for f in sorted(records.glob("*.jsonl")) for line in f.read_text().splitlines()]
    assert len(episodes) == rows
    infos = [dict(i) for i in out.non_tensor_batch["extra_info"]]
    assert [(i["case_id"], i["seed"]) for i in infos][::GROUP] == [(i["case_id"], i["seed"]) for i in infos][1::GROUP]

    by_text = {c["text"]: c for c in policy.calls}
    for r in range(rows):
        mask = out.batch["response_mask"][r]
        attention = out.batch["attention_mask"][r, -mask.numel():]
        response = out.batch["responses"][r]
        ours = response[mask.bool()].tolist()
        theirs = response[(attention.bool()) & ~mask.bool()].tolist()
        summary = out.non_tensor_batch["emobench"][r]
        episode = next(e for e in episodes if (e.case_id, e.seed) == (summary["case_id"], summary["seed"])
                       and tok.decode(ours).startswith(e.calls[[c.role for c in e.calls].index("subject")].text))
        replies = [c.text for c in episode.calls if c.role == "subject"]
        # The loss sees exactly the policy's tokens, each reply closed by its end-of-turn token.
        assert ours == [i for text in replies for i in by_text[text]["ids"]]
        # The user's later messages are in the trajectory, masked out of the loss.
        user_text = tok.decode(theirs)
        for turn in episode.turns[1:]:
            assert turn.user.message in user_text
        # The reward is the episode's return, on the last token, with each step's in turn_scores.
        steps = out.non_tensor_batch["turn_scores"][r]
        assert len(steps) == len(replies) == len(episode.turns)
        assert out.batch["rm_scores"][r].sum().item() == pytest.approx(sum(s for s in steps if s is not None))
        assert out.batch["rm_scores"][r].nonzero().numel() <= 1
        assert out.non_tensor_batch["turns"][r] == len(steps) and out.non_tensor_batch["no_reward"][r] == 0.0
        assert summary["stop_reason"] == episode.stop_reason
    assert out.batch["rm_scores"].abs().sum().item() > 0
    assert torch.all(out.batch["rollout_log_probs"][out.batch["response_mask"].bool()] == -0.25)
    # Each turn's prompt is the previous prompt, the policy's own tokens and the user's next message.
    for before, after in zip(policy.calls, policy.calls[1:], strict=False):
        if before["request_id"] == after["request_id"]:
            assert after["prompt_ids"][: len(before["prompt_ids"]) + len(before["ids"])] == before["prompt_ids"] + before["ids"]
    # Every subject reply came through verl's client: emobench itself made only user and judge calls.
    kinds = [(r["body"].get("response_format") or {}).get("json_schema", {}).get("name") for r in server.state.requests]
    assert kinds.count(None) == len(policy.calls) and "user_move" in kinds and "mdep_verdict" in kinds
    assert all(r["body"]["model"] == "policy" for r, k in zip(server.state.requests, kinds, strict=True) if k is None)


def test_vllm_roles_and_rows_without_an_episode_are_refused_in_one_line(tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "env.yaml", "http://127.0.0.1:9/v1", user={"binding": "vllm:embedded"})
    with pytest.raises(InputError) as err:
        verl_loop.load_env_config(cfg)
    assert str(err.value).startswith(f"{cfg}: user.binding: ") and "\n" not in str(err.value)
    with pytest.raises(InputError, match="extra_info"):
        verl_loop.episode_of({"index": 3})
    assert verl_loop.episode_of({"case_id": "demo4-01", "seed": 2}) == ("demo4-01", 2)


def test_the_registry_entry_overrides_the_training_config(tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "env.yaml", "http://127.0.0.1:9/v1", max_turns=6, reward={"meter": 0.5})
    config, rewards = verl_loop.load_env_config(cfg, {"max_turns": 2, "reward": {"dense": 0.0}})
    assert config.max_turns == 2 and rewards.dense == 0.0 and rewards.meter == 0.0  # a section is replaced whole
    with pytest.raises(InputError) as err:
        verl_loop.load_env_config(cfg, {"reward": {"densee": 1.0}})
    assert str(err.value).startswith(f"{cfg}: reward.densee: ")
