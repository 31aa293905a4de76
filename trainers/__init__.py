"""llm-gym's trainers: the GRPO trainer (`trainers.grpo`), its HF policy sampler, the SFT warm
start, the tiny model preset, and adapters to other RL libraries (`trainers.adapters`).

Importing `trainers` puts the HF hub client offline by default (llm-gym loads models and
tokenizers from local paths or the local cache only; set HF_HUB_OFFLINE=0 to opt out).
"""

from llm_gym.tokenizers import hub_offline_by_default

hub_offline_by_default()
