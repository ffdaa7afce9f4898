"""The algorithms of the lecture: test-time compute, STaR, adaptive thinking, budgets, verifiers, search. No plots,
prose or findings: those are the experiments'."""
