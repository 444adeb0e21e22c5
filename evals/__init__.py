"""Evaluations of llm-compiler: plan correctness on BFCL (`python -m evals.bfcl`) and
end-to-end answers on the demo tools (`python -m evals.answers`)."""
