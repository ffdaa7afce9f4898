"""What runs experiments: the result store, the lab and sweeps (on the executors)."""
