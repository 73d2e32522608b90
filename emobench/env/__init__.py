"""emobench as a training environment: reset an episode, let the policy answer, get the next
user message and a per-turn reward (docs/train.md)."""

from emobench.env.core import EmoEnv, EnvSetup, StepResult
from emobench.env.host import EnvHost, load_training_config, open_host, split_training_config
from emobench.env.rewards import RewardConfig
from emobench.episode.stepper import visible_reply

__all__ = [
    "EmoEnv",
    "EnvHost",
    "EnvSetup",
    "RewardConfig",
    "StepResult",
    "load_training_config",
    "open_host",
    "split_training_config",
    "visible_reply",
]
