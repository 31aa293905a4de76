"""The one place that imports TRL utilities; the rest of `trainers` imports them from here.

TRL moves helpers between modules across releases (in trl 1.16 the tensor helpers live in
`trl.trainer.utils` and `unwrap_model_for_generation` in `trl.models.utils`). Pinning the import
paths in one module means a TRL upgrade touches one file, and a reader sees at a glance which TRL
pieces the trainer reuses instead of rewriting:

- `selective_log_softmax(logits, index, temperature=1.0)`: `log_softmax(logits / T).gather(index)`
  without materialising the full log-softmax (memory-friendly; used for per-token logprobs).
- `entropy_from_logits(logits, chunk_size=128)`: per-position entropy, chunked.
- `pad(tensors, padding_value=0, padding_side="right")`: stack ragged 1-D/N-D tensors.
- `nanstd(tensor)`: standard deviation ignoring NaNs (group reward std with masked entries).
- `unwrap_model_for_generation(model, accelerator, ...)`: context manager that yields a model that
  can `generate`/run the sampler under DDP/DeepSpeed/FSDP.

Importing TRL costs seconds, so import this module only where a TRL helper is actually used.
"""

from __future__ import annotations

from trl.models.utils import unwrap_model_for_generation
from trl.trainer.utils import entropy_from_logits, nanstd, pad, selective_log_softmax

__all__ = [
    "entropy_from_logits",
    "nanstd",
    "pad",
    "selective_log_softmax",
    "unwrap_model_for_generation",
]
