"""Files: atomic writes, checkpoints (safetensors + JSON), run directories, plots, the HTML report, TensorBoard."""
