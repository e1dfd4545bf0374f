"""SFT data: golden trajectories from eval runs (:mod:`.from_runs`) and public trajectory sets
(:mod:`.trajsets`) as chat JSONL, tokenized JSONL with an assistant-only mask, and a data card."""
