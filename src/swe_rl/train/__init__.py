"""Trainers that own the model: supervised warm start (sft); RL trainers hand over to integrations/."""
