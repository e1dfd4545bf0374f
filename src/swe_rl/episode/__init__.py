"""One episode: a task, a model, a sandbox, the agent loop, a patch, a verdict (:func:`run.run_episode`)."""
