"""vLLM server sampling backend (`--sampler vllm`): a documented stub, not a working backend yet.

The plan for GPU clusters (docs/design.md, "Scaling past one machine"): generation runs in a separate
`trl vllm-serve` process, the trainer pushes new weights to it after every optimizer step
(`trl.extras.vllm_client.VLLMClient.update_model_params`) and a `TokenCompleter` here forwards
each rollout call's prompt token ids and returns the sampled ids with their logprobs. Until that is
written and tested on a GPU machine, constructing the sampler raises: first an `ImportError` with
the install command when `vllm` is missing, otherwise `NotImplementedError` — it never pretends to
sample. Use the default in-process HF sampler (`--sampler hf`).
"""

from __future__ import annotations

from llm_gym.completers import TokenCompleter


class VLLMServerSampler(TokenCompleter):
    def __init__(self, *args, **kwargs) -> None:
        try:
            import vllm  # noqa: F401
        except ImportError as exc:
            raise ImportError(
                "--sampler vllm needs vLLM (GPU only): `pip install vllm`, then start a server with "
                "`trl vllm-serve --model <path>`; or use the default `--sampler hf`"
            ) from exc
        raise NotImplementedError(
            "the vLLM server backend is not implemented yet (see trainers/grpo/vllm_backend.py); "
            "use the default `--sampler hf`"
        )

    async def __call__(self, model_input, stop, *, max_tokens=None):  # pragma: no cover
        raise NotImplementedError
