"""Registered ids of the text family (read by `envs_catalog.ALL_SPECS`; data only, no imports)."""

SPECS: list = [
    {"id": "llm/ReverseText-v0", "source": "envs_catalog.text.lists:ReverseTextSource",
     "kwargs": {"unit": "chars", "length": 5, "format_coef": 0.1}},
    {"id": "llm/SortList-v0", "source": "envs_catalog.text.lists:SortListSource",
     "kwargs": {"items": "numbers", "order": "ascending", "key": "natural", "length": 5,
                "format_coef": 0.1}},
    {"id": "llm/Dedupe-v0", "source": "envs_catalog.text.lists:DedupeSource",
     "kwargs": {"length": 6, "distinct": 4, "format_coef": 0.1}},
]
SPECS += [
    {"id": "llm/CsvToJson-v0", "source": "envs_catalog.text.csv_json:CsvToJsonSource",
     "kwargs": {"rows": 2, "columns": 3, "types": "mixed", "format_coef": 0.1}},
    {"id": "llm/InstructionFollowing-v0",
     "source": "envs_catalog.text.instructions:InstructionFollowingSource",
     "kwargs": {"num_constraints": 2, "reward": "all", "kinds": "all", "format_coef": 0.1}},
    {"id": "llm/Extraction-v0", "source": "envs_catalog.text.extraction:ExtractionSource",
     "kwargs": {"doc_type": "any", "num_fields": 1, "distractors": True, "format_coef": 0.1}},
]
