"""Text family: single-turn string, list and document tasks with exact verifiers
(`llm/ReverseText-v0`, `llm/SortList-v0`, `llm/Dedupe-v0` in `lists`, `llm/CsvToJson-v0` in
`csv_json`, `llm/InstructionFollowing-v0` in `instructions`, `llm/Extraction-v0` in
`extraction`; shared env and strict readers in `base`)."""
