"""llm-gym's trainers: the GRPO trainer (`trainers.grpo`), its samplers (`trainers.sampling`: HF and
vLLM), the SFT warm start, the tiny model preset and env workers on Ray (`trainers.rollout_workers`).
(Adapters that feed the envs to other RL libraries are torch-free and live next to the bridges, in
`llm_gym.adapters`.)

Importing `trainers` puts the HF hub client offline by default (llm-gym loads models and
tokenizers from local paths or the local cache only; set HF_HUB_OFFLINE=0 to opt out).
"""

from llm_gym.tokenizers import hub_offline_by_default

hub_offline_by_default()
