"""The task and the model: problems and formats, the GPT, sampling, evaluation, rewards, the optimiser, configs."""
